#!/bin/bash
# One H100, one call: the 8-layer Llama 3 8B at main 6654373 (RoPE's
# outputs saved, the fused GEMM outputs saved whole, the SwiGLU recompute
# joined to its gradient; train.codegen.bf16_weight_cast). GPU goldens of
# the 8B-shaped two layers (BF16, delayed FP8) and tiny-llama with the
# optimizer's BF16 copies; then tokens/s and peak memory of octet's FP8 and
# BF16 bundles (the BF16 weights cast in the step and by the optimizer)
# beside every PyTorch row (torch.compile FP8 and BF16, torchao.float8
# tensorwise and rowwise), octet's rows twice; octet-profile of the BF16 step.
set -u
C=carry/f1; W=carry/wheels/torchao-0.18.0-cp310-abi3-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl
O=$OUT/r; mkdir -p $O
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv > $O/gpu.txt
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw --format=csv,noheader -l 1 > $O/clocks.csv &
CL=$!
t() { echo "=== $1 ($SECONDS s)"; }
octet() { # NAME BUNDLE
  timeout 120 $C/octet-run $2 --bench --warmup 3 --steps 12 --json $O/$1.json > $O/$1.log 2>&1; tail -1 $O/$1.log
}
peer() { # NAME MODE
  timeout 150 python3 bench/peers/torch_llama.py --model llama3-8b-8l --seq 8192 --batch 1 --mode $2 --torchao-path $W --warmup 3 --steps 12 --out $O/$1.json > $O/$1.log 2>&1
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(round(r['tokens_per_s']), 'tok/s, peak', round(r['peak_mem_allocated_gib'], 2), 'GiB', r.get('sdpa_kernels', [])[:2])" $O/$1.json
}
{
for g in llama3-8b-2layer-bf16 llama3-8b-2layer tiny-llama-bf16-optimizer-cast; do
  t "golden $g"; timeout 90 $C/octet-run $C/g/$g/model.octet --golden $C/g/$g > $O/golden-$g.log 2>&1; echo "rc=$?"; tail -1 $O/golden-$g.log
done
t "octet fp8"; octet octet-fp8 $C/b/l8b-fp8.octet
t "torch fp8"; peer torch-fp8 fp8
t "torchao tensorwise"; peer torchao-tensorwise fp8ao_tensorwise
t "torchao rowwise"; peer torchao-rowwise fp8ao_rowwise
t "octet bf16"; octet octet-bf16 $C/b/l8b-bf16.octet
t "octet bf16 optimizer cast"; octet octet-bf16-opt $C/b/l8b-bf16-opt.octet
t "torch bf16"; peer torch-bf16 bf16
t "octet fp8 again"; octet octet-fp8-2 $C/b/l8b-fp8.octet
t "octet bf16 again"; octet octet-bf16-2 $C/b/l8b-bf16.octet
t "octet bf16 optimizer cast again"; octet octet-bf16-opt-2 $C/b/l8b-bf16-opt.octet
if [ $SECONDS -lt 480 ]; then t "torch bf16 again"; peer torch-bf16-2 bf16; fi
if [ $SECONDS -lt 520 ]; then t profile; timeout 60 $C/octet-profile $C/b/l8b-bf16.octet --top 60 > $O/profile-bf16.txt 2>&1; grep -E "train_microbatch:|optimizer_step:" $O/profile-bf16.txt; fi
t done
} 2>&1 | tee $O/summary.log
kill $CL
cd $OUT && tar czf r.tgz r && cp r/summary.log . && rm -rf r

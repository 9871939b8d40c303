#!/bin/bash
# One H100, one call: the 8-layer Llama 3 8B. GPU goldens of the merged
# main's FP8 paths (delayed with the step-local casts, the FP8 head whole,
# current scaling), then tokens/s and peak memory of octet's bundles
# (FP8 with the weights cast in the step, and with the optimizer's
# persistent cast; BF16 with the head over 2048-token chunks and whole)
# beside PyTorch's rows (torch.compile FP8 and BF16, torchao.float8
# tensorwise and rowwise), then octet-profile of the BF16 step.
set -u
C=carry/fin; W=carry/wheels/torchao-0.18.0-cp310-abi3-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl
O=$OUT/r; mkdir -p $O
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv > $O/gpu.txt
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw --format=csv,noheader -l 1 > $O/clocks.csv &
CL=$!
t() { echo "=== $1 ($SECONDS s)"; }
octet() { # NAME BUNDLE
  timeout 120 $C/run/octet-run $2 --bench --warmup 3 --steps 12 --json $O/$1.json > $O/$1.log 2>&1; tail -1 $O/$1.log
}
peer() { # NAME MODE
  timeout 150 python3 bench/peers/torch_llama.py --model llama3-8b-8l --seq 8192 --batch 1 --mode $2 --torchao-path $W --warmup 3 --steps 12 --out $O/$1.json > $O/$1.log 2>&1
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(round(r['tokens_per_s']), 'tok/s, peak', round(r['peak_mem_allocated_gib'], 2), 'GiB', r.get('sdpa_kernels'))" $O/$1.json
}
{
for g in l8b2-fp8 l8b2-fp8head l8b2-current; do
  t "golden $g"; timeout 90 $C/run/octet-run $C/golden/$g/model.octet --golden $C/golden/$g > $O/golden-$g.log 2>&1; echo "rc=$?"; tail -1 $O/golden-$g.log
done
t "octet fp8"; octet octet-fp8 $C/b8/llama3-8b-8l-fp8.octet
t "torch fp8"; peer torch-fp8 fp8
t "octet fp8 optcast"; octet octet-fp8-optcast $C/b8/llama3-8b-8l-fp8-optcast.octet
t "torchao tensorwise"; peer torchao-tensorwise fp8ao_tensorwise
t "torchao rowwise"; peer torchao-rowwise fp8ao_rowwise
t "octet bf16"; octet octet-bf16 $C/b8/llama3-8b-8l-bf16.octet
t "octet bf16 wholehead"; octet octet-bf16-wholehead $C/b8/llama3-8b-8l-bf16-wholehead.octet
t "torch bf16"; peer torch-bf16 bf16
t "octet fp8 again"; octet octet-fp8-2 $C/b8/llama3-8b-8l-fp8.octet
if [ $SECONDS -lt 480 ]; then t "octet bf16 wholehead again"; octet octet-bf16-wholehead-2 $C/b8/llama3-8b-8l-bf16-wholehead.octet; fi
if [ $SECONDS -lt 500 ]; then t profile; timeout 80 $C/prof/octet-profile $C/b8/llama3-8b-8l-bf16-wholehead.octet --top 60 > $O/profile-llama3-8b-8l-bf16-wholehead.txt 2>&1; grep -E "attention|train_microbatch:|optimizer_step:" $O/profile-llama3-8b-8l-bf16-wholehead.txt | head -8; fi
t done
} 2>&1 | tee $O/summary.log
kill $CL
cd $OUT && tar czf r.tgz r && cp r/summary.log . && rm -rf r

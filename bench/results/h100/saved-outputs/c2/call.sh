#!/bin/bash
# One H100, one call: Llama 3.2 1B and the attention kernels at main
# 6654373. GPU goldens of tiny-llama (BF16, delayed FP8, two microbatches);
# the attention kernels against the interpreter, then octet's attention
# bench three times, each beside PyTorch's SDPA backends (and head dim 64
# once); then the 1B's tokens/s and peak memory: octet FP8 and BF16 (the
# weights cast in the step and by the optimizer) beside every PyTorch row.
set -u
C=carry/f2; A=carry/attn2; W=carry/wheels/torchao-0.18.0-cp310-abi3-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl
O=$OUT/r; mkdir -p $O
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv > $O/gpu.txt
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw --format=csv,noheader -l 1 > $O/clocks.csv &
CL=$!
t() { echo "=== $1 ($SECONDS s)"; }
octet() { # NAME BUNDLE
  timeout 120 $C/octet-run $2 --bench --warmup 3 --steps 12 --json $O/$1.json > $O/$1.log 2>&1; tail -1 $O/$1.log
}
peer() { # NAME MODE
  timeout 150 python3 bench/peers/torch_llama.py --model llama3.2-1b --seq 4096 --batch 2 --mode $2 --torchao-path $W --warmup 3 --steps 12 --out $O/$1.json > $O/$1.log 2>&1
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(round(r['tokens_per_s']), 'tok/s, peak', round(r['peak_mem_allocated_gib'], 2), 'GiB', r.get('sdpa_kernels', [])[:2])" $O/$1.json
}
show() { python3 -c "import json,sys; [print(p['backend'],p.get('seq'),p.get('documents'),p.get('head_dim'),p['fwd_tflops'],p['bwd_tflops']) for p in json.load(open(sys.argv[1]))]" $1; }
{
for g in tiny-llama-bf16 tiny-llama tiny-llama-accumulate2; do
  t "golden $g"; timeout 60 $C/octet-run $C/g/$g/model.octet --golden $C/g/$g > $O/golden-$g.log 2>&1; echo "rc=$?"; tail -1 $O/golden-$g.log
done
for d in attention-hopper-bwd-kernels attention-hopper-kernels attention-kernels; do
  t "attention test $d"; timeout 90 $A/octet-gpu-attention-tests $A/$d --golden $A/attention-golden > $O/attention-test-$d.log 2>&1; echo "rc=$?"; grep -E "kernels failed|FAIL" $O/attention-test-$d.log | head -3
done
for i in 1 2 3; do
  t "attention bench $i"; timeout 90 $A/octet-gpu-attention-tests --bench $A/attention-bench-hopper-bwd-kernels 20 > $O/attention-octet-$i.json 2>/dev/null
  python3 -c "import json,sys; print(' '.join(f\"{x['op'][10:]}{x['seq']}/{x['documents']}/d{x['head_dim']}:{x['tflops']}\" for x in json.load(open(sys.argv[1]))))" $O/attention-octet-$i.json
  t "attention peers $i"; timeout 120 python3 $A/attention_torch.py --cases 8192:0,4096:0,8192:8 --iterations 20 > $O/attention-peers-$i.json 2>$O/attention-peers-$i.err; show $O/attention-peers-$i.json
done
t "attention peers d64"; timeout 120 python3 $A/attention_torch.py --cases 8192:0 --head-dim 64 --iterations 20 > $O/attention-peers-d64.json 2>$O/attention-peers-d64.err; show $O/attention-peers-d64.json
t "octet fp8"; octet octet-fp8 $C/b/l1b-fp8.octet
t "torch fp8"; peer torch-fp8 fp8
t "torchao tensorwise"; peer torchao-tensorwise fp8ao_tensorwise
t "torchao rowwise"; peer torchao-rowwise fp8ao_rowwise
t "octet bf16"; octet octet-bf16 $C/b/l1b-bf16.octet
t "octet bf16 optimizer cast"; octet octet-bf16-opt $C/b/l1b-bf16-opt.octet
t "torch bf16"; peer torch-bf16 bf16
if [ $SECONDS -lt 500 ]; then t "octet fp8 again"; octet octet-fp8-2 $C/b/l1b-fp8.octet; fi
if [ $SECONDS -lt 520 ]; then t "octet bf16 again"; octet octet-bf16-2 $C/b/l1b-bf16.octet; fi
if [ $SECONDS -lt 540 ]; then t "octet bf16 optimizer cast again"; octet octet-bf16-opt-2 $C/b/l1b-bf16-opt.octet; fi
t done
} 2>&1 | tee $O/summary.log
kill $CL
cd $OUT && tar czf r.tgz r && cp r/summary.log . && rm -rf r

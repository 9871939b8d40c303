#!/bin/bash
# One H100, one call: the Hopper attention backward in three builds of the
# same source (carry/attn/v0: both warpgroups in step at every query tile,
# as merged; v1: each warpgroup's dQ over its own 64 keys, all columns, a
# barrier of its own; v2: v1 with the warpgroups taking turns at the
# scores' GEMMs), checked against the interpreter and timed beside
# PyTorch's SDPA backends; then the 8-layer 8B BF16 step beside
# torch.compile BF16, octet-profile of it, and three GPU goldens.
set -u
A=carry/attn; G=carry/g1; O=$OUT/r; mkdir -p $O
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv > $O/gpu.txt
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw --format=csv,noheader -l 1 > $O/clocks.csv &
CL=$!
t() { echo "=== $1 ($SECONDS s)"; }
{
for v in v0 v1 v2; do
  t "test $v"; timeout 90 $A/octet-gpu-attention-tests $A/$v/test --golden $A/attention-golden > $O/test-$v.log 2>&1; echo "rc=$?"; grep -E "kernels failed|golden|FAIL" $O/test-$v.log | head -5
done
for v in v0 v1 v2 v0 v1 v2; do
  t "bench $v"; timeout 90 $A/octet-gpu-attention-tests --bench $A/$v/bench 20 > $O/bench-$v-$SECONDS.json 2>/dev/null
  python3 -c "import json,sys; print(' '.join(f\"{x['op'][10:]}{x['seq']}/{x['documents']}:{x['tflops']}\" for x in json.load(open(sys.argv[1]))))" $O/bench-$v-*.json | tail -1
done
t peers-d128; timeout 120 python3 $A/attention_torch.py --cases 8192:0,4096:0,8192:8 --iterations 20 > $O/peers-d128.json 2>$O/peers-d128.err
python3 -c "import json,sys; [print(p['backend'],p.get('seq'),p.get('documents'),p['fwd_tflops'],p['bwd_tflops']) for p in json.load(open(sys.argv[1]))]" $O/peers-d128.json
t peers-d64; timeout 120 python3 $A/attention_torch.py --cases 8192:0 --head-dim 64 --iterations 20 > $O/peers-d64.json 2>$O/peers-d64.err
python3 -c "import json,sys; [print(p['backend'],p.get('seq'),p.get('documents'),p['fwd_tflops'],p['bwd_tflops']) for p in json.load(open(sys.argv[1]))]" $O/peers-d64.json
for g in tiny-fp8 tiny-current l8b2-current; do
  t "golden $g"; timeout 90 $G/bin/octet-run $G/golden/$g/model.octet --golden $G/golden/$g > $O/golden-$g.log 2>&1; echo "rc=$?"; tail -1 $O/golden-$g.log
done
t "octet 8b bf16"; timeout 120 $G/bin/octet-run $G/b/llama3-8b-8l-bf16.octet --bench --warmup 3 --steps 12 --json $O/octet-llama3-8b-8l-bf16.json > $O/octet-llama3-8b-8l-bf16.log 2>&1; tail -1 $O/octet-llama3-8b-8l-bf16.log
t "torch 8b bf16"; timeout 150 python3 bench/peers/torch_llama.py --model llama3-8b-8l --seq 8192 --batch 1 --mode bf16 --warmup 3 --steps 12 --out $O/torch-llama3-8b-8l-bf16.json > $O/torch-llama3-8b-8l-bf16.log 2>&1
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(round(r['tokens_per_s']), 'tok/s, peak', round(r['peak_mem_allocated_gib'], 2), 'GiB')" $O/torch-llama3-8b-8l-bf16.json
t "octet 1b bf16"; timeout 120 $G/bin/octet-run $G/b/llama3.2-1b-bf16.octet --bench --warmup 3 --steps 12 --json $O/octet-llama3.2-1b-bf16.json > $O/octet-llama3.2-1b-bf16.log 2>&1; tail -1 $O/octet-llama3.2-1b-bf16.log
if [ $SECONDS -lt 420 ]; then t profile; timeout 90 $G/bin/octet-profile $G/b/llama3-8b-8l-bf16.octet --top 60 > $O/profile-llama3-8b-8l-bf16.txt 2>&1; head -30 $O/profile-llama3-8b-8l-bf16.txt; fi
t done
} 2>&1 | tee $O/summary.log
kill $CL
cd $OUT && tar czf r.tgz r && cp r/summary.log . && rm -rf r

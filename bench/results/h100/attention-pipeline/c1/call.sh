#!/bin/bash
# One H100, one call: builds of the Hopper attention backward from one
# source with a local switch (carry/attnv/vN-*; OCTET_ATTN_V at kernel
# build time). Each against the interpreter (poisoned outputs), then three
# rounds of the bench, every build and PyTorch's SDPA each round; clocks
# every 200 ms.
set -u
A=carry/attn2; V=carry/attnv
VS="${VS:-0 1}"
O=$OUT/r; mkdir -p $O
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv > $O/gpu.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader -lms 200 > $O/clocks.csv &
CL=$!
t() { echo "=== $1 ($SECONDS s)"; }
show() { python3 -c "import json,sys; [print(p['backend'],p.get('seq'),p.get('documents'),p.get('head_dim'),p['fwd_tflops'],p['bwd_tflops']) for p in json.load(open(sys.argv[1]))]" $1; }
{
for v in $VS; do
  t "test v$v"; timeout 90 $A/octet-gpu-attention-tests $V/v$v-test --golden $A/attention-golden > $O/test-v$v.log 2>&1; echo "rc=$?"; grep -E "kernels failed|FAIL|passed" $O/test-v$v.log | head -3
done
for r in 1 2 3; do
  for v in $VS; do
    t "bench v$v round $r"; timeout 60 $A/octet-gpu-attention-tests --bench $V/v$v-bench 20 > $O/bench-v$v-$r.json 2>/dev/null
    python3 -c "import json,sys; print(' '.join(f\"{x['op'][10:]}{x['seq']}/{x['documents']}/d{x['head_dim']}:{x['tflops']}\" for x in json.load(open(sys.argv[1]))))" $O/bench-v$v-$r.json
  done
  t "peers $r"; timeout 120 python3 $A/attention_torch.py --cases 8192:0,4096:0 --iterations 20 > $O/peers-$r.json 2>$O/peers-$r.err; show $O/peers-$r.json
done
t done
} 2>&1 | tee $O/summary.log
kill $CL
cd $OUT && tar czf r.tgz r && cp r/summary.log . && rm -rf r

#!/bin/bash
# One H100, one call: four builds of the Hopper attention backward (with the
# D/8-lanes prep) from local switches: s0 as c2; s1 dSᵀ stored with
# stmatrix; s2 each n-tile's lse and D read as one 8-byte load; s3 both.
# Each against the interpreter, then the bench alternating, PyTorch beside.
set -u
A=carry/attn; O=$OUT/r; mkdir -p $O
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv > $O/gpu.txt
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw --format=csv,noheader -l 1 > $O/clocks.csv &
CL=$!
t() { echo "=== $1 ($SECONDS s)"; }
{
for v in s0 s1 s2 s3; do
  t "test $v"; timeout 90 $A/octet-gpu-attention-tests $A/$v/test --golden $A/attention-golden > $O/test-$v.log 2>&1; echo "rc=$?"; grep -E "kernels failed|FAIL" $O/test-$v.log | head -5
done
for i in 1 2; do for v in s0 s1 s2 s3; do
  t "bench $v $i"; timeout 90 $A/octet-gpu-attention-tests --bench $A/$v/bench 20 > $O/bench-$v-$i.json 2>/dev/null
  python3 -c "import json,sys; print(' '.join(f\"{x['op'][10:]}{x['seq']}/{x['documents']}/d{x['head_dim']}:{x['tflops']}\" for x in json.load(open(sys.argv[1])) if x['op'].endswith('bwd')))" $O/bench-$v-$i.json
done; done
t peers-d128; timeout 120 python3 $A/attention_torch.py --cases 8192:0,4096:0 --iterations 20 > $O/peers-d128.json 2>$O/peers-d128.err
python3 -c "import json,sys; [print(p['backend'],p.get('seq'),p.get('documents'),p['fwd_tflops'],p['bwd_tflops']) for p in json.load(open(sys.argv[1]))]" $O/peers-d128.json
t done
} 2>&1 | tee $O/summary.log
kill $CL
cd $OUT && tar czf r.tgz r && cp r/summary.log . && rm -rf r

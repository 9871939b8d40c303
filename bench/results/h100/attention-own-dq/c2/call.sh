#!/bin/bash
# One H100, one call: the attention backward's prep with D/8 lanes a row
# (carry/attn2, bench/attention_bwd_gpu.sh --prepare build carry/attn2):
# the three kernel folders against the interpreter, then the bench beside
# PyTorch's SDPA backends at head dim 128 and 64.
set -u
A=carry/attn2; O=$OUT/r; mkdir -p $O
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv > $O/gpu.txt
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw --format=csv,noheader -l 1 > $O/clocks.csv &
CL=$!
t() { echo "=== $1 ($SECONDS s)"; }
{
for d in attention-hopper-bwd-kernels attention-hopper-kernels attention-kernels; do
  t "test $d"; timeout 90 $A/octet-gpu-attention-tests $A/$d --golden $A/attention-golden > $O/test-$d.log 2>&1; echo "rc=$?"; grep -E "kernels failed|golden|FAIL" $O/test-$d.log | head -5
done
for i in 1 2; do
  t "bench $i"; timeout 90 $A/octet-gpu-attention-tests --bench $A/attention-bench-hopper-bwd-kernels 20 > $O/bench-$i.json 2>/dev/null
  python3 -c "import json,sys; print(' '.join(f\"{x['op'][10:]}{x['seq']}/{x['documents']}/d{x['head_dim']}:{x['ms']}ms:{x['tflops']}\" for x in json.load(open(sys.argv[1]))))" $O/bench-$i.json
  t "peers-d128 $i"; timeout 120 python3 $A/attention_torch.py --cases 8192:0,4096:0,8192:8 --iterations 20 > $O/peers-d128-$i.json 2>$O/peers-d128-$i.err
  python3 -c "import json,sys; [print(p['backend'],p.get('seq'),p.get('documents'),p['fwd_tflops'],p['bwd_tflops']) for p in json.load(open(sys.argv[1]))]" $O/peers-d128-$i.json
done
t peers-d64; timeout 120 python3 $A/attention_torch.py --cases 8192:0 --head-dim 64 --iterations 20 > $O/peers-d64.json 2>$O/peers-d64.err
python3 -c "import json,sys; [print(p['backend'],p.get('seq'),p.get('documents'),p['fwd_tflops'],p['bwd_tflops']) for p in json.load(open(sys.argv[1]))]" $O/peers-d64.json
t done
} 2>&1 | tee $O/summary.log
kill $CL
cd $OUT && tar czf r.tgz r && cp r/summary.log . && rm -rf r

#!/bin/bash
# One H100, one call: the attention kernels of the branch (the backward's
# dK in flight across steps at head dim 128, its side vectors read in
# pairs) against the interpreter (poisoned outputs; the mma.sync kernels,
# the Hopper forward, the Hopper backward); bench/attention_bench.sh with
# them (octet's three builds, PyTorch's cuDNN and flash SDPA), then two
# more rounds of the Hopper backward's bench and PyTorch's SDPA, main's
# (ee8b626) Hopper backward beside it each round; the goldens of
# tiny-llama (FP8, BF16) and of the 8B-shaped two layers (FP8, BF16) with
# the branch's bundles. Clocks every 200 ms.
set -u
C=carry/fa; K=$C/k
O=$OUT/r; mkdir -p $O
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv > $O/gpu.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader -lms 200 > $O/clocks.csv &
CL=$!
t() { echo "=== $1 ($SECONDS s)"; }
show() { python3 -c "import json,sys; [print(p['backend'],p.get('seq'),p.get('documents'),p.get('head_dim'),p['fwd_tflops'],p['bwd_tflops']) for p in json.load(open(sys.argv[1]))]" $1; }
line() { python3 -c "import json,sys; print(' '.join(f\"{x['op'][10:]}{x['seq']}/{x['documents']}/d{x['head_dim']}:{x['tflops']}\" for x in json.load(open(sys.argv[1]))))" $1; }
{
for k in attention-kernels attention-hopper-kernels attention-hopper-bwd-kernels; do
  t "test $k"; timeout 90 $C/octet-gpu-attention-tests $K/$k --golden $K/attention-golden > $O/test-$k.log 2>&1; echo "rc=$?"; grep -E "kernels failed|FAIL" $O/test-$k.log | head -3
done
t "main backward round 1"; timeout 60 $C/octet-gpu-attention-tests --bench $K/main-bench-hopper-bwd-kernels 20 > $O/main-bwd-1.json 2>/dev/null; line $O/main-bwd-1.json
t "attention_bench.sh"; mkdir -p $O/bench1; OUT=$O/bench1 timeout 300 bash bench/attention_bench.sh $C/octet-gpu-attention-tests $K/attention-bench-kernels $K/attention-bench-hopper-kernels 20 $K/attention-bench-hopper-bwd-kernels > $O/bench1.log 2>&1; echo "rc=$?"
python3 -c "
import json; r=json.load(open('$O/bench1/attention.json'))
for c in r['cases']:
    h=c['octet']['hopper']; hb=c['octet']['hopper_bwd']
    print(c['seq'],c['documents'],c['head_dim'],'fwd',h['fwd_tflops'],'bwd',hb['bwd_tflops'],{k:v for k,v in c.items() if k.startswith(('fwd_vs','bwd_vs'))})
"
for r in 2 3; do
  t "main backward round $r"; timeout 60 $C/octet-gpu-attention-tests --bench $K/main-bench-hopper-bwd-kernels 20 > $O/main-bwd-$r.json 2>/dev/null; line $O/main-bwd-$r.json
  t "branch round $r"; timeout 60 $C/octet-gpu-attention-tests --bench $K/attention-bench-hopper-bwd-kernels 20 > $O/branch-$r.json 2>/dev/null; line $O/branch-$r.json
  t "peers $r"; timeout 120 python3 bench/attention_torch.py --cases 8192:0,4096:0,8192:8 --iterations 20 > $O/peers-$r.json 2>$O/peers-$r.err; show $O/peers-$r.json
done
t "peers d64"; timeout 120 python3 bench/attention_torch.py --cases 8192:0 --head-dim 64 --iterations 20 > $O/peers-d64.json 2>$O/peers-d64.err; show $O/peers-d64.json
for g in tiny-llama tiny-llama-bf16 llama3-8b-2layer llama3-8b-2layer-bf16; do
  t "golden $g"; timeout 100 $C/octet-run $C/g/$g/model.octet --golden $C/g/$g > $O/golden-$g.log 2>&1; echo "rc=$?"; tail -1 $O/golden-$g.log
done
t done
} 2>&1 | tee $O/summary.log
kill $CL
cd $OUT && tar czf r.tgz r && cp r/summary.log . && rm -rf r

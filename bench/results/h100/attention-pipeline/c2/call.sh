#!/bin/bash
# One H100, one call: the Hopper attention backward with dK in flight
# across steps (v3, the branch; v2 the same with the side vectors read in
# 8-byte pairs; v0 main): each build against the interpreter (poisoned
# outputs), three rounds of the kernel bench (the builds, then PyTorch's
# SDPA), cuDNN at head dim 64; the 8B-shaped 2-layer goldens (FP8, BF16)
# with the branch's bundles; the 8-layer 8B bench step, main's bundles and
# the branch's alternating, FP8 and BF16, and octet-profile of both FP8
# steps. Clocks every 200 ms.
set -u
A=carry/attn2; V=carry/attnv; C=carry/ap
VS="0 3 2"
O=$OUT/r; mkdir -p $O
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv > $O/gpu.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader -lms 200 > $O/clocks.csv &
CL=$!
t() { echo "=== $1 ($SECONDS s)"; }
show() { python3 -c "import json,sys; [print(p['backend'],p.get('seq'),p.get('documents'),p.get('head_dim'),p['fwd_tflops'],p['bwd_tflops']) for p in json.load(open(sys.argv[1]))]" $1; }
octet() { # NAME BUNDLE
  timeout 120 $C/octet-run $2 --bench --warmup 3 --steps 12 --json $O/$1.json > $O/$1.log 2>&1; tail -1 $O/$1.log
}
{
for v in $VS; do
  t "test v$v"; timeout 90 $A/octet-gpu-attention-tests $V/v$v-test --golden $A/attention-golden > $O/test-v$v.log 2>&1; echo "rc=$?"; grep -E "kernels failed|FAIL|passed" $O/test-v$v.log | head -3
done
for r in 1 2 3; do
  for v in $VS; do
    t "bench v$v round $r"; timeout 60 $A/octet-gpu-attention-tests --bench $V/v$v-bench 20 > $O/bench-v$v-$r.json 2>/dev/null
    python3 -c "import json,sys; print(' '.join(f\"{x['op'][10:]}{x['seq']}/{x['documents']}/d{x['head_dim']}:{x['tflops']}\" for x in json.load(open(sys.argv[1]))))" $O/bench-v$v-$r.json
  done
  t "peers $r"; timeout 120 python3 $A/attention_torch.py --cases 8192:0,4096:0,8192:8 --iterations 20 > $O/peers-$r.json 2>$O/peers-$r.err; show $O/peers-$r.json
done
t "peers d64"; timeout 120 python3 $A/attention_torch.py --cases 8192:0 --head-dim 64 --iterations 20 > $O/peers-d64.json 2>$O/peers-d64.err; show $O/peers-d64.json
for g in llama3-8b-2layer llama3-8b-2layer-bf16; do
  t "golden $g"; timeout 90 $C/octet-run $C/g/$g/model.octet --golden $C/g/$g > $O/golden-$g.log 2>&1; echo "rc=$?"; tail -1 $O/golden-$g.log
done
for r in 1 2; do
  for p in fp8 bf16; do
    for n in main new; do t "step $p $n $r"; octet step-$p-$n-$r $C/b/l8b-$p-$n.octet; done
  done
done
for n in main new; do
  t "profile fp8 $n"; timeout 90 $C/octet-profile $C/b/l8b-fp8-$n.octet --top 60 > $O/profile-fp8-$n.txt 2>&1; grep -E "train_microbatch:|optimizer_step:|attention_bwd" $O/profile-fp8-$n.txt | head -8
done
t done
} 2>&1 | tee $O/summary.log
kill $CL
cd $OUT && tar czf r.tgz r && cp r/summary.log . && rm -rf r

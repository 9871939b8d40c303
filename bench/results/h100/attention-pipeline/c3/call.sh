#!/bin/bash
# One H100, one call: the bench steps with main's bundles (ee8b626) and the
# branch's (the attention backward's dK in flight across steps at head dim
# 128, its side vectors read in pairs), alternating, two rounds: the
# 8-layer Llama 3 8B and Llama 3.2 1B, FP8 and BF16; then octet-profile of
# both FP8 steps of each model. Clocks every 200 ms.
set -u
C=carry/fs
O=$OUT/r; mkdir -p $O
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv > $O/gpu.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader -lms 200 > $O/clocks.csv &
CL=$!
t() { echo "=== $1 ($SECONDS s)"; }
octet() { # NAME BUNDLE
  timeout 120 $C/octet-run $2 --bench --warmup 3 --steps 12 --json $O/$1.json > $O/$1.log 2>&1; tail -1 $O/$1.log
}
{
for r in 1 2; do
  for m in llama3-8b-8l-fp8 llama3-8b-8l-bf16 llama3.2-1b-fp8 llama3.2-1b-bf16; do
    for n in main new; do t "step $m $n $r"; octet $m-$n-$r $C/b/$m-$n.octet; done
  done
done
for m in llama3-8b-8l-fp8 llama3.2-1b-fp8; do
  for n in main new; do
    t "profile $m $n"; timeout 90 $C/octet-profile $C/b/$m-$n.octet --top 80 > $O/profile-$m-$n.txt 2>&1; grep -E "train_microbatch:|optimizer_step:|attention_" $O/profile-$m-$n.txt | head -12
  done
done
t done
} 2>&1 | tee $O/summary.log
kill $CL
cd $OUT && tar czf r.tgz r && cp r/summary.log . && rm -rf r

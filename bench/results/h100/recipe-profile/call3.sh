#!/bin/bash
# One H100: CUDA graphs against eager steps (8B-8l, 1B FP8), and where the
# 8B step goes under delayed and blockwise scaling (octet-profile).
set -u
C=carry/n1; R=$C/bin/octet-run-h; O=$OUT/c3; mkdir -p $O
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv > $O/gpu.txt
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw --format=csv,noheader -l 1 > $O/clocks.csv &
CL=$!
for m in llama3-8b-8l-fp8 llama3.2-1b-fp8; do
  for g in graph eager; do
    a=""; [ $g = eager ] && a="--no-graph"
    echo "=== $m $g ($SECONDS s)"
    timeout 150 $R $C/$m-one.octet --bench --warmup 3 --steps 12 $a --json $O/$m-$g.json > $O/$m-$g.log 2>&1; tail -1 $O/$m-$g.log
  done
done
for m in llama3-8b-8l-fp8 llama3-8b-8l-fp8blockwise; do
  echo "=== profile $m ($SECONDS s)"
  timeout 200 $C/bin/octet-profile $C/$m-one.octet --top 40 > $O/profile-$m.txt 2>&1; head -30 $O/profile-$m.txt
done
kill $CL
cd $OUT && tar czf c3.tgz c3 && rm -rf c3

#!/bin/bash
# ZeRO-1's optimizer step with the largest buckets first and the casts in
# the gathers' order, against main before (eb6f462) and the in-place
# gathers alone, with one GPU in the same call; then tiny-llama FP8 and
# BF16 at data 2 against one GPU (20 steps, golden tolerances).
set -u
export NCCL_NVLS_ENABLE=0
C=carry/n5; O=$OUT/c5; mkdir -p $O
. bench/launch2.sh; export LAUNCH2_TIMEOUT=150
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv > $O/gpu.txt
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw --format=csv,noheader -l 1 > $O/clocks.csv &
CL=$!
R=$C/bin/octet-run-h
for m in llama3-8b-8l-fp8 llama3.2-1b-fp8; do
  echo "=== $m one ($SECONDS s)"
  timeout 150 $R $C/after/$m-one.octet --bench --warmup 3 --steps 12 --json $O/$m-one.json > $O/$m-one.log 2>&1; tail -1 $O/$m-one.log
  V="before after"; [ $m = llama3-8b-8l-fp8 ] && V="before h1 after"
  for v in $V; do
    echo "=== $m dp2-zero1 $v ($SECONDS s)"
    launch2 $O/$m-$v.log $C/$v/$m-dp2-zero1.octet --bench --warmup 3 --steps 12 --json $O/$m-$v.json
    tail -1 $O/$m-$v.log
  done
done
python3 - $O <<'PY'
import json,glob,sys
for f in sorted(glob.glob(sys.argv[1]+'/*.json')):
    j=json.load(open(f)); print(f.split('/')[-1], round(j['tokens_per_s_per_gpu']), round(j['step_s_median']*1e3,1), [(p['program'], round(p['median_ms'],2), round(p['median_join_wait_ms'],2)) for p in j['programs']])
PY
R=$C/bin/octet-run; D=$C/z1; W=$(mktemp -d); bad=0
. bench/zero1_common.sh
LOSS_TOL=2e-3; NORM_TOL=2e-2; zero1_against_one tiny-fp8 > $O/tiny-fp8-check.log 2>&1; tail -22 $O/tiny-fp8-check.log
LOSS_TOL=1e-3; NORM_TOL=5e-3; zero1_against_one tiny-bf16 > $O/tiny-bf16-check.log 2>&1; tail -22 $O/tiny-bf16-check.log
echo "correctness bad=$bad"
kill $CL
cd $OUT && tar czf c5.tgz c5 && rm -rf c5

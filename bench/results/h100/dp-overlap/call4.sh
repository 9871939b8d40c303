#!/bin/bash
# Diagnostic: data 2 ZeRO-1 with the side-stream collectives skipped
# (a local build, results wrong by design; times only).
set -u
export NCCL_NVLS_ENABLE=0
C=carry/n1; O=$OUT/c4; mkdir -p $O
. bench/launch2.sh; export LAUNCH2_TIMEOUT=150
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw --format=csv,noheader -l 1 > $O/clocks.csv &
CL=$!
for m in llama3-8b-8l-fp8 llama3.2-1b-fp8; do
  if [ $m = llama3-8b-8l-fp8 ]; then V="none rs side"; else V="none rs"; fi
  for v in $V; do
    echo "=== $m skip $v ($SECONDS s)"
    R="$C/bin/octet-run-skip"
    OCTET_DEBUG_SKIP=$v launch2 $O/$m-$v.log $C/$m-dp2-zero1.octet --bench --warmup 3 --steps 10 --gemm-heuristic --json $O/$m-$v.json
    tail -1 $O/$m-$v.log
  done
done
kill $CL
python3 - $O <<'PY'
import json,glob,sys
for f in sorted(glob.glob(sys.argv[1]+'/*.json')):
    j=json.load(open(f)); print(f.split('/')[-1], round(j['tokens_per_s_per_gpu']), [(p['program'], round(p['median_ms'],2), round(p['median_join_wait_ms'],2), round(p['median_main_collective_ms'],2)) for p in j['programs']])
PY
cd $OUT && tar czf c4.tgz c4 && rm -rf c4

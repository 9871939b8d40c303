#!/bin/bash
# --comm-sms at data 2 with ZeRO-1 against one GPU (8B-8l and 1B FP8).
set -u
export NCCL_NVLS_ENABLE=0
C=carry/n1; R=$C/bin/octet-run-h; O=$OUT/c2; mkdir -p $O
. bench/launch2.sh; export LAUNCH2_TIMEOUT=150
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv > $O/gpu.txt
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw --format=csv,noheader -l 1 > $O/clocks.csv &
CL=$!
S=12
for m in llama3-8b-8l-fp8 llama3.2-1b-fp8; do
  echo "=== $m one ($SECONDS s)"
  timeout 150 $R $C/$m-one.octet --bench --warmup 3 --steps $S --json $O/$m-one.json > $O/$m-one.log 2>&1; tail -1 $O/$m-one.log
  if [ $m = llama3-8b-8l-fp8 ]; then V="0 8 16 24"; else V="0 8 16"; fi
  for v in $V; do
    echo "=== $m dp2-zero1 --comm-sms $v ($SECONDS s)"
    launch2 $O/$m-sms$v.log $C/$m-dp2-zero1.octet --bench --warmup 3 --steps $S --comm-sms $v --json $O/$m-sms$v.json
    tail -1 $O/$m-sms$v.log
  done
done
kill $CL
cd $OUT && tar czf c2.tgz c2 && rm -rf c2

#!/bin/bash
# Llama 3.2 1B FP8 with BF16 weight gradients at data 2 with ZeRO-1: the
# gradient bucket size (train.parallel.bucket_elements: the default 40M,
# 20M, 80M, 160M) against one GPU, in one call.
set -u
export NCCL_NVLS_ENABLE=0
C=carry/k15; O=$OUT/b1; mkdir -p $O
. bench/launch2.sh; export LAUNCH2_TIMEOUT=120
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv > $O/gpu.txt
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw --format=csv,noheader -l 1 > $O/clocks.csv &
CL=$!
R=$C/bin/octet-run-h
echo "=== one ($SECONDS s)"
timeout 120 $R $C/one.octet --bench --warmup 3 --steps 12 --json $O/one.json > $O/one.log 2>&1; tail -1 $O/one.log
for n in 0 20000000 80000000 160000000; do
  echo "=== buckets $n ($SECONDS s)"
  launch2 $O/b$n.log $C/dp2-b$n.octet --bench --warmup 3 --steps 12 --json $O/b$n.json
  tail -1 $O/b$n.log
done
kill $CL
python3 - $O <<'PY'
import json,glob,sys
for f in sorted(glob.glob(sys.argv[1]+'/*.json')):
    j=json.load(open(f)); print(f.split('/')[-1], round(j['tokens_per_s_per_gpu']), round(j['step_s_median']*1e3,1), [(p['program'], round(p['median_ms'],2)) for p in j['programs']])
PY
cd $OUT && tar czf b1.tgz b1 && rm -rf b1

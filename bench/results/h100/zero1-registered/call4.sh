#!/bin/bash
# 2 x H100: step 1 of two 8B-shaped layers in BF16 at data 2, replicated
# and ZeRO-1, against one GPU: every checkpoint tensor within the golden
# bounds (the part call 3 left out).
set -u
export NCCL_NVLS_ENABLE=0
O=$OUT/c4; mkdir -p $O
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv > $O/gpu.txt
bash bench/data_parallel_gpu.sh carry/dp/bin/octet-run carry/dp $O/dp step1-l8b2-bf16 > $O/dp.log 2>&1; echo "rc $?"
grep -E "^===|PASS|FAIL|worst|within|bound" $O/dp.log | tail -12
cd $OUT && tar czf c4.tgz c4 && rm -rf c4

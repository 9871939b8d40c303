#!/bin/bash
# 2 x H100: the GPU tests of what changed since they last ran (the initial
# values' fill in the runtime tests, the Runtime/Trainer moves, the
# registered-buffer check),
# then bench/zero1_fp8_gpu.sh on the registered arenas (the default).
set -u
export NCCL_NVLS_ENABLE=0
C=carry/s14; O=$OUT/c1; mkdir -p $O
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv > $O/gpu.txt
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw --format=csv,noheader -l 1 > $O/clocks.csv &
CL=$!
t() { echo "=== $1 ($SECONDS s)"; }
t gpu.runtime;  (cd $C/gpu-runtime && ./octet-gpu-runtime-tests) > $O/gpu-runtime.log 2>&1; tail -3 $O/gpu-runtime.log
t gpu.bundle;   (cd $C/gpu-bundle && ./octet-gpu-bundle-tests) > $O/gpu-bundle.log 2>&1; tail -3 $O/gpu-bundle.log
t gpu.comm;     timeout 120 $C/gpu-comm/octet-comm-gpu-test --gpus 2 > $O/gpu-comm.log 2>&1; echo "rc $?"; tail -3 $O/gpu-comm.log
t zero1_fp8_gpu; bash bench/zero1_fp8_gpu.sh $C/bin/octet-run $C/z1 $O/z1 > $O/zero1-run.log 2>&1; echo "rc $?"
grep -E "^===|^--|above|FAIL|PASS|rc rank|tokens/s" $O/zero1-run.log | tail -40
t done
kill $CL
cd $OUT && tar czf c1.tgz c1 && rm -rf c1

#!/bin/bash
# 2 x H100: the GPU bundle tests with the first-microbatch test rewriting
# its batch before each run; then data 2 against one GPU with this main's
# ZeRO-1 (sharded masters, registered arenas): step 1 of tiny-llama and of
# two 8B-shaped layers, every checkpoint tensor within the golden bounds
# (bench/dp_equivalence.py), and 200 steps of tiny-llama against one GPU
# (bench/loss_curve.py); the 8B-shaped BF16 step only if the call has time.
set -u
export NCCL_NVLS_ENABLE=0
O=$OUT/c3; mkdir -p $O
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv > $O/gpu.txt
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw --format=csv,noheader -l 2 > $O/clocks.csv &
CL=$!
t() { echo "=== $1 ($SECONDS s)"; }
t "bundle tests"
B=/work/main/build/tests/gpu/bundle; mkdir -p $B && cp carry/s15/gpu-bundle/*.octet $B/
(cd carry/s15/gpu-bundle && ./octet-gpu-bundle-tests) > $O/gpu-bundle.log 2>&1; grep -E "^\[ +(OK|FAILED|PASSED) " $O/gpu-bundle.log
t "data 2 against one GPU"
bash bench/data_parallel_gpu.sh carry/dp/bin/octet-run carry/dp $O/dp step1-tiny-fp8 step1-tiny-bf16 curve-fp8 curve-bf16 step1-l8b2-fp8 > $O/dp.log 2>&1; echo "rc $?"
grep -E "^===|PASS|FAIL|worst|within|bound" $O/dp.log | tail -30
if [ $SECONDS -lt 300 ]; then
  t "8B-shaped BF16 step 1"
  bash bench/data_parallel_gpu.sh carry/dp/bin/octet-run carry/dp $O/dp step1-l8b2-bf16 > $O/dp-l8b2-bf16.log 2>&1; echo "rc $?"
  grep -E "^===|PASS|FAIL|worst|within|bound" $O/dp-l8b2-bf16.log | tail -10
else t "8B-shaped BF16 step 1 left out (no time)"; fi
t done
kill $CL
cd $OUT && tar czf c3.tgz c3 && rm -rf c3

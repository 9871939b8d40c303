#!/bin/bash
# Two H100s (kind nvidia-h100-x2), one call: this main's data-parallel
# paths, FP8 weights cast in the step now the default at data 2 with a
# replicated optimizer (ZeRO-1 keeps the optimizer's cast). Data 2 against
# one GPU at step 1 (bench/data_parallel_gpu.sh), then the ZeRO-1 FP8
# checks (bench/zero1_fp8_gpu.sh: 20 steps of delayed and current FP8,
# tokens/s of the 8-layer 8B at data 2, kill -9 of a rank, a checkpoint
# moved between layouts).
set -u
export NCCL_NVLS_ENABLE=0
O=$OUT/r; mkdir -p $O
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv > $O/gpu.txt
{
echo "=== data_parallel_gpu.sh ($SECONDS s)"
timeout 150 bash bench/data_parallel_gpu.sh carry/zbin/octet-run carry/z1 $O/dp step1-tiny-fp8 step1-tiny-bf16 2>&1 | grep -E "===|PASS|FAIL|pass|fail|within|worst" | head -30
echo "=== zero1_fp8_gpu.sh ($SECONDS s)"
timeout 330 bash bench/zero1_fp8_gpu.sh carry/zbin/octet-run carry/z1 $O/z1 2>&1 | grep -E "===|PASS|FAIL|pass|fail|within|rank|tokens" | head -40
echo "=== done ($SECONDS s)"
} 2>&1 | tee $O/summary.log
cd $OUT && tar czf r.tgz r && cp r/summary.log . && rm -rf r

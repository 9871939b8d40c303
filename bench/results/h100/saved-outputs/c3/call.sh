#!/bin/bash
# Two H100s (kind nvidia-h100-x2), one call: main 6654373's data-parallel
# paths (RoPE's outputs saved, the fused outputs saved whole, SwiGLU's
# recompute joined to its gradient). Data 2, replicated and ZeRO-1, against
# one GPU at step 1 for tiny-llama FP8 and BF16 (bench/data_parallel_gpu.sh,
# bench/dp_equivalence.py within the golden bounds), and 200 steps of BF16
# on one GPU and at data 2 with ZeRO-1 (curve-bf16).
set -u
export NCCL_NVLS_ENABLE=0
O=$OUT/r; mkdir -p $O
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv > $O/gpu.txt
{
echo "=== data_parallel_gpu.sh ($SECONDS s)"
timeout 240 bash bench/data_parallel_gpu.sh carry/dp/bin/octet-run carry/dp $O/dp step1-tiny-fp8 step1-tiny-bf16 curve-bf16 2>&1 | grep -E "===|PASS|FAIL|pass|fail|within|worst|window|bound" | head -40
echo "rc=${PIPESTATUS[0]}"
echo "=== done ($SECONDS s)"
} 2>&1 | tee $O/summary.log
cd $OUT && tar czf r.tgz r && cp r/summary.log . && rm -rf r

#!/bin/bash
# 2 x H100: the bundle GPU tests (at the build path their bundles are
# compiled to) and tiny-llama's FP8 golden on the GPU; then data-parallel
# throughput of the default FP8 bench specs (f32 weight gradients) with
# the PyTorch peers (one GPU, FSDP2, DDP as the budget allows) and each
# bundle's collectives alone, then octet alone on the BF16-gradient specs.
set -u
export NCCL_NVLS_ENABLE=0
C=carry/s14; O=$OUT/c2; mkdir -p $O
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv > $O/gpu.txt
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw --format=csv,noheader -l 1 > $O/clocks.csv &
CL=$!
t() { echo "=== $1 ($SECONDS s)"; }
t gpu.bundle
B=/work/main/build/tests/gpu/bundle; mkdir -p $B && cp $C/gpu-bundle/*.octet $B/
(cd $C/gpu-bundle && ./octet-gpu-bundle-tests) > $O/gpu-bundle.log 2>&1; tail -3 $O/gpu-bundle.log
t gpu.golden.tiny-llama-fp8
timeout 120 $C/bin/octet-run $C/golden/tiny-llama-fp8/model.octet --golden $C/golden/tiny-llama-fp8 > $O/golden-fp8.log 2>&1; echo "rc $?"; tail -3 $O/golden-fp8.log
t "throughput, FP8"
VARIANTS=dp2-zero1 BUDGET_S=330 bash bench/data_parallel_throughput.sh $C/bin/octet-run $C/dpt $O/fp8 > $O/fp8.out 2>&1
grep -vE "^(step|clocks)" $O/fp8.out | tail -40
t "throughput, FP8 with BF16 weight gradients, octet alone"
MODELS="llama3-8b-8l-fp8-bf16grad llama3.2-1b-fp8-bf16grad" PEERS=0 VARIANTS=dp2-zero1 BUDGET_S=140 \
  bash bench/data_parallel_throughput.sh $C/bin/octet-run $C/dpt $O/bf16grad > $O/bf16grad.out 2>&1
grep -E "tok/s|beside compute" $O/bf16grad.out
t done
kill $CL
cd $OUT && tar czf c2.tgz c2 && rm -rf c2

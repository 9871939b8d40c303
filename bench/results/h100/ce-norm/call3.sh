#!/bin/bash
# One H100: the AdamW kernel without per-element divisions against the
# reference interpreter (the kernel oracle's whole-ops cases, AdamW and
# the global norm and cross-entropy's neighbours) and tiny-llama's BF16
# golden on the GPU with all three kernel changes.
set -u
C=carry/s17; O=$OUT/c3; mkdir -p $O
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv > $O/gpu.txt
echo "=== kernel oracle"
$C/cg/octet-gpu-codegen-tests $C/cg/kernels-whole-ops $C/cg/golden-whole-ops > $O/oracle.log 2>&1; echo "rc $?"
grep -E "adamw|kernels failed" $O/oracle.log | grep -E "PASS|FAIL|failed|out0|out1" | tail -12
echo "=== golden tiny-llama-bf16"
timeout 120 $C/bin/octet-run $C/golden-bf16/model.octet --golden $C/golden-bf16 > $O/golden-bf16.log 2>&1; echo "rc $?"; tail -7 $O/golden-bf16.log
cd $OUT && tar czf c3.tgz c3 && rm -rf c3

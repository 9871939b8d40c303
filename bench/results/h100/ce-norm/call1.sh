#!/bin/bash
# One H100: the rewritten cross-entropy and global-norm kernels against
# the reference interpreter (the kernel oracle's whole-ops and
# cross-entropy cases) and tiny-llama's BF16 golden on the GPU (the
# gradient written over the logits, the norm over every gradient).
set -u
C=carry/s16; O=$OUT/c1; mkdir -p $O
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv > $O/gpu.txt
t() { echo "=== $1 ($SECONDS s)"; }
t "kernel oracle"
$C/cg/octet-gpu-codegen-tests $C/cg/kernels-whole-ops $C/cg/golden-whole-ops $C/cg/kernels-cross-entropy $C/cg/golden-cross-entropy > $O/oracle.log 2>&1; echo "rc $?"
grep -E "FAIL|PASS|kernels failed|worst" $O/oracle.log | tail -30
t "golden tiny-llama-bf16"
timeout 120 $C/bin/octet-run $C/golden/tiny-llama-bf16/model.octet --golden $C/golden/tiny-llama-bf16 > $O/golden-bf16.log 2>&1; echo "rc $?"; tail -8 $O/golden-bf16.log
t done
cd $OUT && tar czf c1.tgz c1 && rm -rf c1

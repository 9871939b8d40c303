#!/usr/bin/env bash
# The Hopper attention backward (octet-attention-to-gpu hopper-backward=1)
# on one H100 in one call:
#   tests  the kernels of tests/gpu/codegen/attention-small.mlir with both
#          Hopper kernels against the interpreter, outputs and workspace
#          poisoned, and on the interpreter's golden (gpu.attention-hopper-
#          backward); the mma.sync and Hopper-forward folders too, as the
#          baseline on the same GPU;
#   bench  bench/attention_bench.sh with the Hopper-backward folder: octet's
#          three kernel sets beside PyTorch's cuDNN and flash SDPA at seq
#          8192 and 4096 and 8 packed documents (32/8 heads, Dh 128, causal).
#
# On the build machine, after `ninja -C build`:
#   bash bench/attention_bwd_gpu.sh --prepare BUILD_DIR CARRY_DIR
# gathers the test binary, its kernel folders and golden, and the bench
# scripts into CARRY_DIR; on the GPU host:
#   bash CARRY_DIR/attention_bwd_gpu.sh CARRY_DIR [PARTS]
# PARTS: tests, bench or both (default). Logs and JSON go to $OUT (or
# CARRY_DIR/results).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
kernel_dirs="attention-kernels attention-hopper-kernels attention-hopper-bwd-kernels
  attention-bench-kernels attention-bench-hopper-kernels attention-bench-hopper-bwd-kernels
  attention-golden"

if [ "${1:-}" = --prepare ]; then
  set -e
  build="$(cd "${2:?BUILD_DIR}" && pwd)" carry="${3:?CARRY_DIR}"
  mkdir -p "$carry"
  cp "$build/tests/gpu/codegen/octet-gpu-attention-tests" "$carry/"
  for d in $kernel_dirs; do
    rm -rf "${carry:?}/$d"
    cp -r "$build/tests/gpu/codegen/$d" "$carry/"
  done
  cp "$here/attention_bwd_gpu.sh" "$here/gpu_steps.sh" "$here/attention_bench.sh" \
     "$here/attention_torch.py" "$carry/"
  grep -o '"name": "attention_bwd_[0-9]*"\|"kernel": "attention_bwd_[0-9]*_hopper"' \
    "$carry/attention-bench-hopper-bwd-kernels/kernels.json" | sort -u
  du -sh "$carry"
  exit 0
fi

carry="$(cd "${1:?CARRY_DIR}" && pwd)"
what="${2:-all}"
out="${OUT:-$carry/results}"
. "$carry/gpu_steps.sh"

if wants tests; then
  for d in attention-hopper-bwd-kernels attention-hopper-kernels attention-kernels; do
    step "test-$d" timeout 120 "$carry/octet-gpu-attention-tests" "$carry/$d" \
      --golden "$carry/attention-golden"
  done
fi

if wants bench; then
  # attention_bench.sh writes next to itself (results/attention.json) and
  # to $OUT.
  step bench env OUT="$out" timeout 400 bash "$carry/attention_bench.sh" \
    "$carry/octet-gpu-attention-tests" "$carry/attention-bench-kernels" \
    "$carry/attention-bench-hopper-kernels" 20 \
    "$carry/attention-bench-hopper-bwd-kernels"
fi
exit $status

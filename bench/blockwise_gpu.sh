#!/usr/bin/env bash
# Blockwise FP8 on the GPU host: the generated quantize kernels and the
# block-scaled cuBLASLt GEMMs against the reference interpreter, the
# blockwise goldens, and blockwise against delayed FP8 in tokens/s.
#
# Here (where MLIR is; after `ninja -C build`), into carry/ (about 30 MiB):
#   bash bench/blockwise_gpu.sh prepare
# There (an H100, from the repository root):
#   bash bench/blockwise_gpu.sh run OUT_DIR
# The two-layer 8B-shaped golden is made by the reference interpreter, which
# holds every weight, gradient and moment in f32 (11.5 GiB RSS, see
# tests/golden/llama3-8b-2layer.pbtxt); `prepare` makes it only with
# WITH_8B=1, where that memory is free.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/.."
carry="$root/carry/blockwise"
case "${1:-}" in
  prepare)
    b="$root/build"
    rm -rf "$carry"
    mkdir -p "$carry/bin" "$carry/codegen" "$carry/golden" "$carry/bench"
    cp "$b/tools/octet-run/octet-run" "$b/tests/gpu/runtime/octet-gpu-runtime-tests" \
       "$b/tests/gpu/codegen/octet-gpu-codegen-tests" "$carry/bin/"
    # The quantize kernels and the interpreter's inputs and expected results.
    "$b/tests/gpu/codegen/octet-kernel-oracle" \
      "$root/tests/gpu/codegen/block-quantize.mlir" \
      --out "$carry/codegen/golden-block-quantize" \
      --kernels "$b/tests/gpu/codegen/kernels-block-quantize"
    cp -r "$b/tests/gpu/codegen/kernels-block-quantize" "$carry/codegen/"
    "$b/tools/octet/octet" golden "$root/tests/golden/tiny-llama-blockwise.pbtxt" \
      -o "$carry/golden/tiny-llama-blockwise" --steps 2 --text "$root/data/corpus.txt"
    if [ "${WITH_8B:-0}" = 1 ]; then
      "$b/tools/octet/octet" golden "$root/tests/golden/llama3-8b-2layer-blockwise.pbtxt" \
        -o "$carry/golden/llama3-8b-2layer-blockwise" --steps 2
    fi
    for mode in fp8 fp8blockwise; do
      "$b/tools/octet/octet" compile "$here/specs/llama3-8b-8l-$mode.pbtxt" \
        -o "$carry/bench/llama3-8b-8l-$mode.octet"
    done
    du -sh "$carry"
    ;;
  run)
    out="${2:?usage: blockwise_gpu.sh run OUT_DIR}"
    mkdir -p "$out"
    c="$carry/bin"
    status=0
    echo "== block-scaled GEMMs (cuBLASLt) against a CPU reference"
    "$c/octet-gpu-runtime-tests" --gtest_filter='GemmBlockScaled.*:GemmFp8.*' \
      2>&1 | tee "$out/gemm.log" || status=1
    echo "== blockwise quantize kernels against the interpreter"
    "$c/octet-gpu-codegen-tests" "$carry/codegen/kernels-block-quantize" \
      "$carry/codegen/golden-block-quantize" 2>&1 | tee "$out/quantize.log" || status=1
    for g in "$carry"/golden/*/; do
      name="$(basename "$g")"
      echo "== golden $name"
      "$c/octet-run" "$g/model.octet" --golden "$g" 2>&1 | tee "$out/golden-$name.log" \
        || status=1
    done
    echo "== tokens/s, blockwise against delayed (llama3-8b-8l, sequence 8192)"
    bash "$here/run_bench.sh" --only llama3-8b-8l --octet-run "$c/octet-run" \
      --bundles "$carry/bench" 2>&1 | tee "$out/bench.log" || status=1
    exit $status
    ;;
  *)
    echo "usage: blockwise_gpu.sh prepare | run OUT_DIR" >&2
    exit 2
    ;;
esac

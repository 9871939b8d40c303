#!/usr/bin/env bash
# Blockwise FP8 speed on one GPU: the checks that must keep passing (the
# block-quantize kernels and the block-scaled GEMMs against their oracles,
# the blockwise goldens of tiny-llama and two 8B-shaped layers) and
# tokens/s of one bench model's recipes on one GPU in one call: delayed,
# blockwise, blockwise with `--gemm-configs 0` (only the heuristic's
# cuBLASLt answers timed, as before that option) and, where prepare was
# given BASE_OCTET (another build's octet), that compiler's blockwise
# bundle with `--gemm-configs 0`.
#
# Here (where MLIR is; after `ninja -C build` and
# `bash scripts/static-octet.sh`), into carry/bwspeed (ignored; < 64 MiB):
#   [BASE_OCTET=../main/build/tools/octet/octet] bash bench/blockwise_speed_gpu.sh prepare
# There (one H100, repository root; carry/bwspeed and data/corpus.txt):
#   bash bench/blockwise_speed_gpu.sh checks OUT_DIR          # about 5 minutes
#   bash bench/blockwise_speed_gpu.sh bench OUT_DIR MODEL     # llama3-8b-8l or llama3.2-1b
#   (ONE_RUN=1: without the --gemm-configs 0 run, the default since)
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/.."
carry="$root/carry/bwspeed"
models="llama3-8b-8l llama3.2-1b"
case "${1:-}" in
  prepare)
    set -e
    b="$root/build"
    rm -rf "$carry"
    mkdir -p "$carry/bin" "$carry/codegen" "$carry/bundles"
    cp "$b/tools/octet-run/octet-run" "$b/tests/gpu/runtime/octet-gpu-runtime-tests" \
       "$b/tests/gpu/codegen/octet-gpu-codegen-tests" "$carry/bin/"
    xz -T2 -c "$b/tools/octet/octet-static" > "$carry/bin/octet-static.xz"
    "$b/tests/gpu/codegen/octet-kernel-oracle" \
      "$root/tests/gpu/codegen/block-quantize.mlir" \
      --out "$carry/codegen/golden-block-quantize" \
      --kernels "$b/tests/gpu/codegen/kernels-block-quantize"
    cp -r "$b/tests/gpu/codegen/kernels-block-quantize" "$carry/codegen/"
    for m in $models; do
      for r in fp8 fp8blockwise; do
        "$b/tools/octet/octet" compile "$here/specs/$m-$r.pbtxt" \
          -o "$carry/bundles/$m-$r.octet"
      done
      if [ -n "${BASE_OCTET:-}" ]; then
        "$BASE_OCTET" compile "$here/specs/$m-fp8blockwise.pbtxt" \
          -o "$carry/bundles/$m-fp8blockwise-base.octet"
      fi
    done
    du -sh "$carry"
    ;;
  checks)
    out="${2:?usage: blockwise_speed_gpu.sh checks OUT_DIR}"
    mkdir -p "$out"
    export PATH=/usr/local/cuda/bin:$PATH
    c="$carry/bin"
    status=0
    xz -dc "$c/octet-static.xz" > /tmp/octet && chmod +x /tmp/octet
    echo "== block-scaled GEMMs (cuBLASLt) against a CPU reference"
    timeout 120 "$c/octet-gpu-runtime-tests" --gtest_filter='GemmBlockScaled.*:GemmFp8.*' \
      > "$out/gemm.log" 2>&1 || status=1
    tail -3 "$out/gemm.log"
    echo "== blockwise quantize kernels against the interpreter"
    timeout 60 "$c/octet-gpu-codegen-tests" "$carry/codegen/kernels-block-quantize" \
      "$carry/codegen/golden-block-quantize" > "$out/quantize.log" 2>&1 || status=1
    tail -3 "$out/quantize.log"
    for g in "examples/tiny-llama.pbtxt 5 data/corpus.txt" \
             "tests/golden/tiny-llama-blockwise.pbtxt 5 data/corpus.txt" \
             "tests/golden/llama3-8b-2layer-blockwise.pbtxt 2"; do
      set -- $g
      name="$(basename "$1" .pbtxt)"
      echo "== golden $name ($2 steps)"
      timeout 360 bash "$root/tests/golden/golden-gpu.sh" /tmp/octet "$c/octet-run" \
        "$1" "/tmp/golden-$name" "$2" ${3:-} > "$out/golden-$name.log" 2>&1
      rc=$?
      [ $rc = 0 ] || status=1
      grep -E "cuBLASLt|PASS|FAIL|mismatch" "$out/golden-$name.log" | tail -4
      echo "golden $name rc=$rc"
      rm -rf "/tmp/golden-$name"
    done
    exit $status
    ;;
  bench)
    out="${2:?usage: blockwise_speed_gpu.sh bench OUT_DIR MODEL}"
    m="${3:?usage: blockwise_speed_gpu.sh bench OUT_DIR MODEL}"
    mkdir -p "$out"
    c="$carry/bin"
    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu \
      --format=csv,noheader -l 2 > "$out/clocks.csv" 2>&1 &
    smi=$!
    run() { # name bundle [octet-run options]
      local name=$1 bundle=$2
      shift 2
      # A cache of its own: an algorithm timed by one run is not the next's.
      timeout 120 "$c/octet-run" "$bundle" --bench --warmup 4 --steps 20 \
        --gemm-cache "/tmp/$name.gemms" --json "$out/$name.json" "$@" \
        > "$out/$name.log" 2>&1
      echo "$name rc=$? $(grep -E '^cuBLASLt' "$out/$name.log")"
      grep '^done' "$out/$name.log"
    }
    run "$m-fp8" "$carry/bundles/$m-fp8.octet"
    run "$m-fp8blockwise" "$carry/bundles/$m-fp8blockwise.octet"
    # --gemm-configs is 0 by default now: ONE_RUN=1 leaves out this second
    # run of the same thing (both models and the checks then fit one call).
    if [ -z "${ONE_RUN:-}" ]; then
      run "$m-fp8blockwise-configs0" "$carry/bundles/$m-fp8blockwise.octet" \
        --gemm-configs 0
    fi
    if [ -f "$carry/bundles/$m-fp8blockwise-base.octet" ]; then
      run "$m-fp8blockwise-base-configs0" \
        "$carry/bundles/$m-fp8blockwise-base.octet" --gemm-configs 0
    fi
    kill $smi
    ;;
  *)
    echo "usage: blockwise_speed_gpu.sh prepare | checks OUT_DIR | bench OUT_DIR MODEL" >&2
    exit 2
    ;;
esac

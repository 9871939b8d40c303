#!/usr/bin/env bash
# The GEMM work of issue 22 on one GPU host, in one call per model: the GPU
# tests it touched, the goldens, the cuBLASLt algorithm cache's second run,
# then throughput before and after. "Before" is octet-run and bundles built
# from main; "after" runs bench/run_bench.sh (octet beside its PyTorch
# peers) with this branch's octet-run and bundles.
#
#   bash bench/gemm_gpu_check.sh CARRY MODEL [--skip-tests]
#
# MODEL is a case of bench/cases.sh, or - for the tests alone.
#
# CARRY holds (build machine, see the commands in the report):
#   bin/octet-run bin/octet-gpu-bundle-tests bin/octet-gpu-runtime-tests
#   bin/test_kernels.ptx bin/test_kernels.cubin bin/trainer_kernels.ptx
#   tiny-llama.octet                     the smoke tests' bundle
#   golden/<name>/                       `octet golden SPEC -o DIR --steps 2`
#   bench/<model>-<mode>.octet           bench/compile_bundles.sh, this branch
#   before/bin/octet-run before/bench/   the same from main
# Everything it prints and writes lands in $OUT (or /tmp/gemm-check).
set -uo pipefail
carry="$(cd "$1" && pwd)" model=$2 skip=${3:-}
here="$(cd "$(dirname "$0")" && pwd)"
out=${OUT:-/tmp/gemm-check}
mkdir -p "$out"
status=0
if [ "$skip" != --skip-tests ]; then
  echo "== GPU tests"
  OCTET_SMOKE_BUNDLE="$carry/tiny-llama.octet" "$carry/bin/octet-gpu-bundle-tests" \
    > "$out/gpu-bundle-tests.log" 2>&1 || status=1
  tail -n 3 "$out/gpu-bundle-tests.log"
  "$carry/bin/octet-gpu-runtime-tests" > "$out/gpu-runtime-tests.log" 2>&1 || status=1
  tail -n 3 "$out/gpu-runtime-tests.log"
  for g in "$carry"/golden/*/; do
    name=$(basename "$g")
    echo "== golden $name"
    "$carry/bin/octet-run" "$g/model.octet" --golden "$g" \
      > "$out/golden-$name.log" 2>&1 || status=1
    grep -E "^cuBLASLt|golden|PASS|FAIL|mismatch" "$out/golden-$name.log" | tail -n 4
  done
  echo "== algorithm cache: the second run reads what the first timed"
  rm -f "$out/tiny.gemms"
  for run in 1 2; do
    "$carry/bin/octet-run" "$carry/tiny-llama.octet" --bench --steps 3 \
      --warmup 1 --gemm-cache "$out/tiny.gemms" > "$out/cache-run$run.log" 2>&1 \
      || status=1
    grep "^cuBLASLt" "$out/cache-run$run.log"
  done
fi

[ "$model" = - ] && exit $status
. "$here/cases.sh"
for c in "${bench_cases[@]}"; do
  read -r m seq batch <<<"$c"
  [ "$m" = "$model" ] || continue
  for mode in bf16 fp8; do
    b="$carry/before/bench/$m-$mode.octet"
    [ -f "$b" ] || continue
    echo "== before: octet-$mode-$m-s$seq (main)"
    timeout 150 "$carry/before/bin/octet-run" "$b" --bench --steps 10 --warmup 3 \
      --json "$out/before-octet-$mode-$m-s$seq.json" \
      > "$out/before-octet-$mode-$m-s$seq.log" 2>&1
    tail -n 1 "$out/before-octet-$mode-$m-s$seq.log"
  done
done
echo "== after: bench/run_bench.sh --only $model"
OUT="$out" bash "$here/run_bench.sh" --only "$model" \
  --octet-run "$carry/bin/octet-run" --bundles "$carry/bench"
grep -h "^cuBLASLt" "$here"/results/octet-*-"$model"-*.log 2>/dev/null
exit $status

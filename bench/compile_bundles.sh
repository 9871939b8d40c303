#!/usr/bin/env bash
# Compiles the training benchmark's cases (bench/specs/*.pbtxt) into bundles
# named as bench/run_bench.sh expects them (<model>-<bf16|fp8>.octet), on
# the build machine; carry the folder and octet-run to the GPU host.
#
#   bash bench/compile_bundles.sh [OCTET] [OUT_DIR]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
octet="${1:-$here/../build/tools/octet/octet}"
out="${2:-$here/../carry/bench}"
mkdir -p "$out"
for spec in "$here"/specs/*.pbtxt; do
  name="$(basename "$spec" .pbtxt)"
  echo "== $name"
  "$octet" compile "$spec" -o "$out/$name.octet"
done
ls -l "$out"

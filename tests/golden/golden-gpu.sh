#!/usr/bin/env bash
# The GPU against the reference interpreter: octet golden writes STEPS steps
# of SPEC (bundle included), octet-run runs that bundle on the GPU from the
# golden's initial values and batches and exits 1 on a mismatch.
# usage: golden-gpu.sh OCTET OCTET_RUN SPEC DIR STEPS [DATA]
set -euo pipefail
octet=$1 run=$2 spec=$3 dir=$4 steps=$5 data=${6:-}
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIPPED: no NVIDIA GPU (nvidia-smi lists none)"
  exit 0
fi
rm -rf "$dir"
"$octet" golden "$spec" -o "$dir" --steps "$steps" ${data:+--text "$data"}
"$run" "$dir/model.octet" --golden "$dir"

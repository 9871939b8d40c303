#!/usr/bin/env bash
# golden-gpu.sh with the attention kernels named: SPEC is compiled with
# train.codegen.attention_forward FORWARD and attention_backward BACKWARD
# (each "hopper" or "mma_sync"), the bundle must hold those kernels (a
# Hopper kernel with its tensor maps, or none of it), and octet-run runs it
# against the reference interpreter's golden. A Hopper forward with the
# mma.sync backward also checks that the saved out and lse are what the
# other backward reads.
# usage: golden-gpu-attention.sh OCTET OCTET_RUN SPEC DIR STEPS FORWARD BACKWARD [DATA]
set -euo pipefail
octet=$1 run=$2 spec=$3 dir=$4 steps=$5 forward=$6 backward=$7 data=${8:-}
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIPPED: no NVIDIA GPU (nvidia-smi lists none)"
  exit 0
fi
for kernel in "$forward" "$backward"; do
  case "$kernel" in
    hopper | mma_sync) ;;
    *) echo "golden-gpu-attention.sh: FORWARD and BACKWARD are hopper or mma_sync, not $kernel" >&2; exit 2 ;;
  esac
done
rm -rf "$dir"
mkdir -p "$dir"
if grep -q 'codegen' "$spec"; then
  echo "golden-gpu-attention.sh: $spec sets train.codegen itself; pass a spec without it" >&2
  exit 2
fi
# Relative data paths in the spec stay relative to where it was.
cp "$spec" "$dir/spec.pbtxt"
sed -i "s/^train {/train {\n  codegen { attention_forward: \"$forward\" attention_backward: \"$backward\" }/" "$dir/spec.pbtxt"
grep -q "attention_backward: \"$backward\"" "$dir/spec.pbtxt"
"$octet" golden "$dir/spec.pbtxt" -o "$dir/golden" --steps "$steps" ${data:+--text "$data"}
"$octet" inspect "$dir/golden/model.octet" > "$dir/inspect.txt"
# Each Hopper kernel's launches pass tensor maps (q, k, v for the forward;
# dout, q, k, v for the backward's main kernel).
maps=$(grep -c 'tensor map (argument' "$dir/inspect.txt" || true)
expect=0
# expect_kernel PART CHOICE PATTERN MAPS: the Hopper PART is in the bundle
# exactly when CHOICE is hopper.
expect_kernel() {
  if [ "$2" = hopper ]; then
    grep -q "^  $3" "$dir/inspect.txt" ||
      { echo "FAIL: no Hopper attention $1 in the bundle" >&2; exit 1; }
    expect=$((expect + $4))
  elif grep -q "$3" "$dir/inspect.txt"; then
    echo "FAIL: mma_sync $1 asked for, but the bundle has the Hopper $1" >&2
    exit 1
  fi
}
expect_kernel forward "$forward" 'attention_fwd_hopper_' 3
expect_kernel backward "$backward" 'attention_bwd_[0-9]*_hopper' 4
# Layers share their kernels, so each kernel lists its maps once.
if [ "$maps" -ne "$expect" ]; then
  echo "FAIL: $maps tensor maps in the bundle's kernels, expected $expect" >&2
  exit 1
fi
"$run" "$dir/golden/model.octet" --golden "$dir/golden"

#!/usr/bin/env bash
# golden-gpu.sh with the attention forward kernel named: SPEC is compiled
# with train.codegen.attention_forward FORWARD ("hopper" or "mma_sync"),
# the bundle must hold that kernel (the Hopper forward, with its tensor
# maps, or none of it), and octet-run runs it against the reference
# interpreter's golden. The backward is the mma.sync kernel either way, so
# the Hopper case also checks that its saved out and lse are what the
# backward reads.
# usage: golden-gpu-attention.sh OCTET OCTET_RUN SPEC DIR STEPS FORWARD [DATA]
set -euo pipefail
octet=$1 run=$2 spec=$3 dir=$4 steps=$5 forward=$6 data=${7:-}
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIPPED: no NVIDIA GPU (nvidia-smi lists none)"
  exit 0
fi
rm -rf "$dir"
mkdir -p "$dir"
if grep -q 'codegen' "$spec"; then
  echo "golden-gpu-attention.sh: $spec sets train.codegen itself; pass a spec without it" >&2
  exit 2
fi
# Relative data paths in the spec stay relative to where it was.
cp "$spec" "$dir/spec.pbtxt"
sed -i "s/^train {/train {\n  codegen { attention_forward: \"$forward\" }/" "$dir/spec.pbtxt"
grep -q "attention_forward: \"$forward\"" "$dir/spec.pbtxt"
"$octet" golden "$dir/spec.pbtxt" -o "$dir/golden" --steps "$steps" ${data:+--text "$data"}
"$octet" inspect "$dir/golden/model.octet" > "$dir/inspect.txt"
case "$forward" in
  hopper)
    grep -q '^  attention_fwd_hopper_' "$dir/inspect.txt" ||
      { echo "FAIL: no Hopper attention forward in the bundle" >&2; exit 1; }
    grep -q 'tensor map (argument 2)' "$dir/inspect.txt" ||
      { echo "FAIL: the Hopper forward's launches pass no tensor maps" >&2; exit 1; } ;;
  mma_sync)
    if grep -q 'attention_fwd_hopper_\|tensor map' "$dir/inspect.txt"; then
      echo "FAIL: mma_sync asked for, but the bundle has the Hopper forward" >&2
      exit 1
    fi ;;
  *) echo "golden-gpu-attention.sh: FORWARD is hopper or mma_sync, not $forward" >&2; exit 2 ;;
esac
"$run" "$dir/golden/model.octet" --golden "$dir/golden"

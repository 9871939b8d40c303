#!/usr/bin/env bash
# The Hopper attention forward in training bundles, on one H100 in one call:
#   tests   the kernel against the interpreter (gpu.attention-hopper) and
#           tiny-llama bundles (heads of 64) through octet-run against the
#           interpreter's golden, with the Hopper forward and with the
#           mma.sync one, the Hopper backward (the default) with either
#           (tests/golden/golden-gpu-attention.sh);
#   bench   the 8-layer Llama 3 8B FP8 bench bundle
#           (bench/specs/llama3-8b-8l-fp8.pbtxt) with the Hopper forward and
#           with the mma.sync one: octet-run --bench (tokens/s) and
#           octet-profile (attention time per step, by kernel), one after
#           the other on the same GPU;
#   goldens tests/golden/golden-gpu.sh on tests/golden/llama3-8b-2layer-*.pbtxt
#           (the Hopper forward: the default), the three at once.
#
# On the build machine, after `ninja -C build` (and `bash
# scripts/static-octet.sh` for the compiler the goldens run there):
#   bash bench/attention_bundle_gpu.sh --prepare BUILD_DIR CARRY_DIR
# gathers into CARRY_DIR (about 45 MiB) the binaries, the attention test's
# kernels and golden, the two bench bundles (compiled there), this script,
# the golden scripts and specs and the corpus, so that the GPU host needs
# nothing else:
#   bash CARRY_DIR/attention_bundle_gpu.sh CARRY_DIR [PARTS]
# PARTS: a comma-separated list of tests, bench, goldens; default all.
# Results in $OUT (or CARRY_DIR/results): logs, the bench JSONs, the
# profiles and summary.json (the two forwards' step time and attention
# time).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

if [ "${1:-}" = --prepare ]; then
  set -e
  build="$(cd "${2:?BUILD_DIR}" && pwd)" carry="${3:?CARRY_DIR}"
  mkdir -p "$carry"
  cp "$build/tools/octet-run/octet-run" "$build/tools/octet-run/octet-profile" \
     "$build/tests/gpu/codegen/octet-gpu-attention-tests" "$carry/"
  rm -rf "$carry/attention-hopper-kernels" "$carry/attention-golden"
  cp -r "$build/tests/gpu/codegen/attention-hopper-kernels" \
        "$build/tests/gpu/codegen/attention-golden" "$carry/"
  static="$build/tools/octet/octet-static"
  if [ ! -x "$static" ] || [ "$static" -ot "$build/tools/octet/octet" ]; then
    echo "$static is missing or older than octet: run bash scripts/static-octet.sh $build" >&2
    exit 1
  fi
  xz -T2 -6 -c "$static" > "$carry/octet-static.xz"
  spec="$here/specs/llama3-8b-8l-fp8.pbtxt"
  "$build/tools/octet/octet" compile "$spec" -o "$carry/llama3-8b-8l-fp8-hopper.octet"
  sed 's/^train {/train {\n  codegen { attention_forward: "mma_sync" }/' "$spec" \
    > "$carry/llama3-8b-8l-fp8-mma-sync.pbtxt"
  "$build/tools/octet/octet" compile "$carry/llama3-8b-8l-fp8-mma-sync.pbtxt" \
    -o "$carry/llama3-8b-8l-fp8-mma-sync.octet"
  cp "$here/attention_bundle_gpu.sh" "$here/gpu_steps.sh" "$here/../tests/golden/golden-gpu.sh" \
     "$here/../tests/golden/golden-gpu-attention.sh" "$here/../data/corpus.txt" \
     "$carry/"
  mkdir -p "$carry/specs"
  cp "$here/../examples/tiny-llama.pbtxt" "$here"/../tests/golden/llama3-8b-2layer-*.pbtxt \
     "$carry/specs/"
  for f in hopper mma-sync; do
    "$build/tools/octet/octet" inspect "$carry/llama3-8b-8l-fp8-$f.octet" \
      | grep -E '^  attention_fwd|tensor map' | head -4
  done
  du -sh "$carry"
  exit 0
fi

carry="$(cd "${1:?CARRY_DIR}" && pwd)"
what="${2:-all}"
out="${OUT:-$carry/results}"
. "$carry/gpu_steps.sh"
octet="$carry/octet"
if [ ! -x "$octet" ]; then
  xz -d -c "$carry/octet-static.xz" > "$octet" && chmod +x "$octet"
fi

if wants tests; then
  step attention-hopper-kernel timeout 60 "$carry/octet-gpu-attention-tests" \
    "$carry/attention-hopper-kernels" --golden "$carry/attention-golden"
  for forward in hopper mma_sync; do
    step "golden-tiny-llama-$forward" timeout 120 bash "$carry/golden-gpu-attention.sh" \
      "$octet" "$carry/octet-run" "$carry/specs/tiny-llama.pbtxt" \
      "$out/work/tiny-llama-$forward" 5 "$forward" hopper "$carry/corpus.txt"
  done
fi

if wants bench; then
  for forward in hopper mma-sync; do
    bundle="$carry/llama3-8b-8l-fp8-$forward.octet"
    step "bench-$forward" timeout 150 "$carry/octet-run" "$bundle" --bench \
      --steps 10 --warmup 3 --json "$out/bench-$forward.json"
    step "profile-$forward" timeout 120 "$carry/octet-profile" "$bundle" --top 12
  done
  python3 - "$out" <<'PY'
import json, os, re, sys
d = sys.argv[1]
summary = {"command": "bash CARRY_DIR/attention_bundle_gpu.sh CARRY_DIR bench",
           "bundle": "bench/specs/llama3-8b-8l-fp8.pbtxt"}
for forward in ("hopper", "mma-sync"):
    row = {}
    path = os.path.join(d, f"bench-{forward}.json")
    if os.path.exists(path):
        r = json.load(open(path))
        row["tokens_per_s"] = r.get("tokens_per_s")
        row["device"] = r.get("device")
        if r.get("tokens_per_s") and r.get("tokens_per_step"):
            row["step_ms"] = 1e3 * r["tokens_per_step"] / r["tokens_per_s"]
    prof = os.path.join(d, f"profile-{forward}.log")
    if os.path.exists(prof):
        text = open(prof).read()
        m = re.search(r"^\s+attention\s+([0-9.]+) ms", text, re.M)
        row["attention_ms_per_step"] = float(m.group(1)) if m else None
        row["attention_kernels"] = {k: float(v) for v, k in re.findall(
            r"^\s+([0-9.]+) ms\s+[0-9.]+% x\d+\s+attention\s+(\S+)", text, re.M)}
    summary[forward] = row
h, m = summary.get("hopper", {}), summary.get("mma-sync", {})
if h.get("step_ms") and m.get("step_ms"):
    summary["step_ms_saved"] = m["step_ms"] - h["step_ms"]
if h.get("attention_ms_per_step") and m.get("attention_ms_per_step"):
    summary["attention_ms_saved"] = (m["attention_ms_per_step"]
                                     - h["attention_ms_per_step"])
json.dump(summary, open(os.path.join(d, "summary.json"), "w"), indent=1)
print(json.dumps(summary, indent=1))
PY
fi

if wants goldens; then
  # Each golden holds an 8B-shaped layer pair's weights, gradients and
  # moments in f32 on the host (11.5 GiB at peak): three at once fit.
  pids=()
  for spec in "$carry"/specs/llama3-8b-2layer-*.pbtxt; do
    name="$(basename "$spec" .pbtxt)"
    ( t0=$SECONDS
      timeout 560 bash "$carry/golden-gpu.sh" "$octet" "$carry/octet-run" \
        "$spec" "$out/work/golden-$name" 2 > "$out/golden-$name.log" 2>&1
      echo "rc $? after $((SECONDS - t0)) s" >> "$out/golden-$name.log" ) &
    pids+=($!)
  done
  wait "${pids[@]}"
  for spec in "$carry"/specs/llama3-8b-2layer-*.pbtxt; do
    name="$(basename "$spec" .pbtxt)"
    echo "== golden-$name"
    tail -n 4 "$out/golden-$name.log"
    grep -q '^rc 0 ' "$out/golden-$name.log" || status=1
  done
  rm -rf "$out/work"/golden-*/*.safetensors
fi
rm -rf "$out/work"/tiny-llama-*/golden/*.safetensors
exit $status

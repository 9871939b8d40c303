#!/bin/bash
# Fine-tuning from Hugging Face on the GPU, checked against transformers
# (bench/hf_oracle.py says what is compared and why): a random
# LlamaForCausalLM of Llama 3 8B layer shapes (2 layers, full vocabulary,
# bf16, sharded) goes into octet-run --init-from, trains one step on one
# packed document, leaves an HF-named checkpoint, comes back out through
# --save-hf, and goes in again; for the BF16 and the delayed FP8 bundle.
# Needs torch, transformers and safetensors (no network).
#
# Here (bundles compiled where MLIR is):
#   mkdir -p carry/hf && for r in bf16 fp8; do
#     build/tools/octet/octet compile bench/specs/hf-oracle/l8b2-$r.pbtxt \
#       -o carry/hf/l8b2-$r.octet; done
#   cp build/tools/octet-run/octet-run carry/bin/
# There:
#   bash bench/hf_oracle_gpu.sh carry/bin/octet-run carry/hf OUT_DIR
# OUT_DIR gets hf-oracle.json (every comparison, both bundles) and
# hf-oracle.log; the model, a checkpoint and an export (about 30 GB) go to
# HF_ORACLE_WORK (default: a fresh folder under /tmp), removed at the end
# unless HF_ORACLE_KEEP=1. HF_ORACLE_RECIPES="bf16" (or "fp8") runs one
# bundle; with HF_ORACLE_WORK and HF_ORACLE_KEEP=1 a later call reuses the
# model and document made by the first.
set -u
R=${1:?octet-run}; D=${2:?bundle directory}; O=${3:?output directory}
B=$(cd "$(dirname "$0")" && pwd); mkdir -p "$O"
W=${HF_ORACLE_WORK:-$(mktemp -d /tmp/hf-oracle.XXXXXX)}; mkdir -p "$W"
LOG="$O/hf-oracle.log"; : > "$LOG"
say() { echo "=== $* ($(date +%T))" | tee -a "$LOG"; }
# run NAME ARGS...: octet-run ARGS, its output in the log and in $W/NAME.log.
run() {
  local name=$1; shift
  say "octet-run $*"
  "$R" "$@" > "$W/$name.log" 2>&1; local rc=$?
  cat "$W/$name.log" >> "$LOG"; echo "rc=$rc" >> "$LOG"
  [ $rc = 0 ] || { tail -5 "$W/$name.log"; say "$name failed (rc $rc)"; }
  return $rc
}

if [ -f "$W/ref/reference.json" ]; then
  say "reference model and document: reusing $W/ref"
else
  say "reference model and document (transformers)"
  # The bundles' seq_len (bench/specs/hf-oracle); HF_ORACLE_MAKE="--tiny
  # --seq-len 128" makes the CPU-sized model of tiny.pbtxt instead.
  python3 "$B/hf_oracle.py" make --out "$W/ref" ${HF_ORACLE_MAKE:---seq-len 4096} 2>&1 | tee -a "$LOG"
  [ "${PIPESTATUS[0]}" = 0 ] || { say "make failed"; exit 1; }
fi
status=0
results=()
for r in ${HF_ORACLE_RECIPES:-bf16 fp8}; do
  bundle="$D/l8b2-$r.octet"
  work="$W/$r"; rm -rf "$work"; mkdir -p "$work"
  run "$r-run1" "$bundle" --init-from "$W/ref/model" --data "$W/ref/doc" \
      --steps 1 --checkpoint-dir "$work/ckpt" --save-hf "$work/export" \
      || { status=1; continue; }
  run "$r-run2" "$bundle" --init-from "$work/export" --data "$W/ref/doc" \
      --steps 1 || { status=1; continue; }
  say "compare ($r)"
  python3 "$B/hf_oracle.py" check --work "$W/ref" --recipe "$r" \
      --run1-log "$W/$r-run1.log" --checkpoint-dir "$work/ckpt" \
      --export "$work/export" --run2-log "$W/$r-run2.log" \
      --json "$W/$r.json" 2>&1 | tee -a "$LOG"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
  [ -f "$W/$r.json" ] && results+=("$W/$r.json")
  rm -rf "$work"  # the disk holds one recipe's checkpoint at a time
done
python3 - "$O/hf-oracle.json" "${results[@]}" <<'PY'
import json, sys
out = {"command": "bash bench/hf_oracle_gpu.sh OCTET_RUN BUNDLE_DIR OUT_DIR",
       "runs": []}
for path in sys.argv[2:]:
    with open(path) as f:
        out["runs"].append(json.load(f))
out["pass"] = bool(out["runs"]) and all(r["pass"] for r in out["runs"])
with open(sys.argv[1], "w") as f:
    json.dump(out, f, indent=1)
PY
[ "${HF_ORACLE_KEEP:-0}" = 1 ] || rm -rf "$W"
say "done: $([ $status = 0 ] && echo PASS || echo FAIL); $O/hf-oracle.json"
exit $status

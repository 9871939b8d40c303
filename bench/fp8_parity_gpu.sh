#!/usr/bin/env bash
# FP8 loss parity at GPU scale, on the GPU host: trains the four bundles
# that `bench/fp8_parity_gpu.py compile` put in CARRY_DIR (bf16, delayed,
# current, blockwise; 1000 steps each, the same initial weights and
# batches) with held-out evaluation every 100 steps, then writes
# OUT_DIR/fp8_parity_gpu.json and .png (bench/fp8_parity_gpu.py report).
# With several GPUs the runs are shared out, one process per GPU
# (CUDA_VISIBLE_DEVICES), each GPU's runs one after another.
#
#   bash bench/fp8_parity_gpu.sh CARRY_DIR OUT_DIR [STEPS]
#
# Exit status: that of the report, 1 when a recipe misses its bound, did
# not finish or met a NaN.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
carry="${1:?usage: fp8_parity_gpu.sh CARRY_DIR OUT_DIR [STEPS]}"
out="${2:?usage: fp8_parity_gpu.sh CARRY_DIR OUT_DIR [STEPS]}"
steps="${3:-1000}"
recipes=(bf16 delayed current blockwise)
for f in octet-run data/train.bin data/heldout.bin "${recipes[@]/%/.octet}"; do
  if [ ! -e "$carry/$f" ]; then
    echo "fp8_parity_gpu: $carry/$f is missing: run bench/fp8_parity_gpu.py compile and carry its folder" >&2
    exit 2
  fi
done
mkdir -p "$out"

gpus=$(nvidia-smi -L | grep -c '^GPU ')
if [ "$gpus" -lt 1 ]; then
  echo "fp8_parity_gpu: nvidia-smi sees no GPU" >&2
  exit 2
fi
echo "fp8_parity_gpu: ${#recipes[@]} runs of $steps steps on $gpus GPU(s)"

run_queue() {
  local gpu=$1
  shift
  for recipe in "$@"; do
    {
      echo "gpu: $(nvidia-smi --query-gpu=name --format=csv,noheader -i "$gpu")"
      echo "recipe: $recipe, started $(date -u +%FT%TZ)"
      CUDA_VISIBLE_DEVICES=$gpu "$carry/octet-run" "$carry/$recipe.octet" \
        --data "$carry/data/train" --eval-data "$carry/data/heldout" \
        --eval-interval 100 --eval-batches 32 --log-interval 1 \
        --steps "$steps"
      # In the log: the device call brings back at most 8 files.
      echo "exit: $?"
    } >"$out/$recipe.log" 2>&1
    echo "fp8_parity_gpu: $recipe on GPU $gpu: $(tail -1 "$out/$recipe.log"), $(grep -c '^step ' "$out/$recipe.log") steps"
  done
}

pids=()
for ((g = 0; g < gpus && g < ${#recipes[@]}; ++g)); do
  queue=()
  for ((i = g; i < ${#recipes[@]}; i += gpus)); do queue+=("${recipes[i]}"); done
  run_queue "$g" "${queue[@]}" &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done

python3 "$here/fp8_parity_gpu.py" report "$out" \
  --json "$out/fp8_parity_gpu.json" --png "$out/fp8_parity_gpu.png" \
  --sources "$carry/data/sources.json"

#!/bin/sh
# Preprocess -> compile -> train: supervised fine-tuning of a tiny Llama on
# examples/sft/chats.jsonl with the CPU interpreter. Run from the repository
# root after building octet (OCTET=path/to/octet to pick another build).
#   examples/sft/run.sh [extra octet train options, e.g. --steps 20]
set -eu
OCTET=${OCTET:-build/tools/octet/octet}
SFT=examples/sft
OUT=build-sft
mkdir -p "$OUT"

# 1. Chat jsonl -> Megatron indexed dataset (+ its loss mask).
"$OCTET" data preprocess --input "$SFT/chats.jsonl" \
  --tokenizer "$SFT/tokenizer.json" --output-prefix "$OUT/chats" \
  --no-progress
"$OCTET" data inspect "$OUT/chats" --tokenizer "$SFT/tokenizer.json" --show 1

# 2. The train step as IR (forward with cu_seqlens, backward, AdamW).
"$OCTET" compile "$SFT/tiny-llama-sft.pbtxt" --dump-ir=autodiff \
  >"$OUT/train-step.mlir"
echo "train step IR: $OUT/train-step.mlir"

# 3. Train on packed SFT batches (tokens, labels, loss mask, positions,
#    cu_seqlens) through the reference interpreter.
"$OCTET" train "$SFT/tiny-llama-sft.pbtxt" "$@"

#!/usr/bin/env bash
# Builds data/en-docs: the English documentation corpus of Debian 12's -doc
# packages (scripts/make-en-corpus.py says which, and how many MB each
# gives), a byte-level BPE tokenizer trained on its training split with HF
# `tokenizers` (scripts/train-tokenizer.py), and both splits tokenized by
# `octet data preprocess` into the Megatron datasets octet-run reads
# (--data DIR/train, --eval-data DIR/heldout), every record ended by
# <|endoftext|>. Runs scripts/install-deps.sh when a package is missing.
# Needs a built octet.
#
#   scripts/make-en-data.sh [OUT_DIR] [-- CORPUS_OPTIONS...]
#     OUT_DIR         default data/en-docs
#     CORPUS_OPTIONS  passed to make-en-corpus.py (e.g.
#                     --max-bytes-per-source 20000 for a small slice)
#   OCTET=PATH        the octet binary (default build/tools/octet/octet)
#   VOCAB=N           the tokenizer's vocabulary (default 32768)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/data/en-docs"
if [ $# -gt 0 ] && [ "$1" != "--" ]; then out="$1"; shift; fi
if [ $# -gt 0 ] && [ "$1" = "--" ]; then shift; fi
octet="${OCTET:-$root/build/tools/octet/octet}"
vocab="${VOCAB:-32768}"

if [ ! -x "$octet" ]; then
  echo "make-en-data: $octet is missing: build octet first (scripts/build.sh)" >&2
  exit 1
fi

# The documentation packages come with the other dependencies.
missing=()
while read -r p; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done < <(grep -v '^#' "$root/scripts/en-doc-packages.txt")
if [ ${#missing[@]} -gt 0 ]; then
  echo "make-en-data: ${missing[*]} missing: running scripts/install-deps.sh"
  bash "$root/scripts/install-deps.sh"
fi

mkdir -p "$out"
python3 "$root/scripts/make-en-corpus.py" --out "$out" "$@"
python3 "$root/scripts/train-tokenizer.py" --input "$out/train.jsonl" \
  --out "$out/tokenizer.json" --vocab-size "$vocab"
for split in train heldout; do
  "$octet" data preprocess --input "$out/$split.jsonl" \
    --tokenizer "$out/tokenizer.json" --output-prefix "$out/$split" \
    --append-eod --eod-token '<|endoftext|>' --no-progress
  "$octet" data inspect "$out/$split"
done

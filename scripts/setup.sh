#!/usr/bin/env bash
# Fresh machine to first result: installs dependencies, builds, builds the
# text corpus, and trains the tiny example model for 200 steps.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
[ -f data/corpus.txt ] || bash scripts/make-corpus.sh
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "octet: a GPU is present, but training on the GPU is not available yet (the compiler does not emit complete bundles); training on the CPU interpreter"
fi
build/tools/octet/octet train examples/tiny-llama.pbtxt --steps 200

#!/usr/bin/env bash
# Fresh machine to first result: installs dependencies, builds, builds the
# text corpus, and trains the tiny example model for 200 steps: on a Hopper
# GPU when there is one (octet train compiles a bundle and runs octet-run),
# else on the CPU interpreter; it says which and why. Then builds the English
# documentation corpus, its BPE tokenizer and token datasets (data/en-docs,
# a few minutes) for training at GPU scale.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
[ -f data/corpus.txt ] || bash scripts/make-corpus.sh
build/tools/octet/octet train examples/tiny-llama.pbtxt --steps 200
[ -f data/en-docs/heldout.bin ] || bash scripts/make-en-data.sh

#!/usr/bin/env bash
# Installs dependencies, builds, and runs every test (lit, unit, fuzz; GPU
# tests too when a GPU is present).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
# The shipped-corpus tests read data/corpus.txt, which is built, not committed.
[ -f data/corpus.txt ] || bash scripts/make-corpus.sh
jobs=$(nproc 2>/dev/null || echo 2)
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  ctest --test-dir build --output-on-failure -j "$jobs"
else
  echo "octet: no NVIDIA GPU visible (nvidia-smi found none): skipping tests labelled gpu"
  ctest --test-dir build --output-on-failure -j "$jobs" -LE gpu
fi

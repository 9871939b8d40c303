#!/usr/bin/env bash
# Fresh machine to first result: installs dependencies, builds, and compiles
# the tiny example model, printing its forward graph.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
echo "octet: training is not available yet; compiling examples/tiny-llama.pbtxt and printing its forward graph"
build/tools/octet/octet compile examples/tiny-llama.pbtxt --dump-ir=import

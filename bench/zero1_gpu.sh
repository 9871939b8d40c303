#!/bin/bash
# ZeRO-1 (train.parallel.shard_optimizer) on two GPUs, on the GPU host:
#   - 20 steps of tiny-llama and of 2 layers of Llama 3 8B (BF16) on one
#     GPU, at data 2 replicated and at data 2 with the moments sharded, at
#     the same global batch: each step's loss and grad norm against one
#     GPU's within the golden BF16 tolerances (step 1: loss 1e-3, grad norm
#     5e-3 relative; step s allows 1 + 0.1 (s - 1) times more);
#   - tokens/s per GPU of the 8-layer Llama 3 8B BF16 bench model at data 2,
#     replicated against sharded (--bench), in the same call.
# Checkpoints of a sharded state: bench/zero1_fp8_gpu.sh.
#
# Here (bundles compiled where MLIR is):
#   mkdir -p carry/z1 carry/bin && for s in tiny-bf16-dp1 tiny-bf16-dp2 tiny-bf16-dp2-zero1 \
#       l8b2-bf16-dp1 l8b2-bf16-dp2 l8b2-bf16-dp2-zero1 llama3-8b-8l-bf16-dp2 llama3-8b-8l-bf16-dp2-zero1; do
#     build/tools/octet/octet compile bench/specs/data-parallel/$s.pbtxt -o carry/z1/$s.octet; done
#   build/tools/octet/octet inspect carry/z1/l8b2-bf16-dp2-zero1.octet > carry/z1/l8b2-bf16-dp2-zero1.inspect
#   cp build/tools/octet-run/octet-run carry/bin/
# There:
#   bash bench/zero1_gpu.sh carry/bin/octet-run carry/z1 OUT_DIR
R=${1:?octet-run}; D=${2:?bundle directory}; O=${3:?output directory}
W=$(mktemp -d); mkdir -p "$O"; bad=0; LOSS_TOL=1e-3; NORM_TOL=5e-3
. "$(dirname "$0")/launch2.sh"
. "$(dirname "$0")/zero1_common.sh"
for m in tiny-bf16 l8b2-bf16; do zero1_against_one $m; done
log "8-layer Llama 3 8B BF16 tokens/s at data 2: replicated, then ZeRO-1 (--bench, 20 steps)"
launch2 $W/b-dp2.log $D/llama3-8b-8l-bf16-dp2.octet --bench --warmup 4 --steps 20 --json $O/l8b8-bf16-dp2.json || bad=1
tail -1 $W/b-dp2.log
launch2 $W/b-zero1.log $D/llama3-8b-8l-bf16-dp2-zero1.octet --bench --warmup 4 --steps 20 --json $O/l8b8-bf16-dp2-zero1.json || bad=1
tail -1 $W/b-zero1.log
rm -rf "$W"
exit $bad

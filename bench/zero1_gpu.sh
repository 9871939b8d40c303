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
set -u
export NCCL_NVLS_ENABLE=0
R=${1:?octet-run}; D=${2:?bundle directory}; O=${3:?output directory}
W=$(mktemp -d); mkdir -p "$O"; bad=0
log() { echo; echo "=== $* ($(date +%T))"; }
. "$(dirname "$0")/launch2.sh"
# close ONE OTHER: each step's loss and grad norm of OTHER against ONE's.
close() {
  awk 'FNR == 1 { f++ }
       $1 == "step" { split($2, at, "/"); s = at[1]
         for (i = 3; i < NF; i++) { if ($i == "loss") l = $(i+1); if ($i == "grad_norm") g = $(i+1) }
         if (f == 1) { L[s] = l; G[s] = g; next }
         grow = 1 + 0.1 * (s - 1)
         el = (l - L[s]) / L[s]; eg = (g - G[s]) / G[s]; if (el < 0) el = -el; if (eg < 0) eg = -eg
         printf "step %d loss %s vs %s (%.2e) grad_norm %s vs %s (%.2e)\n", s, l, L[s], el, g, G[s], eg
         if (el > 1e-3 * grow || eg > 5e-3 * grow) { print "  above the golden BF16 tolerance"; bad = 1 }
         n++ }
       END { if (n == 0) { print "no steps compared"; exit 1 } exit bad }' "$1" "$2"
}
for m in tiny-bf16 l8b2-bf16; do
  case $m in tiny*) data="--text data/corpus.txt";; *) data="--synthetic";; esac
  log "$m: one GPU, data 2, data 2 with ZeRO-1 (20 steps)"
  "$R" $D/$m-dp1.octet $data --steps 20 > $O/$m-one.log 2>&1 || { tail -3 $O/$m-one.log; bad=1; }
  launch2 $W/$m-dp2.log $D/$m-dp2.octet $data --steps 20 || bad=1; cp $W/$m-dp2.log $O/
  launch2 $W/$m-zero1.log $D/$m-dp2-zero1.octet $data --steps 20 || bad=1; cp $W/$m-zero1.log $O/
  echo "-- replicated data 2 against one GPU"; close $O/$m-one.log $O/$m-dp2.log || bad=1
  echo "-- ZeRO-1 data 2 against one GPU"; close $O/$m-one.log $O/$m-zero1.log || bad=1
done
log "8-layer Llama 3 8B BF16 tokens/s at data 2: replicated, then ZeRO-1 (--bench, 20 steps)"
launch2 $W/b-dp2.log $D/llama3-8b-8l-bf16-dp2.octet --bench --warmup 4 --steps 20 --json $O/l8b8-bf16-dp2.json || bad=1
tail -1 $W/b-dp2.log
launch2 $W/b-zero1.log $D/llama3-8b-8l-bf16-dp2-zero1.octet --bench --warmup 4 --steps 20 --json $O/l8b8-bf16-dp2-zero1.json || bad=1
tail -1 $W/b-zero1.log
rm -rf "$W"
exit $bad

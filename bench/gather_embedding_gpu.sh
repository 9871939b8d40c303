#!/bin/bash
# The embedding gradient's rows gathered instead of its accumulator reduced
# (octet-gather-embedding-gradient), on the GPU host (kind nvidia-h100-x2),
# in one call:
#   - tokens/s of the 8-layer Llama 3 8B FP8 bench model on one GPU, then
#     at data 2 (replicated and ZeRO-1), each with bundles compiled before
#     the pass (BEFORE: the embedding's 2.1 GB f32 accumulator all-reduced
#     or reduce-scattered after the backward) and after it (AFTER: 67 MB of
#     BF16 rows and 32 KB of token ids all-gathered a rank, before the
#     embedding's kernel), in the order ORDER gives (about 6 minutes in all
#     with the next check);
#   - 20 steps of 2 layers of Llama 3 8B (FP8 delayed, untied) at data 2,
#     replicated and ZeRO-1, after the pass, against one GPU within the
#     golden FP8 bounds (bench/zero1_common.sh's zero1_against_one).
# Prints each run's tokens/s per GPU and the step's median; the JSONs go
# to OUT.
#
# Here (bundles hold no weights; about 16 MiB with octet-run), from a
# checkout of the branch (AFTER) and one of the commit before the pass
# (BEFORE, e.g. git worktree add /tmp/before a4c385f and build it):
#   mkdir -p carry/ge/bin carry/ge/before carry/ge/after
#   cp build/tools/octet-run/octet-run carry/ge/bin/
#   build/tools/octet/octet compile bench/specs/llama3-8b-8l-fp8.pbtxt -o carry/ge/after/llama3-8b-8l-fp8-one.octet
#   for v in dp2 dp2-zero1; do
#     build/tools/octet/octet compile bench/specs/data-parallel/llama3-8b-8l-fp8-$v.pbtxt -o carry/ge/after/llama3-8b-8l-fp8-$v.octet
#     /tmp/before/build/tools/octet/octet compile bench/specs/data-parallel/llama3-8b-8l-fp8-$v.pbtxt -o carry/ge/before/llama3-8b-8l-fp8-$v.octet
#   done
#   for s in l8b2-fp8-dp1 l8b2-fp8-dp2 l8b2-fp8-dp2-zero1; do
#     build/tools/octet/octet compile bench/specs/data-parallel/$s.pbtxt -o carry/ge/after/$s.octet; done
# There (carry: carry/ge):
#   bash bench/gather_embedding_gpu.sh carry/ge/bin/octet-run carry/ge OUT_DIR
set -u
export NCCL_NVLS_ENABLE=0 LAUNCH2_TIMEOUT=200
R=${1:?octet-run}; D=${2:?bundle directory with before/ and after/}; O=${3:?output directory}
W=$(mktemp -d); mkdir -p "$O"; bad=0; LOSS_TOL=2e-3; NORM_TOL=2e-2
STEPS=${STEPS:-20}; WARMUP=${WARMUP:-4}; M=llama3-8b-8l-fp8
. "$(dirname "$0")/launch2.sh"
. "$(dirname "$0")/zero1_common.sh"
rate() { python3 -c "import json, sys; r = json.load(open(sys.argv[1])); print('%s: %.0f tokens/s per GPU, step %.4f s' % (sys.argv[2], r['tokens_per_s_per_gpu'], r['step_s_median']))" "$1" "$2" || bad=1; }
timeout 200 "$R" $D/after/$M-one.octet --bench --warmup $WARMUP --steps $STEPS --json $O/one.json > $W/one.log 2>&1 || { tail -3 $W/one.log; bad=1; }
rate $O/one.json "one GPU"
# ORDER: the bundles' order for each layout ("before after after before"
# alternates twice, about 4 more minutes).
k=0
for v in dp2 dp2-zero1; do
  for when in ${ORDER:-before after}; do
    n=$v-$when-$((++k))
    launch2 $W/$n.log $D/$when/$M-$v.octet --bench --warmup $WARMUP --steps $STEPS --json $O/$n.json || bad=1
    rate $O/$n.json "$v $when (rank 0)"
  done
done
# Correctness of the gathered rows on the GPU (D/after holds the l8b2 bundles).
D=$D/after
zero1_against_one l8b2-fp8 || bad=1
rm -rf "$W"
exit $bad

#!/bin/bash
# Pipeline 2 × data 2 (train.parallel { pipeline: 2 data: 2 }) on four GPUs
# of one host (kind nvidia-h100-x4), BF16, tiny-llama at global batch 8:
#   step1: one step on one GPU (tiny-bf16-pp1, 4 microbatches), at data 2
#     (tiny-bf16-dp2, 2 microbatches a rank) and at pipeline 2 × data 2,
#     1F1B (tiny-bf16-pp2-dp2) and interleaved (tiny-bf16-pp2-v2-dp2, two
#     chunks a rank), 2 microbatches a replica; each pipeline rank's
#     gradient buckets all-reduced over its data group in its chunk's last
#     backward; each run checkpointed after step 1; bench/dp_equivalence.py
#     compares the loss, the grad norm and every tensor of pipeline × data
#     with one GPU's and with data 2's within the golden bounds;
#     OUT/VARIANT-vs-one-step1.json, OUT/VARIANT-vs-dp2-step1.json.
#   steps20: 20 steps of each, each step's loss and grad norm against one
#     GPU's (golden BF16 tolerances as bench/pipeline_gpu.sh).
#   wrong-size: the bundle started as two ranks is told its layout.
# VARIANTS="pp2-dp2 pp2-v2-dp2 pp2-dp2-zero1" adds pipeline 2 x data 2 with
# ZeRO-1 (train.parallel.shard_optimizer: each pipeline rank's moments
# sharded over its data group), compiled as below.
# MODEL=tiny-fp8 runs the same parts on bundles of the delayed FP8 spec
# (bench/specs/pipeline/tiny-fp8-*, compiled as below with tiny-fp8 for
# tiny-bf16), held to the FP8 golden bounds (--numerics fp8; 20 steps:
# loss 2e-3, grad norm 2e-2 relative at step 1). Delayed scaling updates
# its scales after every microbatch from the max over the data group, so
# data 2 runs another sequence of scales than one GPU (each rank's first
# microbatch casts with the initial scales): there pipeline × data is
# judged against data 2, and its distance from one GPU is only reported.
# The script exits 1 when any check fails.
#
# Here (bundles compiled where MLIR is):
#   mkdir -p carry/pipeline-data/bin && cp build/tools/octet-run/octet-run carry/pipeline-data/bin/
#   sed 's/data: 1 tensor: 1 pipeline: 2 schedule: "1f1b"/data: 2 tensor: 1 pipeline: 1/' bench/specs/pipeline/tiny-bf16-pp2.pbtxt > /tmp/tiny-bf16-dp2.pbtxt
#   build/tools/octet/octet compile /tmp/tiny-bf16-dp2.pbtxt -o carry/pipeline-data/tiny-bf16-dp2.octet
#   sed 's/data: 1 tensor: 1 pipeline: 2/data: 2 tensor: 1 pipeline: 2/' bench/specs/pipeline/tiny-bf16-pp2-v2.pbtxt > /tmp/tiny-bf16-pp2-v2-dp2.pbtxt
#   build/tools/octet/octet compile /tmp/tiny-bf16-pp2-v2-dp2.pbtxt -o carry/pipeline-data/tiny-bf16-pp2-v2-dp2.octet
#   sed 's/data: 1 tensor: 1 pipeline: 2/data: 2 tensor: 1 pipeline: 2 shard_optimizer: true/' bench/specs/pipeline/tiny-bf16-pp2.pbtxt > /tmp/tiny-bf16-pp2-dp2-zero1.pbtxt
#   build/tools/octet/octet compile /tmp/tiny-bf16-pp2-dp2-zero1.pbtxt -o carry/pipeline-data/tiny-bf16-pp2-dp2-zero1.octet
#   for s in tiny-bf16-pp1 tiny-bf16-pp2-dp2; do
#     build/tools/octet/octet compile bench/specs/pipeline/$s.pbtxt -o carry/pipeline-data/$s.octet || break; done
# There (carry: carry/pipeline-data, data/corpus.txt):
#   bash bench/pipeline_data_gpu.sh carry/pipeline-data/bin/octet-run carry/pipeline-data OUT_DIR [PART ...]
set -u
export NCCL_NVLS_ENABLE=0
R=${1:?octet-run}; D=${2:?bundle directory}; O=${3:?output directory}; shift 3
parts=${*:-step1 steps20 wrong-size}
B=$(cd "$(dirname "$0")" && pwd); mkdir -p "$O"
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
MODEL=${MODEL:-tiny-bf16}
case $MODEL in
  *fp8*) NUMERICS=fp8; LOSS_TOL=2e-3; NORM_TOL=2e-2;;
  *) NUMERICS=bf16; LOSS_TOL=1e-3; NORM_TOL=5e-3;;
esac
# The run pipeline × data must equal: one GPU, or data 2 (delayed scaling).
case $MODEL in
  tiny-fp8) AGAINST=dp2;;
  *) AGAINST=one;;
esac
judged() { [ "$1" = "$AGAINST" ] || { echo "(reported, not judged: $MODEL is judged against ${AGAINST/dp2/data 2})"; return 0; }; return 1; }
bad=0
. "$B/launch2.sh"
. "$B/zero1_common.sh"
TEXT="--text data/corpus.txt"

# launchn N LOG ARGS...: $R ARGS as ranks 0..N-1 of one job on this host,
# with torchrun's variables; each rank's output in LOG.rR, rank 0's also in
# LOG. Returns non-zero when a rank failed.
launchn() {
  local n=$1 log=$2; shift 2
  local port=$((29500 + RANDOM % 2000)) r rc=0 pids=()
  for r in $(seq 0 $((n - 1))); do
    RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      timeout -s KILL 300 "$R" "$@" > "$log.r$r" 2>&1 &
    pids+=($!)
  done
  for r in $(seq 0 $((n - 1))); do
    wait ${pids[$r]} || { echo "rank $r failed:"; tail -3 "$log.r$r"; rc=1; }
  done
  cp "$log.r0" "$log"
  return $rc
}

VARIANTS=${VARIANTS:-"pp2-dp2 pp2-v2-dp2"}

step1() {
  local v
  log "step 1: one GPU, data 2, pipeline 2 x data 2 (1F1B, interleaved)"
  "$R" $D/$MODEL-pp1.octet $TEXT --steps 1 --checkpoint-dir $W/one > $O/step1-one.log 2>&1 \
    || { echo "one GPU failed:"; tail -3 $O/step1-one.log; bad=1; return; }
  launch2 $W/step1-dp2.log $D/$MODEL-dp2.octet $TEXT --steps 1 --checkpoint-dir $W/dp2 || { bad=1; return; }
  cp $W/step1-dp2.log* $O/
  for v in $VARIANTS; do
    launchn 4 $W/step1-$v.log $D/$MODEL-$v.octet $TEXT --steps 1 --checkpoint-dir $W/$v || { bad=1; continue; }
    cp $W/step1-$v.log* $O/
    python3 $B/dp_equivalence.py --numerics $NUMERICS --name "$v against one GPU" --one $O/step1-one.log $W/one/step-1 \
      --data2 $O/step1-$v.log $W/$v/step-1 --out $O/$v-vs-one-step1.json || judged one || bad=1
    python3 $B/dp_equivalence.py --numerics $NUMERICS --name "$v against data 2" --one $O/step1-dp2.log $W/dp2/step-1 \
      --data2 $O/step1-$v.log $W/$v/step-1 --out $O/$v-vs-dp2-step1.json || judged dp2 || bad=1
  done
}

steps20() {
  local v
  log "20 steps: one GPU, data 2, pipeline 2 x data 2 (1F1B, interleaved)"
  "$R" $D/$MODEL-pp1.octet $TEXT --steps 20 > $O/one.log 2>&1 || { tail -3 $O/one.log; bad=1; return; }
  launch2 $W/dp2.log $D/$MODEL-dp2.octet $TEXT --steps 20 || { bad=1; return; }
  cp $W/dp2.log* $O/
  echo "-- data 2 against one GPU"; close $O/one.log $O/dp2.log || judged one || bad=1
  for v in $VARIANTS; do
    launchn 4 $W/$v.log $D/$MODEL-$v.octet $TEXT --steps 20 || { bad=1; continue; }
    cp $W/$v.log* $O/
    echo "-- $v against one GPU"; close $O/one.log $O/$v.log || judged one || bad=1
    echo "-- $v against data 2"; close $O/dp2.log $O/$v.log || judged dp2 || bad=1
  done
}

wrong_size() {
  log "pipeline 2 x data 2 started as two ranks"
  launch2 $W/wrong-size.log $D/$MODEL-pp2-dp2.octet $TEXT --steps 1
  cp $W/wrong-size.log $O/
  grep -q "compiled for world size 4 (pipeline 2 × data 2)" $O/wrong-size.log || { cat $O/wrong-size.log; bad=1; }
}

for p in $parts; do
  case $p in
    step1) step1;;
    steps20) steps20;;
    wrong-size) wrong_size;;
    *) echo "unknown part $p"; bad=1;;
  esac
done
exit $bad

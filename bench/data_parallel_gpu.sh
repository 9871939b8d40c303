#!/bin/bash
# Data 2 against one GPU at the same global batch, on the GPU host (kind
# nvidia-h100-x2); the ranks start as torchrun starts them (RANK,
# WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), NVLink multicast off.
#   step1-MODEL (MODEL: tiny-fp8 tiny-bf16 l8b2-fp8 l8b2-bf16): one step on
#     one GPU (MODEL-dp1, micro-batch 2m), at data 2 replicated (MODEL-dp2)
#     and with ZeRO-1 (MODEL-dp2-zero1, micro-batch m a rank), each
#     checkpointed after step 1: bench/dp_equivalence.py compares the loss,
#     the grad norm and every tensor of each data-2 checkpoint (parameters,
#     AdamW moments, FP8 state) with one GPU's within the golden bounds
#     (golden::tolerancesFor); OUT/MODEL-VARIANT-step1.json.
#   curve-fp8, curve-bf16: 200 steps of tiny-llama on data/corpus.txt on one
#     GPU and at data 2 with ZeRO-1, bench/loss_curve.py's windows and bound;
#     OUT/tiny-*-200-curve.json.
# The script exits 1 when any comparison fails. Checkpoints, a checkpoint
# that moves between layouts and kill -9: bench/zero1_gpu.sh and
# bench/zero1_fp8_gpu.sh.
#
# Expected wall time on 2 x H100: tiny parts ~10 s each, curve parts ~40 s
# each, an l8b2 part ~4 min (three runs that each write a ~20 GB
# checkpoint, two comparisons reading 40 GB each): run each l8b2 part in a
# call of its own, e.g.
#   bash bench/data_parallel_gpu.sh R D OUT step1-tiny-fp8 step1-tiny-bf16 curve-fp8 curve-bf16
#   bash bench/data_parallel_gpu.sh R D OUT step1-l8b2-fp8
#   bash bench/data_parallel_gpu.sh R D OUT step1-l8b2-bf16
#
# Here (about 10 MiB with octet-run):
#   mkdir -p carry/dp/bin && cp build/tools/octet-run/octet-run carry/dp/bin/
#   for m in tiny-fp8 tiny-bf16 l8b2-fp8 l8b2-bf16; do for v in dp1 dp2 dp2-zero1; do
#     build/tools/octet/octet compile bench/specs/data-parallel/$m-$v.pbtxt -o carry/dp/$m-$v.octet; done; done
# There (carry: carry/dp, data/corpus.txt):
#   bash bench/data_parallel_gpu.sh carry/dp/bin/octet-run carry/dp OUT_DIR [PART ...]
set -u
export NCCL_NVLS_ENABLE=0
R=${1:?octet-run}; D=${2:?bundle directory}; O=${3:?output directory}; shift 3
parts=${*:-step1-tiny-fp8 step1-tiny-bf16 curve-fp8 curve-bf16 step1-l8b2-fp8 step1-l8b2-bf16}
B=$(cd "$(dirname "$0")" && pwd); mkdir -p "$O"
# Checkpoints of the 8B-shaped model are tens of GB: on the host's disk,
# one model's at a time.
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
bad=0
clocks() { nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader | tr '\n' ' '; echo; }
log() { echo; echo "=== $* ($(date +%T), ${SECONDS} s)"; }
. "$B/launch2.sh"
step1() {
  local m=$1 data n v
  case $m in tiny*) data="--text data/corpus.txt";; *) data="--synthetic";; esac
  case $m in *fp8) n=fp8;; *) n=bf16;; esac
  log "$m step 1: one GPU, data 2, data 2 with ZeRO-1"
  "$R" $D/$m-dp1.octet $data --steps 1 --checkpoint-dir $W/$m-one > $O/$m-one.log 2>&1 \
    || { echo "one GPU failed:"; tail -3 $O/$m-one.log; bad=1; return; }
  for v in dp2 dp2-zero1; do
    launch2 $W/$m-$v.log $D/$m-$v.octet $data --steps 1 --checkpoint-dir $W/$m-$v || { bad=1; continue; }
    cp $W/$m-$v.log $O/$m-$v.log
    python3 $B/dp_equivalence.py --numerics $n --name "$m $v" --one $O/$m-one.log $W/$m-one/step-1 \
      --data2 $W/$m-$v.log $W/$m-$v/step-1 --out $O/$m-$v-step1.json || bad=1
    rm -rf $W/$m-$v
  done
  rm -rf $W/$m-one
  clocks
}
curve() {
  local m=tiny-$1
  log "$m 200 steps: one GPU, then data 2 with ZeRO-1"
  "$R" $D/$m-dp1.octet --text data/corpus.txt --steps 200 > $O/$m-200-one.log 2>&1 \
    || { echo "one GPU failed:"; tail -3 $O/$m-200-one.log; bad=1; return; }
  launch2 $W/$m-200-zero1.log $D/$m-dp2-zero1.octet --text data/corpus.txt --steps 200 || { bad=1; return; }
  cp $W/$m-200-zero1.log $O/
  python3 $B/loss_curve.py $O/$m-200-one.log $O/$m-200-zero1.log --out $O/$m-200-curve.json > $W/curve.out
  local rc=$?; tail -2 $W/curve.out; [ $rc = 0 ] || bad=1
}
log clocks; clocks
for p in $parts; do
  case $p in
    step1-*) step1 ${p#step1-};;
    curve-*) curve ${p#curve-};;
    *) echo "data_parallel_gpu.sh: unknown part '$p' (step1-MODEL, curve-fp8, curve-bf16)"; bad=1;;
  esac
done
log "done: $([ $bad = 0 ] && echo every comparison passed || echo 'a comparison FAILED')"
exit $bad

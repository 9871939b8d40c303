#!/bin/bash
# Data parallelism on two GPUs against one, on the GPU host:
#   - step 1 at the same global batch (tiny-llama and 2 layers of Llama 3 8B,
#     FP8 and BF16): loss, grad norm and every checkpointed tensor, by
#     bench/dp_equivalence.py within the golden tolerances;
#   - 200 steps of tiny-llama at data 2 beside one GPU (bench/loss_curve.py);
#   - tokens/s per GPU of the 2-layer model at micro-batch 1 a GPU;
#   - a checkpoint saved at data 2, resumed at data 1, resumed again at data 2;
#   - kill -9 of rank 1 mid-run: how long rank 0 takes to exit, and why.
# The ranks start as torchrun starts them (RANK, WORLD_SIZE, LOCAL_RANK,
# MASTER_ADDR, MASTER_PORT); NVLink multicast stays off.
#
# Here (bundles compiled where MLIR is):
#   mkdir -p carry/dp && for s in bench/specs/data-parallel/*.pbtxt; do
#     build/tools/octet/octet compile $s -o carry/dp/$(basename $s .pbtxt).octet; done
#   cp build/tools/octet-run/octet-run carry/bin/
# There:
#   bash bench/data_parallel_gpu.sh carry/bin/octet-run carry/dp OUT_DIR
set -u
export NCCL_NVLS_ENABLE=0
R=${1:?octet-run}; D=${2:?bundle directory}; O=${3:?output directory}
B=$(cd "$(dirname "$0")" && pwd); W=$(mktemp -d); mkdir -p "$O"
clocks() { nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv,noheader; }
log() { echo; echo "=== $* ($(date +%T))"; }
. "$(dirname "$0")/launch2.sh"
log clocks; clocks
for m in tiny-fp8 tiny-bf16 l8b2-fp8 l8b2-bf16; do
  case $m in tiny*) data="--text data/corpus.txt";; *) data="--synthetic";; esac
  case $m in *fp8) n=fp8;; *) n=bf16;; esac
  log "$m step 1: one GPU, then data 2"
  "$R" $D/$m-dp1.octet $data --steps 1 --checkpoint-dir $W/$m-one-ckpt > $W/$m-one.log 2>&1; echo rc=$?
  launch2 $W/$m-dp2.log $D/$m-dp2.octet $data --steps 1 --checkpoint-dir $W/$m-dp2-ckpt
  python3 $B/dp_equivalence.py --numerics $n --name $m --one $W/$m-one.log $W/$m-one-ckpt/step-1 \
    --data2 $W/$m-dp2.log $W/$m-dp2-ckpt/step-1 --out $O/$m-step1.json
  rm -rf $W/$m-one-ckpt $W/$m-dp2-ckpt
done
for m in tiny-fp8 tiny-bf16; do
  log "$m 200 steps: one GPU, then data 2"
  "$R" $D/$m-dp1.octet --text data/corpus.txt --steps 200 > $O/$m-200-one.log 2>&1; echo rc=$?
  launch2 $W/$m-200-dp2.log $D/$m-dp2.octet --text data/corpus.txt --steps 200; cp $W/$m-200-dp2.log $O/
  python3 $B/loss_curve.py $O/$m-200-one.log $O/$m-200-dp2.log --out $O/$m-200-curve.json | tail -2
done
log "2-layer 8B tokens/s at micro-batch 1 a GPU (30 steps, --bench): one GPU, then data 2"
for m in l8b2-fp8 l8b2-bf16; do
  "$R" $D/$m-mb1.octet --bench --steps 30 --json $O/$m-bench-one.json > $W/b1.log 2>&1; tail -1 $W/b1.log; clocks
  launch2 $W/b2.log $D/$m-dp2.octet --bench --steps 30 --json $O/$m-bench-dp2.json; tail -1 $W/b2.log; clocks
done
log "checkpoint: data 2 to step 10, data 1 resumes to 15, data 2 resumes to 20; beside 20 steps at data 2"
m=tiny-fp8; c=$W/moved-ckpt
launch2 $W/straight.log $D/$m-dp2.octet --text data/corpus.txt --steps 20
launch2 $W/moved-a.log $D/$m-dp2.octet --text data/corpus.txt --steps 10 --checkpoint-dir $c
"$R" $D/$m-dp1.octet --text data/corpus.txt --steps 15 --checkpoint-dir $c --resume > $W/moved-b.log 2>&1; echo rc=$?
launch2 $W/moved-c.log $D/$m-dp2.octet --text data/corpus.txt --steps 20 --checkpoint-dir $c --resume
grep -hE "^step +(1[1-9]|20)/" $W/straight.log | sed 's/  tokens.*//' | tee $O/moved-straight.steps
grep -hE "^step +(1[1-9]|20)/|resumed" $W/moved-b.log $W/moved-c.log | sed 's/  tokens.*//' | tee $O/moved.steps
log "kill -9 of rank 1 mid-run"
port=$((31000 + RANDOM % 1000))
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    "$R" $D/l8b2-bf16-dp2.octet --synthetic --steps 100000 > $W/kill.r$r 2>&1 &
  eval k$r=$!
done
sleep 25; t0=$(date +%s.%N); kill -9 $k1; wait $k0; rc=$?; t1=$(date +%s.%N)
echo "rank 0 exited rc=$rc $(python3 -c "print(f'{$t1-$t0:.1f}')") s after rank 1 was killed" | tee $O/kill.log
tail -2 $W/kill.r0 | tee -a $O/kill.log
log clocks; clocks
rm -rf "$W"

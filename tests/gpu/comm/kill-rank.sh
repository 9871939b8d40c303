#!/bin/sh
# kill -9 of one rank mid-loop: the other rank must exit non-zero within 60 s
# with a message naming the lost rank, never hang.
#   sh tests/gpu/comm/kill-rank.sh OCTET_COMM_GPU_TEST [VICTIM]
# Starts two ranks by hand (torchrun's variables, no launcher, so that the
# survivor ends on its own), lets them run steps of an all-reduce, kills
# VICTIM (default 1) with SIGKILL after its step 20, and times the survivor.
# Exits 77 (skipped) with fewer than 2 GPUs.
set -u
bin=$1
victim=${2:-1}
survivor=$((1 - victim))
limit=60

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "${gpus:-0}" -lt 2 ]; then
  echo "skipped: ${gpus:-0} GPU(s), the test needs 2"
  exit 77
fi

dir=$(mktemp -d)
trap 'kill -9 $pid0 $pid1 2>/dev/null; rm -rf "$dir"' EXIT
port=$("$bin" --free-port) || { echo "FAIL: no free port"; exit 1; }
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    NCCL_NVLS_ENABLE=0 "$bin" --rank --steps 1000000 >"$dir/rank$r.log" 2>&1 &
  eval pid$r=$!
done
eval victim_pid=\$pid$victim
eval survivor_pid=\$pid$survivor

waited=0
until grep -q '^step 20$' "$dir/rank$victim.log"; do
  if [ $waited -ge 240 ]; then
    echo "FAIL: rank $victim never reached step 20"
    cat "$dir/rank0.log" "$dir/rank1.log"
    exit 1
  fi
  sleep 0.5
  waited=$((waited + 1))
done

kill -9 "$victim_pid"
start=$(date +%s)
while kill -0 "$survivor_pid" 2>/dev/null; do
  if [ $(($(date +%s) - start)) -gt $limit ]; then
    echo "FAIL: rank $survivor still runs ${limit} s after rank $victim was killed"
    tail -5 "$dir/rank$survivor.log"
    exit 1
  fi
  sleep 0.2
done
wait "$survivor_pid"
status=$?
took=$(($(date +%s) - start))
echo "rank $survivor exited with status $status ${took} s after rank $victim was killed:"
grep -v '^step ' "$dir/rank$survivor.log" | tail -3

if [ "$status" -eq 0 ]; then
  echo "FAIL: rank $survivor exited with status 0"
  exit 1
fi
if [ "$victim" -eq 0 ]; then
  named='rank 0, which runs the store, is gone'
else
  named="rank $victim is lost"
fi
if ! grep -q "$named" "$dir/rank$survivor.log"; then
  echo "FAIL: rank $survivor's output does not name the lost rank ('$named')"
  exit 1
fi
echo "PASS: rank $survivor ended in ${took} s naming the lost rank"

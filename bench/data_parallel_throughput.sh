#!/bin/bash
# Data-parallel throughput on the GPU host, in one call: each bench model
# (bench/specs/llama3-8b-8l-*.pbtxt at sequence 8192, micro-batch 1;
# bench/specs/llama3.2-1b-*.pbtxt at sequence 4096, micro-batch 2) on one
# GPU, then at data 2 with the same micro-batch a GPU
# (bench/specs/data-parallel/*-dp2.pbtxt), then the bundle's gradient
# reduction alone (bench/allreduce_time.py, the calls and elements
# `octet inspect` lists). The summary JSON gives, per model and precision,
# tokens/s per GPU on one and on two GPUs, their ratio, and how much of the
# reduction the step hid behind compute. Clocks and power are logged
# before and after each run.
#
# Here (bundles compiled where MLIR is):
#   mkdir -p carry/dpt && for s in bench/specs/llama3-8b-8l-{fp8,bf16} bench/specs/llama3.2-1b-{fp8,bf16}; do
#     build/tools/octet/octet compile $s.pbtxt -o carry/dpt/$(basename $s)-one.octet
#     build/tools/octet/octet compile bench/specs/data-parallel/$(basename $s)-dp2.pbtxt -o carry/dpt/$(basename $s)-dp2.octet
#     build/tools/octet/octet inspect carry/dpt/$(basename $s)-dp2.octet > carry/dpt/$(basename $s)-dp2.inspect; done
#   cp build/tools/octet-run/octet-run carry/bin/
# There:
#   bash bench/data_parallel_throughput.sh carry/bin/octet-run carry/dpt OUT_DIR [MODEL ...]
set -u
export NCCL_NVLS_ENABLE=0
R=${1:?octet-run}; D=${2:?bundle directory}; O=${3:?output directory}; shift 3
models=${*:-llama3-8b-8l-fp8 llama3-8b-8l-bf16 llama3.2-1b-fp8 llama3.2-1b-bf16}
B=$(cd "$(dirname "$0")" && pwd); W=$(mktemp -d); mkdir -p "$O"
clocks() { nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv,noheader | tr '\n' ' '; echo; }
STEPS=${STEPS:-20}; WARMUP=${WARMUP:-4}
for m in $models; do
  echo "=== $m ($(date +%T))"
  echo "clocks before: $(clocks)"
  "$R" $D/$m-one.octet --bench --warmup $WARMUP --steps $STEPS --json $W/$m-one.json > $W/$m-one.log 2>&1 \
    || { echo "one GPU failed:"; tail -5 $W/$m-one.log; }
  tail -1 $W/$m-one.log; echo "clocks: $(clocks)"
  port=$((29500 + RANDOM % 2000))
  for r in 0 1; do
    RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      "$R" $D/$m-dp2.octet --bench --warmup $WARMUP --steps $STEPS --json $W/$m-dp2.json > $W/$m-dp2.r$r 2>&1 &
    eval pid$r=$!
  done
  wait $pid0; rc0=$?; wait $pid1; rc1=$?
  [ $rc0 = 0 ] && [ $rc1 = 0 ] || { echo "data 2 failed: rc $rc0 $rc1"; tail -5 $W/$m-dp2.r0 $W/$m-dp2.r1; }
  tail -1 $W/$m-dp2.r0; echo "clocks: $(clocks)"
  # The reduction alone: each call's f32 elements, from the bundle.
  elems=$(python3 - "$D/$m-dp2.inspect" <<'PY'
import re, sys
for line in open(sys.argv[1]):
    m = re.search(r"collective all_reduce sum f32 over 'data'.*: (\d+) calls, (\d+) tensors, (\d+) elements", line)
    if m:
        calls, total = int(m.group(1)), int(m.group(3))
        print(" ".join([str(total // calls)] * calls))
        break
PY
)
  torchrun --nproc-per-node 2 --master-port $((31000 + RANDOM % 2000)) $B/allreduce_time.py \
    --elements $elems --out $W/$m-allreduce.json > $W/$m-allreduce.log 2>&1 || tail -3 $W/$m-allreduce.log
done
python3 - "$W" "$O/data-parallel-throughput.json" "$*" $models <<'PY'
import json, os, sys, socket
w, out, cmdargs, models = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
def load(p):
    try:
        return json.load(open(p))
    except Exception as e:
        return {"error": str(e)}
rows = []
for m in models:
    one, dp2, ar = (load(os.path.join(w, f"{m}-{k}.json")) for k in ("one", "dp2", "allreduce"))
    row = {"model": m, "one_gpu": one, "data2": dp2, "reduction_alone": ar}
    if "tokens_per_s_per_gpu" in one and "tokens_per_s_per_gpu" in dp2:
        row["per_gpu_ratio"] = dp2["tokens_per_s_per_gpu"] / one["tokens_per_s_per_gpu"]
        exposed = (dp2["step_s_median"] - one["step_s_median"]) * 1e3
        row["exposed_ms"] = exposed
        if "median_ms" in ar:
            row["reduction_alone_ms"] = ar["median_ms"]
            row["hidden_share"] = 1 - max(0.0, exposed) / ar["median_ms"]
    rows.append(row)
    print(m, {k: round(v, 4) for k, v in row.items() if isinstance(v, float)})
json.dump({"command": "bash bench/data_parallel_throughput.sh OCTET_RUN BUNDLES OUT " + cmdargs,
           "host": socket.gethostname(), "rows": rows}, open(out, "w"), indent=1)
PY
tail -n 25 $W/*.log $W/*.r0 > "$O/data-parallel-throughput.log" 2>/dev/null
rm -rf "$W"

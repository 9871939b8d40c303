#!/bin/bash
# Data-parallel throughput on the GPU host (kind nvidia-h100-x2), in one
# call: for the 8-layer Llama 3 8B FP8 bench model (sequence 8192,
# micro-batch 1) and Llama 3.2 1B FP8 (sequence 4096, micro-batch 2),
#   - octet on one GPU (bench/specs/MODEL.pbtxt), then at data 2 with the
#     same micro-batch a GPU, ZeRO-1 (MODEL-dp2-zero1) and replicated
#     (MODEL-dp2, bench/specs/data-parallel/); each rank's JSON;
#   - the PyTorch peer (bench/peers/torch_llama.py, FP8 linears through
#     torch._scaled_mm, per-block torch.compile) on one GPU and over both
#     with FSDP2, then, as far as the time budget goes, with DDP;
#   - each data-2 bundle's collectives alone (bench/collectives_time.py,
#     the NCCL calls `octet inspect --collectives` lists);
#   - each data-2 run's last step recorded (octet-run --timeline): how much
#     of the collectives ran beside compute.
# The summary JSON (OUT/data-parallel-throughput.json) gives per model:
# tokens/s per GPU on one GPU and of each rank at data 2, their ratio, and
# how much communication the step hid: exposed_ms = step(data 2) - step(one
# GPU), comm_alone_ms = the bundle's collectives of one step alone,
# hidden_share = 1 - max(0, exposed) / alone (whatever else data 2 adds to
# a step, a slower rank or NCCL's kernels slowing compute, counts as
# exposed communication). Clocks and power are logged after each run.
#
# Expected wall time on 2 x H100: about 420 s (octet 8B: ~55 s a run, 1B:
# ~25 s; each peer run ~35 s; each collectives run ~15 s); BUDGET_S
# (default 540) stops starting runs that would not end inside it, and the
# JSON says which were skipped.
#
# Here (about 21 MiB with octet-run; bundles hold no weights):
#   mkdir -p carry/dpt/bin && cp build/tools/octet-run/octet-run carry/dpt/bin/
#   for m in llama3-8b-8l-fp8 llama3.2-1b-fp8; do
#     build/tools/octet/octet compile bench/specs/$m.pbtxt -o carry/dpt/$m-one.octet
#     for v in dp2 dp2-zero1; do
#       build/tools/octet/octet compile bench/specs/data-parallel/$m-$v.pbtxt -o carry/dpt/$m-$v.octet
#       build/tools/octet/octet inspect --collectives carry/dpt/$m-$v.octet > carry/dpt/$m-$v.collectives
#     done; done
# There (carry: carry/dpt, and carry/wheels only for the torchao modes):
#   bash bench/data_parallel_throughput.sh carry/dpt/bin/octet-run carry/dpt OUT_DIR
set -u
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
R=${1:?octet-run}; D=${2:?bundle directory}; O=${3:?output directory}
B=$(cd "$(dirname "$0")" && pwd); W=$(mktemp -d); mkdir -p "$O"
STEPS=${STEPS:-20}; WARMUP=${WARMUP:-4}; BUDGET_S=${BUDGET_S:-540}; export LAUNCH2_TIMEOUT=200
MODELS=${MODELS:-"llama3-8b-8l-fp8 llama3.2-1b-fp8"}
# The data-2 layouts run for each model (bundles MODEL-VARIANT.octet).
export VARIANTS=${VARIANTS:-"dp2-zero1 dp2"}
# PEERS=0 leaves the PyTorch peers out (octet alone, e.g. two octet-run
# builds on the same bundles in one call).
PEERS=${PEERS:-1}
. "$B/launch2.sh"
clocks() { nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader | tr '\n' ' '; }
: > "$W/skipped"
# fits NAME SECONDS: whether a run expected to take SECONDS still ends
# inside the budget; a run that does not is listed as skipped.
fits() {
  if [ $((SECONDS + $2)) -le "$BUDGET_S" ]; then return 0; fi
  echo "$1 (needs ~$2 s at ${SECONDS} s of $BUDGET_S)" | tee -a "$W/skipped"; return 1
}
note() { echo "=== $* (${SECONDS} s, $(date +%T))"; }
peer_args() { # MODEL: the peer's model, sequence and micro-batch (bench/cases.sh)
  case $1 in llama3-8b-8l-*) echo "--model llama3-8b-8l --seq 8192 --batch 1";;
             llama3.2-1b-*) echo "--model llama3.2-1b --seq 4096 --batch 2";; esac
}
cost() { case $1 in llama3-8b-8l-*) echo 60;; *) echo 30;; esac; }
peer() { # NAME MODEL LAYOUT(one|fsdp2|ddp)
  local name=$1 m=$2 dp=$3 cmd
  if [ "$dp" = one ]; then cmd=(python3 "$B/peers/torch_llama.py")
  else cmd=(python3 -m torch.distributed.run --standalone --nproc-per-node 2 "$B/peers/torch_llama.py" --dp "$dp"); fi
  cmd+=($(peer_args "$m") --mode fp8 --warmup 3 --steps "$STEPS" --out "$W/$name.json")
  echo "${cmd[*]}" > "$W/$name.cmd"
  timeout 150 "${cmd[@]}" > "$W/$name.log" 2>&1 || { echo "$name failed:"; tail -4 "$W/$name.log"; }
  python3 -c "import json, sys; r = json.load(open(sys.argv[1])); print('%.0f tokens/s per GPU, step %.4f s' % (r['tokens_per_s_per_gpu'], r['step_s_median']))" \
    "$W/$name.json" 2>/dev/null; echo "clocks: $(clocks)"
}
nvidia-smi --query-gpu=index,name,memory.total,driver_version,clocks.max.sm,power.limit --format=csv
for m in $MODELS; do
  c=$(cost $m)
  note "$m: octet one GPU"
  if fits "$m octet one GPU" $c; then
    timeout 200 "$R" $D/$m-one.octet --bench --warmup $WARMUP --steps $STEPS --json $W/$m-one.json > $W/$m-one.log 2>&1 \
      || { echo "one GPU failed:"; tail -5 $W/$m-one.log; }
    tail -1 $W/$m-one.log; echo "clocks: $(clocks)"
  fi
  for v in $VARIANTS; do
    note "$m: octet data 2 ($v)"
    fits "$m octet $v" $c || continue
    launch2 $W/$m-$v.log $D/$m-$v.octet --bench --warmup $WARMUP --steps $STEPS --json $W/$m-$v.json \
      --timeline $W/$m-$v.trace.json
    tail -1 $W/$m-$v.log; echo "clocks: $(clocks)"
  done
  for dp in one fsdp2; do
    note "$m: PyTorch peer ($dp)"
    [ "$PEERS" = 1 ] && fits "$m peer $dp" 45 && peer peer-$m-$dp $m $dp
  done
done
for m in $MODELS; do
  for v in $VARIANTS; do
    note "$m $v: collectives alone"
    [ -s $D/$m-$v.collectives ] || { echo "no $D/$m-$v.collectives (see the header)"; continue; }
    fits "$m $v collectives alone" 20 || continue
    timeout 60 python3 -m torch.distributed.run --standalone --nproc-per-node 2 $B/collectives_time.py \
      $D/$m-$v.collectives --out $W/$m-$v-alone.json > $W/$m-$v-alone.log 2>&1 || tail -3 $W/$m-$v-alone.log
  done
done
for m in $MODELS; do
  note "$m: PyTorch peer (ddp)"
  [ "$PEERS" = 1 ] && fits "$m peer ddp" 45 && peer peer-$m-ddp $m ddp
done
note "summary"
python3 - "$W" "$O/data-parallel-throughput.json" "$BUDGET_S" $MODELS <<'PY'
import json, os, socket, sys
w, out, budget, models = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
variants = os.environ["VARIANTS"].split()
def load(name):
    p = os.path.join(w, name)
    try:
        return json.load(open(p))
    except Exception as e:
        return {"error": f"{name}: {e}"}
def programs(j):
    return {p["program"]: p for p in j.get("programs", [])}
def cmd(name):
    p = os.path.join(w, name + ".cmd")
    return open(p).read().strip() if os.path.exists(p) else None
rows = []
for m in models:
    one = load(f"{m}-one.json")
    row = {"model": m, "octet": {"one_gpu": one}, "peer": {}}
    base = one.get("tokens_per_s_per_gpu")
    for v in variants:
        ranks = [load(f"{m}-{v}.json"), load(f"{m}-{v}.json.rank1")]
        alone = load(f"{m}-{v}-alone.json")
        r = {"ranks": ranks, "collectives_alone": alone}
        # The last timed step, recorded (octet-run --timeline): how long
        # each rank's communication stream ran collectives and how much of
        # it its compute stream hid.
        r["timeline_by_rank"] = [x.get("timeline") for x in ranks]
        tps = [x.get("tokens_per_s_per_gpu") for x in ranks]
        if base and all(tps):
            r["per_gpu_ratio_by_rank"] = [t / base for t in tps]
            # The job's step is the slower rank's.
            step2 = max(x["step_s_median"] for x in ranks)
            r["exposed_ms"] = (step2 - one["step_s_median"]) * 1e3
            if "median_ms" in alone:
                r["comm_alone_ms"] = alone["median_ms"]
                r["hidden_share"] = 1 - max(0.0, r["exposed_ms"]) / alone["median_ms"]
        # Where the exposed time is: each program's median device time on
        # one GPU and on each rank, and how long each rank's compute stream
        # waited at the program's end for the communication stream.
        onep = programs(one)
        r["programs"] = {k: {"one_gpu_ms": onep.get(k, {}).get("median_ms"),
                             "ms_by_rank": [programs(x).get(k, {}).get("median_ms") for x in ranks],
                             "join_wait_ms_by_rank": [programs(x).get(k, {}).get("median_join_wait_ms") for x in ranks],
                             "main_collective_ms_by_rank": [programs(x).get(k, {}).get("median_main_collective_ms") for x in ranks]}
                         for k in programs(ranks[0])}
        r["outside_programs_ms"] = {"one_gpu": one.get("outside_programs_ms"),
                                    "by_rank": [x.get("outside_programs_ms") for x in ranks]}
        row["octet"][v] = r
    pone = load(f"peer-{m}-one.json")
    row["peer"]["one_gpu"] = dict(pone, command=cmd(f"peer-{m}-one"))
    for dp in ("fsdp2", "ddp"):
        p = load(f"peer-{m}-{dp}.json")
        p["command"] = cmd(f"peer-{m}-{dp}")
        if pone.get("tokens_per_s_per_gpu") and p.get("tokens_per_s_per_gpu"):
            p["per_gpu_ratio"] = p["tokens_per_s_per_gpu"] / pone["tokens_per_s_per_gpu"]
        row["peer"][dp] = p
    rows.append(row)
    short = {f"octet {v} rank{i}": round(x, 4) for v in variants
             for i, x in enumerate(row["octet"][v].get("per_gpu_ratio_by_rank", []))}
    short.update({f"octet {v} {k}": round(row["octet"][v][k], 3) for v in variants
                  for k in ("exposed_ms", "comm_alone_ms", "hidden_share") if k in row["octet"][v]})
    short.update({f"peer {dp}": round(row["peer"][dp]["per_gpu_ratio"], 4)
                  for dp in ("fsdp2", "ddp") if "per_gpu_ratio" in row["peer"][dp]})
    print(m, "one GPU", base, "tok/s;", short)
    for v in variants:
        for i, t in enumerate(row["octet"][v].get("timeline_by_rank", [])):
            if t and "hidden_share" in t:
                print(f"  {v} rank {i}, step {t['step']}: collectives {t['side_collective_ms']:.1f} ms, "
                      f"{t['hidden_collective_ms']:.1f} ms ({100 * t['hidden_share']:.0f}%) beside compute")
        for k, p in row["octet"][v].get("programs", {}).items():
            print(f"  {v} {k}: one GPU {p['one_gpu_ms']} ms, by rank {p['ms_by_rank']} ms, "
                  f"end wait for communication {p['join_wait_ms_by_rank']} ms, "
                  f"in compute-stream collectives {p['main_collective_ms_by_rank']} ms")
        if "outside_programs_ms" in row["octet"][v]:
            print(f"  {v} outside the programs (host turns): {row['octet'][v]['outside_programs_ms']} ms")
skipped = [l.strip() for l in open(os.path.join(w, "skipped")) if l.strip()]
json.dump({"command": "bash bench/data_parallel_throughput.sh OCTET_RUN BUNDLES OUT",
           "host": socket.gethostname(), "budget_s": budget, "skipped": skipped,
           "definitions": {
               "per_gpu_ratio_by_rank": "each rank's tokens/s per GPU (the job's tokens over that rank's median step) over one GPU's",
               "exposed_ms": "median step at data 2 (the slower rank's) minus median step on one GPU: what data 2 adds to a step",
               "comm_alone_ms": "the bundle's NCCL calls of one step (octet inspect --collectives, rank 0) issued alone with torch.distributed on the same GPUs (bench/collectives_time.py)",
               "hidden_share": "1 - max(0, exposed_ms) / comm_alone_ms",
               "timeline_by_rank": "each rank's last timed step, recorded with CUDA events (octet-run --timeline, trace in MODEL-VARIANT.trace.json[.rank1]): side_collective_ms, how long the communication stream ran collectives; hidden_collective_ms, how much of that the compute stream spent on work of its own; hidden_share, their ratio",
               "programs": "per program kind, the median device time of its runs in the timed steps (octet-run --json), on one GPU and on each rank; join_wait: the part after the compute stream's last instruction, waiting for the communication stream; main_collective: the time the compute stream spent in its own collectives (the embedding gradient's gathers, the norm's), waits for earlier calls on the communicator included",
               "outside_programs_ms": "the median step minus the programs' median times: the host's turn between programs and steps"},
           "rows": rows}, open(out, "w"), indent=1)
PY
for f in $W/*.log $W/*.r0 $W/*.r1; do [ -e "$f" ] && { echo "== $(basename $f)"; tail -n 15 "$f"; }; done > "$O/data-parallel-throughput.log" 2>/dev/null
cp $W/*.json* "$O/" 2>/dev/null
rm -rf "$W"

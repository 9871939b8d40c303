#!/usr/bin/env bash
# The PyTorch peer (bench/peers/torch_llama.py) on one GPU and data-parallel
# on two, on the GPU host (kind nvidia-h100-x2): for each model and numerics,
# one GPU, then torchrun over 2 GPUs with FSDP2, then with DDP, every run
# with the same micro-batch per GPU, so tokens/s per GPU compare directly.
#
#   bash bench/data_parallel_peer.sh OUT_DIR [--only MODEL] [--steps N]
#                                    [--warmup N] [--timeout S]
#
# Models: bench/cases.sh's, as bench/run_bench.sh runs them on one GPU:
# llama3.2-1b at sequence 4096, micro-batch 2; llama3-8b-8l (the 8-layer
# Llama 3 8B shape, full vocabulary) at sequence 8192, micro-batch 1.
# Numerics: bf16 and fp8.
#
# OUT_DIR gets, per model and numerics, one JSON (peer-dp-MODEL-MODE.json:
# the three runs' JSON under "runs", per-GPU tokens/s of each 2-GPU run
# over the 1-GPU run under "per_gpu_vs_one_gpu", and the launch commands);
# per model, nvidia-smi's clocks, power and utilisation every second over
# its runs (smi-MODEL.csv; runs.log says when each run began and ended);
# summary.txt, one line per run; runs.log, every run's output.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out=${1:?usage: data_parallel_peer.sh OUT_DIR [--only MODEL] [--steps N] [--warmup N] [--timeout S]}
shift
only=""; steps=20; warmup=3; per_run_timeout=300
while [ $# -gt 0 ]; do
  case "$1" in
    --only) only="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --timeout) per_run_timeout="$2"; shift 2 ;;
    *) echo "data_parallel_peer.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ -n "${NCCL_NVLS_ENABLE:-}" ] && [ "$NCCL_NVLS_ENABLE" != 0 ]; then
  echo "data_parallel_peer.sh: NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE; NVLink multicast must stay off: set it to 0" >&2
  exit 2
fi
export NCCL_NVLS_ENABLE=0
export PYTHONUNBUFFERED=1
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
peer="$here/peers/torch_llama.py"
log="$out/runs.log"
: > "$log"

gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
if [ "$gpus" -lt 2 ]; then
  echo "data_parallel_peer.sh: $gpus GPU(s) visible, the 2-GPU runs need 2" >&2
  exit 2
fi
nvidia-smi --query-gpu=index,name,memory.total,driver_version,clocks.max.sm,power.limit \
  --format=csv | tee -a "$log"

# case NAME MODEL MODE SEQ BATCH DP: one run; its JSON lands in $work/NAME.json
# (an error object where the run left none).
case_run() {
  local name=$1 model=$2 mode=$3 seq=$4 batch=$5 dp=$6
  local args=(--model "$model" --mode "$mode" --seq "$seq" --batch "$batch"
              --warmup "$warmup" --steps "$steps" --out "$work/$name.json")
  local cmd
  if [ "$dp" = one ]; then
    cmd=(python3 "$peer" "${args[@]}")
  else
    cmd=(python3 -m torch.distributed.run --standalone --nproc-per-node 2
         "$peer" "${args[@]}" --dp "$dp")
  fi
  echo "=== $name begin $(date +%T.%N | cut -c1-12): NCCL_NVLS_ENABLE=0 ${cmd[*]}" >> "$log"
  timeout "$per_run_timeout" "${cmd[@]}" >> "$log" 2>&1
  local rc=$?
  echo "=== $name end $(date +%T.%N | cut -c1-12) rc=$rc" >> "$log"
  if [ ! -s "$work/$name.json" ]; then
    printf '{"model": "%s", "mode": "%s", "dp": "%s", "error": "exit %s, see runs.log"}\n' \
      "$model" "$mode" "$dp" "$rc" > "$work/$name.json"
  fi
  printf '%s\n' "${cmd[*]}" > "$work/$name.cmd"
}

source "$here/cases.sh"
for c in "${bench_cases[@]}"; do
  read -r model seq batch <<<"$c"
  if [ -n "$only" ] && [ "$only" != "$model" ]; then continue; fi
  nvidia-smi --query-gpu=timestamp,index,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu,memory.used \
    --format=csv -l 1 > "$out/smi-$model.csv" 2>&1 &
  smi=$!
  for mode in bf16 fp8; do
    for dp in one fsdp2 ddp; do
      case_run "$model-$mode-$dp" "$model" "$mode" "$seq" "$batch" "$dp"
    done
    python3 - "$work" "$out" "$model" "$mode" <<'PY' | tee -a "$out/summary.txt"
import json, os, sys
work, out, model, mode = sys.argv[1:]
runs, cmds = {}, {}
for dp, key in (("one", "one_gpu"), ("fsdp2", "fsdp2_2gpu"), ("ddp", "ddp_2gpu")):
    base = os.path.join(work, "%s-%s-%s" % (model, mode, dp))
    runs[key] = json.load(open(base + ".json"))
    cmds[key] = "NCCL_NVLS_ENABLE=0 " + open(base + ".cmd").read().strip()
one = runs["one_gpu"].get("tokens_per_s_per_gpu")
ratio = {}
for key in ("fsdp2_2gpu", "ddp_2gpu"):
    tps = runs[key].get("tokens_per_s_per_gpu")
    ratio[key] = tps / one if tps and one else None
res = dict(model=model, mode=mode, per_gpu_vs_one_gpu=ratio,
           commands=cmds, runs=runs)
json.dump(res, open(os.path.join(out, "peer-dp-%s-%s.json" % (model, mode)), "w"),
          indent=1)
for key, r in runs.items():
    name = "%s %s %s" % (model, mode, key)
    if r.get("error"):
        print("%-32s error: %s" % (name, r["error"][:100]))
        continue
    mfu = r["mfu_fp8_peak"] if mode == "fp8" else r["mfu_bf16_peak"]
    print("%-32s %9.0f tok/s/GPU %9.0f tok/s job  %.4f s/step  %6.1f TFLOP/s/GPU"
          "  MFU(%s peak) %.3f  peak %.1f GiB  vs 1 GPU %s" % (
              name, r["tokens_per_s_per_gpu"], r["tokens_per_s"],
              r["step_s_median"], r["tflops_per_gpu"], mode, mfu,
              r.get("peak_mem_allocated_gib", 0),
              "%.4f" % ratio[key] if ratio.get(key) else "-"))
PY
  done
  kill "$smi" 2>/dev/null; wait "$smi" 2>/dev/null
done
echo "results in $out: $(cd "$out" && ls | tr '\n' ' ')"

#!/usr/bin/env bash
# Runs octet's training benchmark on the GPU host in one go: the PyTorch peers
# (torch.compile BF16, torch.compile + FP8 linears through torch._scaled_mm)
# and, where a bundle and octet-run are given, octet itself, each case in its
# own process so that peak memory is the case's own. Results land in
# bench/results/<case>.json, and a summary with octet/peer ratios in
# bench/results/summary.json; $OUT, where set, gets copies.
#
#   bash bench/run_bench.sh [--quick] [--only MODEL] [--timeout S]
#                           [--octet-run PATH --bundles DIR] [--octet-only]
#                           [--torchao PATH] [--sdpa BACKEND]
#
# --torchao adds the torchao.float8 rows (tensorwise and rowwise recipes,
# modes fp8ao_tensorwise and fp8ao_rowwise) from a torchao wheel or folder
# (the GPU host has no network: carry the wheel). --sdpa picks the PyTorch
# rows' attention backend (default: PyTorch's choice); every row's JSON
# names the attention kernels it ran. The summary divides octet's FP8 by the
# best PyTorch FP8 row and octet's BF16 by the best PyTorch BF16 row.
#
# --octet-only skips the PyTorch rows: for comparing octet's recipes with
# each other (fp8current and fp8blockwise against fp8), not with a peer.
#
# The cases: llama3.2-1b at sequence 4096 (micro-batch 2) and an 8-layer
# llama3-8b-shaped model with its full 128256 vocabulary at sequence 8192
# (micro-batch 1). Modes bf16 and fp8 (delayed scaling) run octet beside
# its peers; fp8current and fp8blockwise (current and blockwise scaling,
# where a <model>-<mode>.octet bundle exists) run octet only, and the
# summary gives their ratio to octet's fp8.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
results="$here/results"
mkdir -p "$results"
steps=10
warmup=3
per_case_timeout=150
octet_run=""
bundles=""
only=""
peers=1
torchao=""
sdpa=auto
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) steps=4; warmup=2; shift ;;
    --octet-run) octet_run="$2"; shift 2 ;;
    --bundles) bundles="$2"; shift 2 ;;
    --timeout) per_case_timeout="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    --octet-only) peers=0; shift ;;
    --torchao) torchao="$2"; shift 2 ;;
    --sdpa) sdpa="$2"; shift 2 ;;
    *) echo "run_bench.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

export PYTHONUNBUFFERED=1
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv \
  | tee "$results/gpu.txt"

source "$here/cases.sh"
for c in "${bench_cases[@]}"; do
  read -r model seq batch <<<"$c"
  if [ -n "$only" ] && [ "$only" != "$model" ]; then continue; fi
  # fp8current and fp8blockwise (current and blockwise FP8 scaling) are
  # octet's alone: their peer row is torch's fp8, already run, and they are
  # compared with octet's delayed fp8.
  peer_modes="bf16 fp8"
  if [ -n "$torchao" ]; then peer_modes="$peer_modes fp8ao_tensorwise fp8ao_rowwise"; fi
  for mode in $peer_modes fp8current fp8blockwise; do
    if [ "$peers" = 1 ] && [[ " $peer_modes " == *" $mode "* ]]; then
      name="torch-$mode-$model-s$seq"
      echo "== $name"
      timeout "$per_case_timeout" python3 "$here/peers/torch_llama.py" \
        --model "$model" --mode "$mode" --seq "$seq" --batch "$batch" \
        --sdpa "$sdpa" ${torchao:+--torchao-path "$torchao"} \
        --warmup "$warmup" --steps "$steps" --out "$results/$name.json" \
        > "$results/$name.log" 2>&1
      rc=$?
      if [ $rc -ne 0 ] && [ ! -s "$results/$name.json" ]; then
        printf '{"model": "%s", "mode": "%s", "seq": %s, "error": "exit %s, see %s.log"}\n' \
          "$model" "$mode" "$seq" "$rc" "$name" > "$results/$name.json"
      fi
      tail -n 3 "$results/$name.log"
    fi
    if [ -n "$octet_run" ] && [ -n "$bundles" ] && \
       [ -f "$bundles/$model-$mode.octet" ]; then
      oname="octet-$mode-$model-s$seq"
      echo "== $oname"
      timeout "$per_case_timeout" "$octet_run" "$bundles/$model-$mode.octet" \
        --bench --steps "$steps" --warmup "$warmup" \
        --json "$results/$oname.json" > "$results/$oname.log" 2>&1
      tail -n 3 "$results/$oname.log"
    fi
  done
done

python3 - "$results" <<'PY'
import glob, json, os, sys
d = sys.argv[1]
runs = {}
for f in sorted(glob.glob(os.path.join(d, "*.json"))):
    name = os.path.basename(f)[:-5]
    if name.startswith(("torch-", "octet-")):
        runs[name] = json.load(open(f))
# One FLOP count per case for every row: the peer's 6*N_matmul + 6*L*H*Dh*S
# (bench/peers/torch_llama.py), so TFLOP/s and MFU compare like for like.
BF16_PEAK, FP8_PEAK = 989.4, 1978.9
rows = []
for name, r in runs.items():
    case = name.split("-", 2)[2]
    flops = next((p.get("flops_per_token") for n, p in runs.items()
                  if n.startswith("torch-") and n.endswith(case)
                  and p.get("flops_per_token")), r.get("flops_per_token"))
    tps = r.get("tokens_per_s")
    tflops = tps * flops / 1e12 if tps and flops else None
    rows.append(dict(case=name, tokens_per_s=tps, flops_per_token=flops,
                     model_tflops=tflops,
                     mfu_bf16_peak=tflops / BF16_PEAK if tflops else None,
                     mfu_fp8_peak=tflops / FP8_PEAK if tflops else None,
                     peak_mem_gib=r.get("peak_mem_allocated_gib"),
                     sdpa_kernels=r.get("sdpa_kernels"),
                     device=r.get("device"), error=r.get("error")))
ratios = {}
best_peer = {}
for name, r in runs.items():
    if not name.startswith("torch-") or not r.get("tokens_per_s"):
        continue
    mode, case = name.split("-", 2)[1:]
    kind = "bf16" if mode == "bf16" else "fp8"
    held = best_peer.get((kind, case))
    if not held or runs[held]["tokens_per_s"] < r["tokens_per_s"]:
        best_peer[(kind, case)] = name
for name, r in runs.items():
    if not name.startswith("octet-") or not r.get("tokens_per_s"):
        continue
    mode, rest = name.split("-", 2)[1:]
    peers = ["torch-bf16-" + rest, "torch-fp8-" + rest]
    if mode in ("fp8current", "fp8blockwise"):
        peers.append("octet-fp8-" + rest)  # against delayed scaling
    for peer in peers:
        p = runs.get(peer)
        if p and p.get("tokens_per_s"):
            ratios[name + " / " + peer] = r["tokens_per_s"] / p["tokens_per_s"]
    best = best_peer.get(("bf16" if mode == "bf16" else "fp8", rest))
    if best:
        ratios[name + " / best PyTorch row (" + best + ")"] = (
            r["tokens_per_s"] / runs[best]["tokens_per_s"])
summary = dict(flop_formula="6*N_matmul + 6*L*H*Dh*S (causal attention), "
                            "the peer's count for every row of a case",
               peaks_tflops=dict(bf16=BF16_PEAK, fp8=FP8_PEAK),
               commands=["bash bench/compile_bundles.sh  (build machine: "
                         "bench/specs/*.pbtxt -> carry/bench/*.octet)",
                         "bash bench/run_bench.sh --only MODEL --octet-run "
                         "carry/bin/octet-run --bundles carry/bench  (GPU "
                         "host, one call per model: each octet case beside "
                         "its peers)"],
               rows=rows, ratios=ratios)
json.dump(summary, open(os.path.join(d, "summary.json"), "w"), indent=1)
print("%-34s %10s %8s %6s %6s %8s" % ("case", "tok/s", "TFLOP/s", "MFU16", "MFU8", "mem GiB"))
for r in rows:
    if r["error"] or not r["tokens_per_s"]:
        print("%-34s %s" % (r["case"], (r["error"] or "no tokens_per_s")[:80]))
        continue
    print("%-34s %10.0f %8.1f %6.3f %6.3f %8.1f" % (
        r["case"], r["tokens_per_s"], r["model_tflops"] or 0,
        r["mfu_bf16_peak"] or 0, r["mfu_fp8_peak"] or 0, r["peak_mem_gib"] or 0))
for k, v in ratios.items():
    print("%s: %.3f" % (k, v))
PY
if [ -n "${OUT:-}" ]; then
  tar czf "$OUT/bench-results.tgz" -C "$results" .
  cp "$results/summary.json" "$OUT/" 2>/dev/null
fi

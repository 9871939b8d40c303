#!/usr/bin/env bash
# The attention bench on the GPU host, in one call: octet's generated
# attention kernels, the mma.sync forward and the Hopper forward
# (bench/attention_bench.mlir: 32 query heads, 8 kv heads, head dim 128,
# causal, BF16, at sequence 8192 and 4096 and 8192 tokens packed as 8
# documents; and Llama 3.2 1B's head dim 64 at sequence 8192), beside PyTorch's cuDNN and flash SDPA backends (flash's
# variable-length kernel for the documents), the backend named by the
# kernels torch.profiler saw. Writes bench/results/attention.json (and a copy
# to $OUT where set).
#
#   bash bench/attention_bench.sh TEST_BINARY KERNEL_DIR HOPPER_KERNEL_DIR [ITERATIONS [HOPPER_BWD_KERNEL_DIR]]
#
# TEST_BINARY is octet-gpu-attention-tests, the kernel folders
# attention-bench-kernels, attention-bench-hopper-kernels and (the Hopper
# backward too: hopper-backward=1) attention-bench-hopper-bwd-kernels next
# to it in the build tree (tests/gpu/codegen/attention.cmake). With the
# last, the cases' ratios to the peers are those of the Hopper backward.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
binary="$1"
kernels="$2"
hopper="$3"
iterations="${4:-20}"
hopper_bwd="${5:-}"
# The parts land in $OUT where set, so that a call cut short keeps them.
work="${OUT:-$(mktemp -d)}"
"$binary" --bench "$kernels" "$iterations" > "$work/octet.json"
"$binary" --bench "$hopper" "$iterations" > "$work/hopper.json"
if [ -n "$hopper_bwd" ]; then
  "$binary" --bench "$hopper_bwd" "$iterations" > "$work/hopper_bwd.json"
fi
python3 "$here/attention_torch.py" --cases 8192:0,4096:0,8192:8 --iterations "$iterations" > "$work/peers.json"
python3 "$here/attention_torch.py" --cases 8192:0 --head-dim 64 --iterations "$iterations" > "$work/peers-d64.json"
gpu="$(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader)"
mkdir -p "$here/results"
python3 - "$here/results/attention.json" "$gpu" "$work" "$*" <<'PY'
import json, sys
out, gpu, work, args = sys.argv[1:]
load = lambda name: json.load(open(f"{work}/{name}.json"))
octet, hopper = load("octet"), load("hopper")
labels = [("mma_sync", octet), ("hopper", hopper)]
try:
    labels.append(("hopper_bwd", load("hopper_bwd")))
except FileNotFoundError:
    pass
peers = load("peers") + load("peers-d64")
cases = []
for seq, docs, dh in ((8192, 0, 128), (4096, 0, 128), (8192, 8, 128), (8192, 0, 64)):
    def pick(rows, op):
        return next(r for r in rows if r["op"] == op and r["seq"] == seq and r["documents"] == docs
                    and r["head_dim"] == dh)
    mine = [p for p in peers if p.get("seq", seq) == seq and p.get("documents", docs) == docs
            and p.get("head_dim", dh) == dh]
    case = {"seq": seq, "documents": docs, "head_dim": dh, "octet": {}, "peers": mine}
    for label, rows in labels:
        f, b = pick(rows, "attention_fwd"), pick(rows, "attention_bwd")
        case["octet"][label] = {"fwd_kernel": f["kernel"], "fwd_ms": f["ms"], "fwd_tflops": f["tflops"],
                                "bwd_kernel": b["kernel"], "bwd_ms": b["ms"], "bwd_tflops": b["tflops"]}
    best = case["octet"]["hopper"]
    bwd = case["octet"].get("hopper_bwd", best)
    for p in mine:
        if "fwd_tflops" in p:
            case[f"fwd_vs_{p['backend']}"] = round(best["fwd_tflops"] / p["fwd_tflops"], 3)
            case[f"bwd_vs_{p['backend']}"] = round(bwd["bwd_tflops"] / p["bwd_tflops"], 3)
    cases.append(case)
result = {
    "command": "bash bench/attention_bench.sh " + args,
    "gpu": gpu,
    "shape": {"batch": 1, "q_heads": 32, "kv_heads": 8, "head_dim": "per case", "causal": True, "dtype": "bf16"},
    "flops": "forward 4*Hq*Dh*sum(L^2)/2 over causal documents of length L (L = seq without documents), backward 2.5x forward",
    "octet_note": "mma_sync: the mma.sync kernels (hopper-forward=0); hopper: octet-attention-to-gpu hopper-forward=1 (the mma.sync backward); hopper_bwd, where measured: hopper-forward=1 hopper-backward=1 (the bwd_vs_ ratios are its)",
    "cases": cases,
}
open(out, "w").write(json.dumps(result, indent=2) + "\n")
print(json.dumps(result, indent=2))
PY
if [ -n "${OUT:-}" ]; then cp "$here/results/attention.json" "$OUT/"; fi

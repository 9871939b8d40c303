#!/usr/bin/env bash
# The attention bench on the GPU host, in one go: octet's generated
# flash-attention kernels (bench/attention_bench.mlir: batch 1, sequence
# 8192, 32 query heads, 8 kv heads, head dim 128, causal) and the peer,
# torch.nn.functional.scaled_dot_product_attention on its flash backend,
# measured in the same call. Writes bench/results/attention.json (and a copy
# to $OUT where set).
#
#   bash bench/attention_bench.sh TEST_BINARY BENCH_KERNEL_DIR [ITERATIONS]
#
# TEST_BINARY is octet-gpu-attention-tests, BENCH_KERNEL_DIR the
# attention-bench-kernels folder next to it in the build tree.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
binary="$1"
kernels="$2"
iterations="${3:-20}"
octet_json="$("$binary" --bench "$kernels" "$iterations")"
peer_json="$(python3 "$here/attention_torch.py" --iterations "$iterations")"
gpu="$(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader)"
mkdir -p "$here/results"
python3 - "$here/results/attention.json" "$gpu" "$iterations" "$*" <<PY
import json, sys
octet = json.loads('''$octet_json''')
peer = json.loads('''$peer_json''')
fwd = next(o for o in octet if o["op"] == "attention_fwd")
bwd = next(o for o in octet if o["op"] == "attention_bwd")
result = {
    "command": "bash bench/attention_bench.sh " + sys.argv[4],
    "gpu": sys.argv[2],
    "shape": {"batch": 1, "seq": 8192, "q_heads": 32, "kv_heads": 8, "head_dim": 128, "causal": True},
    "flops": "forward 4*B*Hq*S^2*Dh/2, backward 2.5x forward",
    "octet": {"fwd_ms": fwd["ms"], "fwd_tflops": fwd["tflops"],
              "bwd_ms": bwd["ms"], "bwd_tflops": bwd["tflops"]},
    "peer": peer,
    "peer_note": "the flash kernel takes no GQA: k, v are expanded to 32 heads first; the forward figure subtracts the expansion, the backward includes the expansion's gradient (a sum over each group)",
    "fwd_vs_peer": round(fwd["tflops"] / peer["fwd_tflops"], 3),
    "bwd_vs_peer": round(bwd["tflops"] / peer["bwd_tflops"], 3),
}
open(sys.argv[1], "w").write(json.dumps(result, indent=2) + "\n")
print(json.dumps(result, indent=2))
PY
if [ -n "${OUT:-}" ]; then cp "$here/results/attention.json" "$OUT/"; fi

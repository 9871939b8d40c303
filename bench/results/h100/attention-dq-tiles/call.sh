#!/usr/bin/env bash
# Calls 2, 5 and 6: bash call.sh BASE_DIR NEW_DIR...: each NEW folder's
# kernel tests (Hopper backward and mma.sync, with the interpreter's
# golden), then the bench of BASE and NEW alternating, twice. Folders from
# `bash bench/attention_bwd_gpu.sh --prepare build DIR` at each commit.
# NCU=1 (call 2) adds ncu of the last NEW folder's seq-8192 backward;
# PEERS=1 (call 6) adds bench/attention_torch.py's SDPA backends.
out="${OUT:-/tmp/out}"; mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$out/gpu.txt"
(nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 500 > "$out/clocks.csv" &)
base="$1"; shift
{
for d in "$@"; do
  for k in attention-hopper-bwd-kernels attention-kernels; do
  timeout 120 $d/octet-gpu-attention-tests $d/$k --golden $d/attention-golden > /tmp/t.log 2>&1; echo "test $d $k rc=$?"; grep -E "failed|worst|PASS|FAIL" /tmp/t.log | tail -12
  done
done
for rep in 1 2; do
  for d in "$base" "$@"; do
    timeout 120 $d/octet-gpu-attention-tests --bench $d/attention-bench-hopper-bwd-kernels 20 2>/dev/null > /tmp/b.json
    python3 -c "
import json,sys; r=json.load(open('/tmp/b.json'))
print('$d', $rep, ' '.join(f\"{x['op'][10:]}{x['seq']}/{x['documents']}:{x['tflops']}\" for x in r))"
  done
done
if [ -n "${PEERS:-}" ]; then
  timeout 200 python3 bench/attention_torch.py --cases 8192:0,4096:0,8192:8 --iterations 20 > "$out/peers.json"
fi
} 2>&1 | tee "$out/log.txt"
last="${!#}"
if [ -n "${NCU:-}" ]; then
  (cd "$last" && timeout 300 /usr/local/cuda/bin/ncu --clock-control none --kernel-name regex:'attention_bwd_.*_hopper' --launch-count 1 --set full --import-source no -o "$out/bwd" ./octet-gpu-attention-tests --bench attention-bench-hopper-bwd-kernels 1 > "$out/ncu.log" 2>&1)
  /usr/local/cuda/bin/ncu -i "$out/bwd.ncu-rep" --page details > "$out/details.txt" 2>&1
fi
pkill -f "nvidia-smi --query" || true

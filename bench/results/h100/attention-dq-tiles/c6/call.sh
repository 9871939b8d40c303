#!/usr/bin/env bash
# bash call.sh BASE_DIR NEW_DIR...: each NEW folder's kernel tests (Hopper
# backward and mma.sync, with the interpreter's golden), then the bench of
# BASE and NEW alternating, twice. Folders from
# `bash bench/attention_bwd_gpu.sh --prepare build DIR` at each commit.
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
} 2>&1 | tee "$out/log.txt"
pkill -f "nvidia-smi --query" || true

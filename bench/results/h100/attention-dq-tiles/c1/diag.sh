#!/usr/bin/env bash
# Diagnostic: the Hopper attention backward at seq 8192 under ncu.
set -x
cd "$(dirname "$0")"
out="${OUT:-/tmp/out}"; mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$out/gpu.txt"
(nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 500 > "$out/clocks.csv" &) 
timeout 120 ./octet-gpu-attention-tests --bench attention-bench-hopper-bwd-kernels 20 > "$out/bench-base.json" 2> "$out/bench-base.err"
cat "$out/bench-base.json"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU"
timeout 300 "$NCU" --clock-control none --kernel-name regex:'attention_bwd_.*_hopper' --launch-count 1 --set full --import-source no -o "$out/bwd" ./octet-gpu-attention-tests --bench attention-bench-hopper-bwd-kernels 1 > "$out/ncu.log" 2>&1
tail -5 "$out/ncu.log"
"$NCU" -i "$out/bwd.ncu-rep" --page details > "$out/details.txt" 2>&1
"$NCU" -i "$out/bwd.ncu-rep" --page source --csv --print-source sass > "$out/sass.csv" 2>&1
ls -la "$out"; wc -c "$out/sass.csv"
gzip -f "$out/sass.csv"
rm -f "$out/bwd.ncu-rep.gz"; gzip -k "$out/bwd.ncu-rep" && rm "$out/bwd.ncu-rep"
pkill -f "nvidia-smi --query" || true

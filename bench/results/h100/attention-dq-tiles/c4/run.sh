#!/usr/bin/env bash
# Ablations of the writer-warp kernel (before the tiled dQ) at seq 8192 (kernel folders built with a
# local, uncommitted OCTET_ABL switch in buildHopperBackward: q no dQ GEMM,
# k no dK GEMM, v no dV GEMM, e stage freed at the step's start, x no
cd "$(dirname "$0")"
out="${OUT:-/tmp/out}"; mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$out/gpu.txt"
(nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv -lms 500 > "$out/clocks.csv" &)
for v in none e x m qk qkv xe none  # m: exp2 without the mask; do
  r=$(timeout 40 ./octet-gpu-attention-tests --bench $v 20 2>/dev/null | python3 -c "
import json,sys; r=json.load(sys.stdin)
print(' '.join(f\"{x['seq']}/{x['documents']}:{x['tflops']}\" for x in r if x['op']=='attention_bwd'))")
  echo "$v $r ($SECONDS s)" | tee -a "$out/abl.txt"
done
# (the SASS page is reduced to address, samples, top two stall reasons, source)
pkill -f "nvidia-smi --query" || true

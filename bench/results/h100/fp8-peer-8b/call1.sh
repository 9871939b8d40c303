#!/bin/bash
# The 8-layer Llama 3 8B FP8 bench case on one H100: octet FP8 (f32 and
# BF16 weight gradients) beside PyTorch's two best FP8 rows of earlier
# calls (torch.compile with _scaled_mm tensorwise, torchao.float8
# tensorwise), with run_bench.sh's settings (10 timed steps after 3
# warmup, each case under a 150 s timeout; octet-run times the GEMM
# candidates at load). BF16 rows and torchao rowwise are left out to fit
# one call.
set -u
C=carry/b14; O=$OUT/p1; mkdir -p $O
W=carry/wheels/torchao-0.18.0-cp310-abi3-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl
export PYTHONUNBUFFERED=1 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,power.limit --format=csv > $O/gpu.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader -l 1 > $O/clocks.csv &
CL=$!
for v in fp8 fp8-bf16grad; do
  echo "== octet $v ($SECONDS s)"
  timeout 150 $C/bin/octet-run $C/llama3-8b-8l-$v.octet --bench --steps 10 --warmup 3 --json $O/octet-$v-llama3-8b-8l-s8192.json > $O/octet-$v.log 2>&1; tail -1 $O/octet-$v.log
done
for mode in fp8 fp8ao_tensorwise; do
  echo "== torch $mode ($SECONDS s)"
  timeout 150 python3 bench/peers/torch_llama.py --model llama3-8b-8l --mode $mode --seq 8192 --batch 1 \
    --sdpa auto --torchao-path $W --warmup 3 --steps 10 --out $O/torch-$mode-llama3-8b-8l-s8192.json > $O/torch-$mode.log 2>&1
  tail -2 $O/torch-$mode.log
done
kill $CL
python3 - $O <<'PY'
import json,glob,sys
for f in sorted(glob.glob(sys.argv[1]+'/*.json')):
    j=json.load(open(f)); print(f.split('/')[-1], j.get('tokens_per_s'), j.get('peak_mem_gib', j.get('peak_mem_allocated_gib')), j.get('sdpa_kernels', '')[:2] if isinstance(j.get('sdpa_kernels'), list) else '', j.get('error'))
PY
cd $OUT && tar czf p1.tgz p1 && rm -rf p1

#!/bin/bash
# One H100: Llama 3.2 1B (sequence 4096, micro-batch 2) in FP8 and BF16,
# and the 8-layer Llama 3 8B in BF16, octet beside every PyTorch row of the
# bench (torch.compile BF16 and FP8 via _scaled_mm, torchao.float8
# tensorwise and rowwise), with run_bench.sh's settings: 10 timed steps
# after 3 warmup, each case under a 150 s timeout, octet-run timing the
# GEMM candidates at load.
set -u
C=carry/b15; O=$OUT/p1; mkdir -p $O
W=carry/wheels/torchao-0.18.0-cp310-abi3-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl
export PYTHONUNBUFFERED=1 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,power.limit --format=csv > $O/gpu.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader -l 1 > $O/clocks.csv &
CL=$!
octet() { # MODEL-VARIANT SEQ
  echo "== octet $1 ($SECONDS s)"
  timeout 150 $C/bin/octet-run $C/$1.octet --bench --steps 10 --warmup 3 --json $O/octet-$1-s$2.json > $O/octet-$1.log 2>&1; tail -1 $O/octet-$1.log
}
torch() { # MODEL MODE SEQ BATCH
  echo "== torch $1 $2 ($SECONDS s)"
  timeout 150 python3 bench/peers/torch_llama.py --model $1 --mode $2 --seq $3 --batch $4 \
    --sdpa auto --torchao-path $W --warmup 3 --steps 10 --out $O/torch-$2-$1-s$3.json > $O/torch-$2-$1.log 2>&1
  tail -1 $O/torch-$2-$1.log
}
for v in fp8 fp8-bf16grad bf16; do octet llama3.2-1b-$v 4096; done
for mode in fp8 fp8ao_tensorwise fp8ao_rowwise bf16; do torch llama3.2-1b $mode 4096 2; done
octet llama3-8b-8l-bf16 8192
torch llama3-8b-8l bf16 8192 1
kill $CL
python3 - $O <<'PY'
import json,glob,sys
for f in sorted(glob.glob(sys.argv[1]+'/*.json')):
    j=json.load(open(f)); print(f.split('/')[-1], j.get('tokens_per_s'), j.get('peak_mem_gib', j.get('peak_mem_allocated_gib')), (j.get('sdpa_kernels') or [''])[:1], j.get('error'))
PY


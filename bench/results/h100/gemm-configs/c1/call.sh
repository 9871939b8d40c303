#!/bin/bash
# One H100, one call: does the cuBLASLt algorithm choice cost the 8-layer
# Llama 3 8B BF16 step? The same bundle with the heuristic's first answer,
# with up to 8 heuristic candidates timed at load (the default), and with
# up to 32 candidates (other tiles, stages, swizzles, clusters), each from
# an empty algorithm cache, beside torch.compile BF16; then octet-profile
# of the step under each choice, to compare GEMM shape by shape.
set -u
C=carry/e1
O=$OUT/r; mkdir -p $O
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv > $O/gpu.txt
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw --format=csv,noheader -l 1 > $O/clocks.csv &
CL=$!
t() { echo "=== $1 ($SECONDS s)"; }
octet() { # NAME ARGS...
  n=$1; shift
  timeout 150 $C/octet-run $C/l8b-bf16.octet --bench --warmup 3 --steps 12 --json $O/$n.json "$@" > $O/$n.log 2>&1
  grep -E "cuBLASLt" $O/$n.log | head -2; tail -1 $O/$n.log
}
{
t "octet heuristic"; octet octet-heuristic --gemm-heuristic --gemm-cache $O/none.gemms
t "octet timed 8"; octet octet-timed8 --gemm-cache $O/timed8.gemms
t "octet timed 32"; octet octet-timed32 --gemm-configs 32 --gemm-cache $O/timed32.gemms
t "torch bf16"; timeout 150 python3 bench/peers/torch_llama.py --model llama3-8b-8l --seq 8192 --batch 1 --mode bf16 --warmup 3 --steps 12 --out $O/torch-bf16.json > $O/torch-bf16.log 2>&1
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(round(r['tokens_per_s']), 'tok/s, peak', round(r['peak_mem_allocated_gib'], 2), 'GiB')" $O/torch-bf16.json
t "octet timed 8 again"; octet octet-timed8-2 --gemm-cache $O/timed8.gemms
t "octet timed 32 again"; octet octet-timed32-2 --gemm-cache $O/timed32.gemms
for v in timed8 timed32; do
  t "profile $v"; OCTET_GEMM_CACHE=$O/$v.gemms timeout 80 $C/octet-profile $C/l8b-bf16.octet --top 40 > $O/profile-$v.txt 2>&1; grep -E "gemm bf16|train_microbatch:|optimizer_step:" $O/profile-$v.txt | head -6
done
t done
} 2>&1 | tee $O/summary.log
kill $CL
cd $OUT && tar czf r.tgz r && cp r/summary.log . && rm -rf r

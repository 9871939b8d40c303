#!/bin/bash
# One step's per-rank timeline (octet-run --timeline) of Llama 3.2 1B and
# the 8-layer 8B at data 2 with ZeRO-1 (registered arenas, the default),
# and the 1B on one GPU; then the 1B at data 2 with plain and registered
# arenas twice each, alternating (FP8, BF16 weight gradients).
set -u
export NCCL_NVLS_ENABLE=0
C=carry/n15; O=$OUT/c2; mkdir -p $O
. bench/launch2.sh; export LAUNCH2_TIMEOUT=150
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv > $O/gpu.txt
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw --format=csv,noheader -l 1 > $O/clocks.csv &
CL=$!
R=$C/bin/octet-run
echo "=== the timeline's GPU test ($SECONDS s)"
(cd $C/gpu-runtime && ./octet-gpu-runtime-tests --gtest_filter='Runtime.*Timeline*') > $O/gpu-test.log 2>&1; tail -2 $O/gpu-test.log
m=llama3.2-1b-fp8-bf16grad; d=llama3.2-1b-fp8-dp2-zero1-bf16grad
echo "=== $m one GPU, timeline ($SECONDS s)"
timeout 150 $R $C/one/$m.octet --gemm-heuristic --bench --warmup 3 --steps 5 --timeline $O/$m-one.trace.json > $O/$m-one-tl.log 2>&1; tail -1 $O/$m-one-tl.log
echo "=== $m data 2, timeline ($SECONDS s)"
launch2 $O/$m-dp2-tl.log $C/dp/$d.octet --gemm-heuristic --bench --warmup 3 --steps 5 --timeline $O/$m-dp2.trace.json; tail -1 $O/$m-dp2-tl.log
for i in 1 2; do
  for v in none registered; do
    echo "=== $m data 2, $v, run $i ($SECONDS s)"
    launch2 $O/$m-dp2-$v-$i.log $C/dp/$d.octet --gemm-heuristic --bench --warmup 3 --steps 12 --json $O/$m-dp2-$v-$i.json --nccl-buffers $v
    tail -1 $O/$m-dp2-$v-$i.log
  done
done
m=llama3-8b-8l-fp8-bf16grad; d=llama3-8b-8l-fp8-dp2-zero1-bf16grad
echo "=== $m data 2, timeline ($SECONDS s)"
launch2 $O/$m-dp2-tl.log $C/dp/$d.octet --gemm-heuristic --bench --warmup 3 --steps 5 --timeline $O/$m-dp2.trace.json; tail -1 $O/$m-dp2-tl.log
python3 - $O <<'PY'
import json,glob,sys
for f in sorted(glob.glob(sys.argv[1]+'/llama*-dp2-*.json')):
    j=json.load(open(f)); print(f.split('/')[-1], j.get('nccl_buffers'), round(j['tokens_per_s_per_gpu']), round(j['step_s_median']*1e3,1), [(p['program'], round(p['median_ms'],2)) for p in j['programs']])
PY
kill $CL
cd $OUT && tar czf c2.tgz c2 && rm -rf c2

#!/bin/bash
# The delayed recipe's amax all-reduce issued on the communication stream
# as soon as its amaxes are made (ahead of the tied embedding's and layer
# 0's buckets), the scale updates still at the program's end: Llama 3.2 1B
# at data 2 with ZeRO-1 (FP8, BF16 weight gradients), bundles before and
# after alternating, beside one GPU; the after bundle's timeline; tiny-llama
# FP8 at data 2 prints the lines of call 1's registered run.
set -u
export NCCL_NVLS_ENABLE=0
C=carry/n16; O=$OUT/c3; mkdir -p $O
. bench/launch2.sh; export LAUNCH2_TIMEOUT=150
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv > $O/gpu.txt
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw --format=csv,noheader -l 1 > $O/clocks.csv &
CL=$!
R=$C/octet-run
echo "=== tiny-fp8 data 2 ZeRO-1, 20 steps ($SECONDS s)"
launch2 $O/tiny-fp8.log $C/dp/tiny-fp8-dp2-zero1.octet --text data/corpus.txt --steps 20
grep -E "^step +[0-9]+/" $O/tiny-fp8.log | awk '{print $1, $2, $4, $6, $8}' > $O/tiny-fp8.steps
cmp $O/tiny-fp8.steps bench/results/h100/nccl-buffers/call1/tiny-fp8-registered-default.steps && echo "the same 20 step lines as call 1"
m=llama3.2-1b-fp8-bf16grad; d=llama3.2-1b-fp8-dp2-zero1-bf16grad
echo "=== $m one GPU ($SECONDS s)"
timeout 150 $R $C/one/$m.octet --gemm-heuristic --bench --warmup 3 --steps 12 --json $O/$m-one.json > $O/$m-one.log 2>&1; tail -1 $O/$m-one.log
for i in 1 2; do
  for v in old dp; do
    echo "=== $m data 2, $v, run $i ($SECONDS s)"
    launch2 $O/$m-dp2-$v-$i.log $C/$v/$d.octet --gemm-heuristic --bench --warmup 3 --steps 12 --json $O/$m-dp2-$v-$i.json
    tail -1 $O/$m-dp2-$v-$i.log
  done
done
echo "=== $m data 2, timeline ($SECONDS s)"
launch2 $O/$m-dp2-tl.log $C/dp/$d.octet --gemm-heuristic --bench --warmup 3 --steps 5 --timeline $O/$m-dp2.trace.json; grep -A3 "^timeline" $O/$m-dp2-tl.log
python3 - $O <<'PY'
import json,glob,sys
for f in sorted(glob.glob(sys.argv[1]+'/llama*.json')):
    j=json.load(open(f)); print(f.split('/')[-1], round(j['tokens_per_s_per_gpu']), round(j['step_s_median']*1e3,1), [(p['program'], round(p['median_ms'],2)) for p in j['programs']])
PY
kill $CL
cd $OUT && tar czf c3.tgz c3 && rm -rf c3

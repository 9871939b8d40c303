#!/bin/bash
# How the data group's NCCL calls use the plan's arenas (octet-run
# --nccl-buffers, --nccl-cta-policy): one GPU, then data 2 with ZeRO-1 and
# BF16 weight gradients with the arenas plain (cuMemAlloc), registered
# (ncclCommRegister), symmetric (an NCCL window), and symmetric with the
# zero-CTA policy (copy-engine all-gathers), each model in this call.
# First: tiny-llama FP8 and BF16 at data 2 print the same 20 steps with
# every variant.
set -u
export NCCL_NVLS_ENABLE=0
C=carry/n14; O=$OUT/c1; mkdir -p $O
. bench/launch2.sh; export LAUNCH2_TIMEOUT=150
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv > $O/gpu.txt
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw --format=csv,noheader -l 1 > $O/clocks.csv &
CL=$!
R=$C/bin/octet-run; bad=0
variants="none:default registered:default symmetric:default symmetric:zero"
for m in tiny-fp8 tiny-bf16; do
  for v in $variants; do
    b=${v%%:*}; p=${v##*:}
    echo "=== $m $b $p ($SECONDS s)"
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,REG,TUNING launch2 $O/$m-$b-$p.log $C/dp/$m-dp2-zero1.octet --text data/corpus.txt --steps 20 \
      --nccl-buffers $b --nccl-cta-policy $p || bad=1
    # loss, grad norm and lr of each step (tokens/s and the rest differ).
    grep -E "^step +[0-9]+/" $O/$m-$b-$p.log | awk '{print $1, $2, $4, $6, $8}' > $O/$m-$b-$p.steps
    n=$(wc -l < $O/$m-$b-$p.steps)
    cmp -s $O/$m-none-default.steps $O/$m-$b-$p.steps && echo "the same $n step lines as none" || { echo "DIFFERENT step lines ($n)"; bad=1; diff $O/$m-none-default.steps $O/$m-$b-$p.steps | head -6; }
  done
done
echo "correctness bad=$bad ($SECONDS s)"
for m in llama3.2-1b-fp8-bf16grad llama3-8b-8l-fp8-bf16grad; do
  echo "=== $m one ($SECONDS s)"
  timeout 150 $R $C/one/$m.octet --gemm-heuristic --bench --warmup 3 --steps 12 --json $O/$m-one.json > $O/$m-one.log 2>&1; tail -1 $O/$m-one.log
  d=$(echo $m | sed 's/-bf16grad/-dp2-zero1-bf16grad/')
  for v in $variants; do
    b=${v%%:*}; p=${v##*:}
    echo "=== $m dp2 $b $p ($SECONDS s)"
    launch2 $O/$m-dp2-$b-$p.log $C/dp/$d.octet --gemm-heuristic --bench --warmup 3 --steps 12 --json $O/$m-dp2-$b-$p.json \
      --nccl-buffers $b --nccl-cta-policy $p
    tail -1 $O/$m-dp2-$b-$p.log
  done
done
python3 - $O <<'PY'
import json,glob,sys
for f in sorted(glob.glob(sys.argv[1]+'/llama*.json')):
    j=json.load(open(f)); print(f.split('/')[-1], round(j['tokens_per_s_per_gpu']), round(j['step_s_median']*1e3,1), [(p['program'], round(p['median_ms'],2), round(p['median_join_wait_ms'],2)) for p in j['programs']])
PY
kill $CL
cd $OUT && tar czf c1.tgz c1 && rm -rf c1

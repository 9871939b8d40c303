#!/bin/bash
# The embedding's and LM head's BF16 caches gathered instead of their f32
# masters (bf16-caches), and BF16 weight gradients (train.precision.grad_dtype
# "bf16", reduce-scattered in BF16): correctness first (tiny-llama FP8 at
# data 2 with ZeRO-1 against one GPU, a checkpoint moved between data 2 and
# one GPU, the GPU goldens of the BF16-gradient specs), then tokens/s per
# GPU of data 2 against one GPU, each model in this call, with f32 and with
# BF16 weight gradients.
set -u
export NCCL_NVLS_ENABLE=0
C=carry/n13; O=$OUT/c2; mkdir -p $O
. bench/launch2.sh; export LAUNCH2_TIMEOUT=150
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv > $O/gpu.txt
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw --format=csv,noheader -l 1 > $O/clocks.csv &
CL=$!
R=$C/bin/octet-run; D=$C/z1; W=$(mktemp -d); bad=0
. bench/zero1_common.sh
echo "=== tiny-fp8 step 1, every tensor ($SECONDS s)"
"$R" $D/tiny-fp8-dp1.octet --text data/corpus.txt --steps 1 --checkpoint-dir $W/one > $O/s1-one.log 2>&1 || bad=1
launch2 $W/s1-zero1.log $D/tiny-fp8-dp2-zero1.octet --text data/corpus.txt --steps 1 --checkpoint-dir $W/zero1 || bad=1
cp $W/s1-zero1.log $O/
python3 bench/dp_equivalence.py --numerics fp8 --name "tiny-fp8 dp2-zero1" --one $O/s1-one.log $W/one/step-1 \
  --data2 $W/s1-zero1.log $W/zero1/step-1 --out $O/tiny-fp8-zero1-step1.json || bad=1
LOSS_TOL=2e-3; NORM_TOL=2e-2
zero1_against_one tiny-fp8 > $O/tiny-fp8-check.log 2>&1 || bad=1; tail -4 $O/tiny-fp8-check.log
echo "=== checkpoint moved: ZeRO-1 to 10, one GPU to 15, ZeRO-1 to 20 ($SECONDS s)"
m=tiny-fp8; c=$W/moved-ckpt
launch2 $W/moved-a.log $D/$m-dp2-zero1.octet --text data/corpus.txt --steps 10 --checkpoint-dir $c || bad=1
"$R" $D/$m-dp1.octet --text data/corpus.txt --steps 15 --checkpoint-dir $c --resume > $W/moved-b.log 2>&1 || { tail -3 $W/moved-b.log; bad=1; }
launch2 $W/moved-c.log $D/$m-dp2-zero1.octet --text data/corpus.txt --steps 20 --checkpoint-dir $c --resume || bad=1
grep -hE "^step +(1[1-9]|20)/" $W/moved-b.log $W/moved-c.log > $O/moved.log
grep -hE "^step +(1[1-9]|20)/" $W/$m-zero1.log > $W/straight.log
n=$(wc -l < $O/moved.log); [ "$n" = 10 ] || { echo "FAIL: $n resumed steps, not 10"; bad=1; }
echo "-- resumed steps 11-20 against the uninterrupted ZeRO-1 run"; close $W/straight.log $O/moved.log || bad=1
for g in tiny-llama-bf16grad llama3-8b-2layer-bf16grad; do
  echo "=== golden $g ($SECONDS s)"
  timeout 120 "$R" $C/g/$g/model.octet --golden $C/g/$g > $O/golden-$g.log 2>&1 || { echo "golden $g FAILED"; bad=1; }
  tail -3 $O/golden-$g.log
done
echo "correctness bad=$bad ($SECONDS s)"
R=$C/bin/octet-run-h
for m in llama3-8b-8l-fp8 llama3.2-1b-fp8; do
  for v in "" -bf16grad; do
    echo "=== $m one$v ($SECONDS s)"
    timeout 150 $R $C/one/$m$v.octet --bench --warmup 3 --steps 12 --json $O/$m-one$v.json > $O/$m-one$v.log 2>&1; tail -1 $O/$m-one$v.log
    d=B; [ -n "$v" ] && d=C
    echo "=== $m dp2-zero1$v ($SECONDS s)"
    launch2 $O/$m-dp2$v.log $C/$d/$m-dp2-zero1.octet --bench --warmup 3 --steps 12 --json $O/$m-dp2$v.json
    tail -1 $O/$m-dp2$v.log
  done
done
python3 - $O <<'PY'
import json,glob,sys
for f in sorted(glob.glob(sys.argv[1]+'/llama*.json')):
    j=json.load(open(f)); print(f.split('/')[-1], round(j['tokens_per_s_per_gpu']), round(j['step_s_median']*1e3,1), [(p['program'], round(p['median_ms'],2), round(p['median_join_wait_ms'],2)) for p in j['programs']])
PY
kill $CL
cd $OUT && tar czf c2.tgz c2 && rm -rf c2

#!/bin/bash
# session 9 call 4 (2 GPUs): pipeline evaluation against one GPU; the 1B head whole vs chunked; data 2 ZeRO-1 with the gathered embedding rows.
O=$OUT/c4; mkdir -p $O; W=$(mktemp -d)
export NCCL_NVLS_ENABLE=0 LAUNCH2_TIMEOUT=150
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv -l 2 > $O/clocks.csv 2>&1 & smi=$!
nvidia-smi -L > $O/gpus.txt
C=carry/f9; R=$C/bin/octet-run-h; bad=0
LOSS_TOL=2e-3; NORM_TOL=2e-2
log() { echo; echo "=== $* ($(date +%T), ${SECONDS} s)"; }
. bench/launch2.sh; . bench/zero1_common.sh
log eval
E="--text data/corpus.txt --steps 20 --eval-interval 10 --eval-batches 16"
timeout 60 $R $C/e/tiny-bf16-pp1.octet $E > $O/eval-one.log 2>&1
launch2 $O/eval-pp2.log $C/e/tiny-bf16-pp2.octet $E
launch2 $O/eval-pp2v2.log $C/e/tiny-bf16-pp2-v2.octet $E
grep -H "^eval" $O/eval-*.log
log 1B head
for b in whole chunked; do CUDA_VISIBLE_DEVICES=0 timeout 100 $R $C/m/$b.octet --synthetic --bench --warmup 3 --steps 10 --json $O/1b-$b.json > $O/1b-$b.log 2>&1; tail -2 $O/1b-$b.log; done
log data 2 ZeRO-1, gathered embedding rows
timeout 120 $R $C/ge/after/llama3-8b-8l-fp8-one.octet --bench --warmup 4 --steps 20 --json $O/8b-one.json > $O/8b-one.log 2>&1; tail -1 $O/8b-one.log
launch2 $O/8b-zero1.log $C/ge/after/llama3-8b-8l-fp8-dp2-zero1.octet --bench --warmup 4 --steps 20 --json $O/8b-zero1.json; tail -1 $O/8b-zero1.log
python3 - $O/8b-one.json $O/8b-zero1.json <<'PY'
import json,sys
one=json.load(open(sys.argv[1])); two=json.load(open(sys.argv[2]))
print({k: (one.get(k), two.get(k)) for k in ('tokens_per_s','tokens_per_s_per_gpu','step_s_median','peak_device_gib')})
print('per-GPU ratio', two['tokens_per_s_per_gpu']/one['tokens_per_s_per_gpu'])
PY
D=$C/ge/after
log l8b2-fp8 ZeRO-1 against one GPU, 20 steps
"$R" $D/l8b2-fp8-dp1.octet --synthetic --steps 20 > $O/l8b2-one.log 2>&1 || tail -3 $O/l8b2-one.log
launch2 $W/l8b2-zero1.log $D/l8b2-fp8-dp2-zero1.octet --synthetic --steps 20; cp $W/l8b2-zero1.log $O/
close $O/l8b2-one.log $O/l8b2-zero1.log || echo "l8b2 ZeRO-1 FAILED"
kill $smi
cd $OUT && tar czf c4.tgz c4

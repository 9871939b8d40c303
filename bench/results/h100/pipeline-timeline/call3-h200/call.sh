#!/bin/bash
# session 9 call 3 (2 GPUs): ZB-H1 step 1 (tiny BF16, FP8 blockwise) and its bubble with the timeline.
O=$OUT/c3; mkdir -p $O
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv -l 2 > $O/clocks.csv 2>&1 & smi=$!
nvidia-smi -L > $O/gpus.txt
C=carry/z9; R=$C/bin/octet-run-h
VARIANTS=pp2-zb timeout 120 bash bench/pipeline_gpu.sh $R $C/tiny $O/tiny step1-tiny-bf16 step1-tiny-fp8blockwise steps20-tiny-bf16 > $O/tiny.log 2>&1
BUBBLE_VARIANT=pp2-zb timeout 330 bash bench/pipeline_gpu.sh $R $C/l8 $O/bubble bubble > $O/bubble.log 2>&1
kill $smi
grep -h -E "PASS|FAIL|worst|grad norm|rc rank|error|timeline|step 20" $O/*.log $O/*/*pp2-zb.log | head -40
cat $O/bubble/bubble-pp2-zb.json
cd $OUT && tar czf c3.tgz c3

#!/bin/bash
# session 9 call 2 (4 GPUs): bubble with the timeline + kill on GPUs 0,1; l8b4 step 1 on GPUs 2,3.
O=$OUT/c2; mkdir -p $O
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv -l 2 > $O/clocks.csv 2>&1 & smi=$!
C=carry/d9; R=$C/bin/octet-run-h
(
  export CUDA_VISIBLE_DEVICES=0,1
  timeout 400 bash bench/pipeline_gpu.sh $R $C/l8 $O/bubble bubble > $O/bubble.log 2>&1
  timeout 100 bash bench/pipeline_gpu.sh $R $C/tiny $O/kill kill wrong-size > $O/kill.log 2>&1
) &
a=$!
(
  export CUDA_VISIBLE_DEVICES=2,3
  VARIANTS=pp2-v2 timeout 200 bash bench/pipeline_gpu.sh $R $C/l8 $O/l8a step1-l8b4-bf16 > $O/l8a.log 2>&1
  timeout 340 bash bench/pipeline_gpu.sh $R $C/l8 $O/l8b step1-l8b4-fp8blockwise > $O/l8b.log 2>&1
) &
b=$!
wait $a $b
kill $smi
grep -h -E "PASS|FAIL|within|worst|grad norm|rc rank|error|bubble|timeline|exited" $O/*.log | head -60
cat $O/bubble/bubble.json
cd $OUT && tar czf c2.tgz c2

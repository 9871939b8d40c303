#!/bin/bash
# session 9 call 1 (4 GPUs): tiny pipeline checks + delayed experiments on GPUs 0,1;
# l8b4 step 1 on GPUs 2,3; then pipeline 2 x data 2 on all four.
O=$OUT/c1; mkdir -p $O
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv -l 5 > $O/clocks.csv 2>&1 & smi=$!
nvidia-smi -L > $O/gpus.txt
C=carry/d9; R=$C/bin/octet-run-h
(
  export CUDA_VISIBLE_DEVICES=0,1
  timeout 280 bash bench/pipeline_gpu.sh $R $C/tiny $O/tiny step1-tiny-bf16 step1-tiny-fp8blockwise step1-tiny-fp8current step1-tiny-fp8 > $O/tiny.log 2>&1
  VARIANTS=pp2 timeout 60 bash bench/pipeline_gpu.sh $R $C/tiny $O/tinym2 step1-tinym2-fp8 > $O/tinym2.log 2>&1
  VARIANTS=pp2 timeout 60 bash bench/pipeline_gpu.sh $C/bin/octet-run-ng $C/tiny $O/tinyng step1-tiny-fp8 > $O/tinyng.log 2>&1
) &
a=$!
(
  export CUDA_VISIBLE_DEVICES=2,3
  timeout 330 bash bench/pipeline_gpu.sh $R $C/l8 $O/l8 step1-l8b4-bf16 step1-l8b4-fp8blockwise > $O/l8.log 2>&1
) &
b=$!
wait $a $b
VARIANTS="pp2-dp2 pp2-v2-dp2 pp2-dp2-zero1" timeout 200 bash bench/pipeline_data_gpu.sh $R $C/pd $O/pd step1 steps20 > $O/pd.log 2>&1
kill $smi
grep -h -E "PASS|FAIL|within|worst|grad norm|rc rank|error|equal" $O/*.log | head -80
cd $OUT && tar czf c1.tgz c1

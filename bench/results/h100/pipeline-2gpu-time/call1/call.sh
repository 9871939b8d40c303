#!/bin/bash
O=$OUT/pp; mkdir -p $O
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv -l 5 > $O/clocks.csv 2>&1 & smi=$!
nvidia-smi -L > $O/gpus.txt; git rev-parse HEAD > $O/commit.txt 2>/dev/null
R=carry/c8a/bin/octet-run-h; D=carry/c8a
( timeout 200 bash bench/pipeline_gpu.sh $R $D $O/a step1-tiny-fp8 step1-tiny-fp8current kill ) > $O/call-a.log 2>&1
VARIANTS=pp2-v2 timeout 360 bash bench/pipeline_gpu.sh $R $D $O/b step1-l8b4-fp8blockwise > $O/call-b.log 2>&1
kill $smi; tail -30 $O/call-a.log; tail -30 $O/call-b.log
cd $OUT && tar czf pp.tgz pp

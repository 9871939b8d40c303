#!/bin/bash
O=$OUT/pp; mkdir -p $O
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv -l 5 > $O/clocks.csv 2>&1 & smi=$!
nvidia-smi -L > $O/gpus.txt
R=carry/c8b/bin/octet-run-h; D=carry/c8b
timeout 110 bash bench/pipeline_gpu.sh $R $D $O/a step1-tiny-fp8 steps20-tiny-fp8 step1-tiny-bf16 step1-tiny-fp8blockwise > $O/call-a.log 2>&1
timeout 300 bash bench/pipeline_gpu.sh $R $D $O/b bubble > $O/call-b.log 2>&1
timeout 175 bash bench/pipeline_gpu.sh $R $D $O/c throughput16-fp8blockwise > $O/call-c.log 2>&1
kill $smi; grep -E "PASS|FAIL|within|keeps|bubble_|per_gpu|tokens_per_s|rc rank|error" $O/call-*.log | head -60
cd $OUT && tar czf pp.tgz pp

#!/bin/bash
O=$OUT/pp; mkdir -p $O
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv -l 5 > $O/clocks.csv 2>&1 & smi=$!
PIPE_VARIANT=pp2-v2 timeout 280 bash bench/pipeline_gpu.sh carry/c8e/bin/octet-run-h carry/c8e $O throughput16-fp8blockwise-m16 > $O/call.log 2>&1
kill $smi; tail -20 $O/call.log
cd $OUT && tar czf pp.tgz pp

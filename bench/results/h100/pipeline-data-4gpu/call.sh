#!/bin/bash
O=$OUT/pd; mkdir -p $O
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv -l 5 > $O/clocks.csv 2>&1 & smi=$!
nvidia-smi -L > $O/gpus.txt
VARIANTS="pp2-dp2 pp2-v2-dp2 pp2-dp2-zero1" timeout 330 bash bench/pipeline_data_gpu.sh carry/pd/bin/octet-run carry/pd $O step1 steps20 wrong-size > $O/call.log 2>&1; echo "rc=$?" >> $O/call.log
kill $smi; grep -E "against|PASS|FAIL|rank .* failed|rc=|worst|error" $O/call.log | head -40
cd $OUT && tar czf pd.tgz pd

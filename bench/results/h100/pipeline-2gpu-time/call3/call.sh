#!/bin/bash
O=$OUT/r; mkdir -p $O; D=carry/c8c
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv -l 2 > $O/clocks.csv 2>&1 & smi=$!
nvidia-smi -L > $O/gpus.txt
timeout 150 $D/octet-profile $D/l8b4-bf16-pp1.octet --top 40 > $O/profile-l8b4-bf16-s4096.txt 2>&1
for b in l8b8-fp8 l1b-fp8; do timeout 170 $D/octet-run $D/$b.octet --synthetic --bench --warmup 3 --steps 10 --gemm-heuristic > $O/$b-bench.log 2>&1; done
kill $smi; head -30 $O/profile-l8b4-bf16-s4096.txt; grep -E "^step|peak|memory|error" $O/*-bench.log | tail -8
cd $OUT && tar czf r.tgz r

#!/bin/bash
# Call A (2 GPUs): data-parallel program times, delayed pipeline evaluation, ZB-H1 on H100s.
set -u; export NCCL_NVLS_ENABLE=0 LAUNCH2_TIMEOUT=150; O=${OUT:?}
nvidia-smi --query-gpu=index,name,clocks.sm,power.draw --format=csv -l 2 > $O/clocks.csv 2>&1 &
E=carry/ev; R=$E/bin/octet-run
. bench/launch2.sh
A="--text data/corpus.txt --steps 20 --eval-interval 10 --eval-batches 16"
timeout 90 $R $E/tiny-fp8-pp1.octet $A > $O/eval-one.log 2>&1
launch2 $O/eval-pp2.log $E/tiny-fp8-pp2.octet $A
launch2 $O/eval-pp2v2.log $E/tiny-fp8-pp2-v2.octet $A
launch2 $O/noeval-pp2.log $E/tiny-fp8-pp2.octet --text data/corpus.txt --steps 20
grep -H "^eval\|error" $O/eval-*.log | head -20
echo "train lines with and without evaluation:"; diff <(grep '^step' $O/eval-pp2.log | sed 's/  tokens.s.*//') <(grep '^step' $O/noeval-pp2.log | sed 's/  tokens.s.*//') && echo SAME
VARIANTS=pp2-zb bash bench/pipeline_gpu.sh $R $E $O/zb step1-tiny-bf16 step1-tiny-fp8blockwise > $O/zb.log 2>&1; echo "zb rc=$?"; grep -h "step-1 loss\|PASS\|FAIL" $O/zb.log
MODELS=llama3-8b-8l-fp8 PEERS=0 bash bench/data_parallel_throughput.sh carry/dpt/bin/octet-run-h carry/dpt $O/dp > $O/dp.txt 2>&1; echo "dp rc=$?"; tail -n 25 $O/dp.txt
kill %1
cd $O && tar czf all.tgz *.log *.txt clocks.csv zb dp 2>/dev/null

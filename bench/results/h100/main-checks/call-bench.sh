set -u
export NCCL_NVLS_ENABLE=0
C=carry/f2
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw,temperature.gpu,memory.used --format=csv,noheader -l 2 > $OUT/clocks.csv 2>&1 & smi=$!
echo "== the failing bundle test, verbose"
CUDA_VISIBLE_DEVICES=0 OCTET_SMOKE_BUNDLE=carry/f1/tiny-llama.octet timeout 60 carry/f1/bin/octet-gpu-bundle-tests --gtest_filter='*FirstMicrobatch*' 2>&1 | tail -25
echo "== data 2 against one GPU"
timeout 170 bash bench/data_parallel_gpu.sh $C/bin/octet-run $C/dp $OUT/dp step1-tiny-fp8 step1-tiny-bf16 curve-fp8 curve-bf16 > $OUT/dp.log 2>&1; echo "dp rc=$?"
grep -E "===|PASS|FAIL|within|bound|rc " $OUT/dp.log | tail -30
bench() { # gpu name bundle
  CUDA_VISIBLE_DEVICES=$1 timeout 150 $C/bin/octet-run $3 --bench --warmup 4 --steps 20 --json $OUT/bench/$2.json > /tmp/b-$2.log 2>&1
  echo "$2 rc=$? $(grep '^done' /tmp/b-$2.log)"
}
mkdir -p $OUT/bench
( for r in fp8 fp8current fp8blockwise; do bench 0 l8b8-$r $C/bundles/llama3-8b-8l-$r.octet; done; bench 0 l8b8-fp8-mma-sync $C/mma/llama3-8b-8l-fp8.octet ) > $OUT/bench0.log 2>&1 & a=$!
( for r in fp8 fp8current fp8blockwise; do bench 1 l1b-$r $C/bundles/llama3.2-1b-$r.octet; done ) > $OUT/bench1.log 2>&1 & b=$!
wait $a $b; kill $smi; cat $OUT/bench0.log $OUT/bench1.log

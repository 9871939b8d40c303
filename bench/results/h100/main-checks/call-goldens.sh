# Merged main on two GPUs at once: kernel and bundle tests, then the goldens
# (the Hopper forward, both scale pointers, the blockwise SwiGLU tiles).
set -u
export NCCL_NVLS_ENABLE=0 PATH=/usr/local/cuda/bin:$PATH
C=carry/f1; T0=$SECONDS
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv,noheader
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw,temperature.gpu,memory.used --format=csv,noheader -l 5 > $OUT/clocks.csv 2>&1 & smi=$!
xz -dc $C/bin/octet-static.xz > /tmp/octet && chmod +x /tmp/octet
left() { echo $((560 - (SECONDS - T0))); }
golden() { # gpu spec steps [data]
  local n=$(basename $2 .pbtxt) lim=$(left)
  [ $lim -lt 30 ] && { echo "== $n: SKIPPED, $lim s left"; return; }
  echo "== golden $n on GPU $1 (limit $lim s, $(date +%T))"
  local t=$SECONDS
  CUDA_VISIBLE_DEVICES=$1 timeout $lim bash tests/golden/golden-gpu.sh /tmp/octet $C/bin/octet-run $2 /tmp/g-$n $3 ${4:-} > /tmp/g-$n.log 2>&1
  local rc=$?
  grep -E "golden|PASS|FAIL|mismatch|out of|error" /tmp/g-$n.log | tail -12
  echo "== golden $n rc=$rc in $((SECONDS - t)) s"; rm -rf /tmp/g-$n
}
gpu0() {
  export CUDA_VISIBLE_DEVICES=0
  echo "== block-quantize kernels"; timeout 60 $C/bin/octet-gpu-codegen-tests $C/codegen/kernels-block-quantize $C/codegen/golden-block-quantize 2>&1 | tail -4; echo "rc=$?"
  echo "== attention hopper kernel"; timeout 60 $C/bin/octet-gpu-attention-tests $C/codegen/attention-hopper-kernels --golden $C/codegen/attention-golden 2>&1 | tail -4
  echo "== gpu bundle tests"; OCTET_SMOKE_BUNDLE=$C/tiny-llama.octet timeout 120 $C/bin/octet-gpu-bundle-tests 2>&1 | grep -E "^\[ *(OK|FAILED|PASSED) " | tail -12
  golden 0 tests/golden/llama3-8b-2layer.pbtxt 2
  for s in examples/tiny-llama.pbtxt tests/golden/tiny-llama-current.pbtxt tests/golden/tiny-llama-blockwise.pbtxt tests/golden/tiny-llama-bf16.pbtxt; do golden 0 $s 5 data/corpus.txt; done
}
gpu1() {
  golden 1 tests/golden/llama3-8b-2layer-blockwise.pbtxt 2
  golden 1 tests/golden/llama3-8b-2layer-current.pbtxt 2
}
gpu0 > $OUT/gpu0.log 2>&1 & p0=$!
gpu1 > $OUT/gpu1.log 2>&1 & p1=$!
wait $p0 $p1; kill $smi
cat $OUT/gpu0.log $OUT/gpu1.log

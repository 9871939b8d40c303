#!/bin/bash
# Call B (one GPU): blockwise kernels writing cuBLASLt's factors, and the
# recomputed SwiGLU K-major copy: kernel checks, goldens, tokens/s and peak.
set -u; C=carry/cb; R=$C/bin/octet-run; O=${OUT:?}
tar xJf $C/g.tar.xz -C $C
nvidia-smi --query-gpu=index,name,clocks.sm,power.draw --format=csv -l 2 > $O/clocks.csv 2>&1 &
timeout 60 $C/bin/octet-gpu-codegen-tests $C/codegen/kernels-block-quantize $C/codegen/golden-block-quantize > $O/quantize.log 2>&1; echo "quantize rc=$?"; tail -n 2 $O/quantize.log
for g in tiny-llama tiny-llama-blockwise; do timeout 90 $R $C/g/$g/model.octet --golden $C/g/$g > $O/golden-$g.log 2>&1; echo "golden $g rc=$?"; grep -E "PASS|FAIL|mismatch" $O/golden-$g.log | tail -n 2; done
for m in llama3.2-1b llama3-8b-8l; do for v in fp8-before fp8 fp8blockwise-before fp8blockwise; do
  timeout 100 $R $C/b/$m-$v.octet --synthetic --bench --warmup 3 --steps 15 --gemm-heuristic --json $O/$m-$v.json > $O/$m-$v.log 2>&1
  echo "$m-$v rc=$? $(grep -o '[0-9]* tokens/s after step 1' $O/$m-$v.log) $(grep -o 'peak device memory [0-9.]* GiB' $O/$m-$v.log)"
done; done
kill %1

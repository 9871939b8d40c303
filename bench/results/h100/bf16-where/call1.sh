#!/bin/bash
# One H100: the bundle test that failed in zero1-registered/call2 (with
# per-slot prints), tiny-llama's two-microbatch golden on the GPU, and
# where Llama 3.2 1B's step goes in BF16 and FP8: octet-profile beside
# PyTorch's top kernels of one step (bench/peers/torch_llama.py, same
# shapes), each side's tokens/s in the same call.
set -u
C=carry/s15; O=$OUT/c1; mkdir -p $O
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv > $O/gpu.txt
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw --format=csv,noheader -l 1 > $O/clocks.csv &
CL=$!
t() { echo "=== $1 ($SECONDS s)"; }
t "bundle test"
B=/work/main/build/tests/gpu/bundle; mkdir -p $B && cp $C/gpu-bundle/*.octet $B/
(cd $C/gpu-bundle && ./octet-gpu-bundle-tests --gtest_filter='*FirstMicrobatch*') > $O/gpu-bundle.log 2>&1; grep -E "DIAG loss|OK|FAILED" $O/gpu-bundle.log | head -5
t "golden accumulate2"
timeout 120 $C/bin/octet-run $C/golden/tiny-llama-accumulate2/model.octet --golden $C/golden/tiny-llama-accumulate2 > $O/golden-acc2.log 2>&1; echo "rc $?"; tail -2 $O/golden-acc2.log
for m in bf16 fp8; do
  t "octet 1B $m"
  timeout 150 $C/bin/octet-run $C/b/llama3.2-1b-$m.octet --bench --warmup 3 --steps 10 --json $O/octet-1b-$m.json > $O/octet-1b-$m.log 2>&1; tail -1 $O/octet-1b-$m.log
  t "octet-profile 1B $m"
  timeout 150 $C/bin/octet-profile $C/b/llama3.2-1b-$m.octet --top 50 > $O/profile-1b-$m.txt 2>&1; sed -n 3,16p $O/profile-1b-$m.txt
  t "torch 1B $m"
  timeout 150 python3 bench/peers/torch_llama.py --model llama3.2-1b --seq 4096 --batch 2 --mode $m --warmup 3 --steps 10 --out $O/torch-1b-$m.json > $O/torch-1b-$m.log 2>&1
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(round(r['tokens_per_s']), 'tok/s'); [print('%9.3f ms x%-4d %s' % (k['ms'], k['calls'], k['name'][:110])) for k in r['top_kernels'][:25]]" $O/torch-1b-$m.json
done
t done
kill $CL
cd $OUT && tar czf c1.tgz c1 && rm -rf c1

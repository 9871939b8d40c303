#!/bin/bash
# One H100, one call: octet-norm-in-backward (branch norm-in-backward) on
# the GPU. The runtime's stream tests (a step on the second stream, eager,
# captured, timed), the tiny-llama goldens with the groups' norms in the
# backward (captured and eager), then main's bundles (carry/nb/old) against
# the branch's (carry/nb/new), alternating, with the branch's octet-run,
# torch.compile BF16 beside the 8B.
set -u
C=carry/nb; O=$OUT/r; mkdir -p $O
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv > $O/gpu.txt
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw --format=csv,noheader -l 1 > $O/clocks.csv &
CL=$!
t() { echo "=== $1 ($SECONDS s)"; }
octet() { timeout 120 $C/bin/octet-run $2 --bench --warmup 3 --steps 12 --json $O/$1.json ${3:-} > $O/$1.log 2>&1; tail -1 $O/$1.log; }
{
t runtime; timeout 150 $C/bin/octet-gpu-runtime-tests > $O/runtime.log 2>&1; echo "rc=$?"; grep -E "PASSED|FAILED|SKIPPED" $O/runtime.log | head -8
for g in tiny-llama-bf16 tiny-llama-current; do
  t "golden $g"; timeout 60 $C/bin/octet-run $C/golden/$g/model.octet --golden $C/golden/$g > $O/golden-$g.log 2>&1; echo "rc=$?"; tail -1 $O/golden-$g.log
done
t "golden tiny-llama-bf16 --no-graph"; timeout 60 $C/bin/octet-run $C/golden/tiny-llama-bf16/model.octet --golden $C/golden/tiny-llama-bf16 --no-graph > $O/golden-nograph.log 2>&1; echo "rc=$?"; tail -1 $O/golden-nograph.log
for v in old new; do t "8b $v"; octet 8b-$v $C/$v/llama3-8b-8l-bf16.octet; done
t "torch 8b bf16"; timeout 150 python3 bench/peers/torch_llama.py --model llama3-8b-8l --seq 8192 --batch 1 --mode bf16 --warmup 3 --steps 12 --out $O/torch-8b-bf16.json > $O/torch-8b-bf16.log 2>&1
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(round(r['tokens_per_s']), 'tok/s, peak', round(r['peak_mem_allocated_gib'], 2), 'GiB')" $O/torch-8b-bf16.json
for v in old new; do t "8b $v 2"; octet 8b-$v-2 $C/$v/llama3-8b-8l-bf16.octet; done
for v in old new old new; do t "1b $v"; octet 1b-$v-$SECONDS $C/$v/llama3.2-1b-bf16.octet; done
t done
} 2>&1 | tee $O/summary.log
kill $CL
cd $OUT && tar czf r.tgz r && cp r/summary.log . && rm -rf r

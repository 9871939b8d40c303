#!/bin/bash
# One H100, one call: GPU goldens of the BF16 recipe with the rotated q
# and k saved (branch rope-saved), the weights cast in the step and by the
# AdamW kernel (train.codegen.bf16_weight_cast "optimizer"); then the
# 8-layer Llama 3 8B BF16 step: main aa2e5c3's bundle, the branch's with
# the casts in the step and with the casts in the optimizer, beside
# torch.compile BF16, each twice, alternating; octet-profile of the
# optimizer-cast step.
set -u
C=carry/e2
O=$OUT/r; mkdir -p $O
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv > $O/gpu.txt
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw --format=csv,noheader -l 1 > $O/clocks.csv &
CL=$!
t() { echo "=== $1 ($SECONDS s)"; }
octet() { # NAME BUNDLE
  timeout 120 $C/octet-run $2 --bench --warmup 3 --steps 12 --json $O/$1.json > $O/$1.log 2>&1; tail -1 $O/$1.log
}
peer() {
  timeout 150 python3 bench/peers/torch_llama.py --model llama3-8b-8l --seq 8192 --batch 1 --mode bf16 --warmup 3 --steps 12 --out $O/$1.json > $O/$1.log 2>&1
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(round(r['tokens_per_s']), 'tok/s, peak', round(r['peak_mem_allocated_gib'], 2), 'GiB')" $O/$1.json
}
{
for g in tiny-llama-bf16 tiny-llama-bf16-optimizer-cast l8b2-bf16; do
  t "golden $g"; timeout 90 $C/octet-run $C/g/$g/model.octet --golden $C/g/$g > $O/golden-$g.log 2>&1; echo "rc=$?"; tail -1 $O/golden-$g.log
done
for r in 1 2; do
  t "octet main $r"; octet octet-main-$r $C/b/l8b-bf16-main.octet
  t "octet step $r"; octet octet-step-$r $C/b/l8b-bf16-step.octet
  t "octet optimizer $r"; octet octet-opt-$r $C/b/l8b-bf16-opt.octet
  t "torch bf16 $r"; peer torch-bf16-$r
done
t profile; timeout 80 $C/octet-profile $C/b/l8b-bf16-opt.octet --top 60 > $O/profile-opt.txt 2>&1; grep -E "train_microbatch:|optimizer_step:|generated kernel  " $O/profile-opt.txt | head -6
t done
} 2>&1 | tee $O/summary.log
kill $CL
cd $OUT && tar czf r.tgz r && cp r/summary.log . && rm -rf r

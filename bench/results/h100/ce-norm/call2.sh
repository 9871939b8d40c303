#!/bin/bash
# One H100: tokens/s of the bench models with main's bundles before the
# cross-entropy, global-norm and AdamW kernel changes (carry/s17/old,
# octet at 6931109) and after (carry/s17/new), alternating, beside
# torch.compile (bench/peers/torch_llama.py) in the same call; then where
# the new 1B BF16 step goes (octet-profile).
set -u
C=carry/s17; O=$OUT/c2; mkdir -p $O
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv > $O/gpu.txt
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw --format=csv,noheader -l 1 > $O/clocks.csv &
CL=$!
t() { echo "=== $1 ($SECONDS s)"; }
octet() { # NAME BUNDLE
  timeout 150 $C/bin/octet-run $2 --bench --warmup 3 --steps 12 --json $O/$1.json > $O/$1.log 2>&1; tail -1 $O/$1.log
}
peer() { # NAME MODEL SEQ BATCH MODE
  timeout 150 python3 bench/peers/torch_llama.py --model $2 --seq $3 --batch $4 --mode $5 --warmup 3 --steps 12 --out $O/$1.json > $O/$1.log 2>&1
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(round(r['tokens_per_s']), 'tok/s, peak', round(r['peak_mem_allocated_gib'], 2), 'GiB')" $O/$1.json
}
for m in llama3.2-1b-bf16 llama3.2-1b-fp8 llama3-8b-8l-fp8 llama3-8b-8l-bf16; do
  for v in old new; do
    [ -f $C/$v/$m.octet ] || continue
    t "octet $m $v"; octet octet-$m-$v $C/$v/$m.octet
  done
  case $m in llama3.2-1b-*) a="llama3.2-1b 4096 2";; *) a="llama3-8b-8l 8192 1";; esac
  t "torch $m"; peer torch-$m $a ${m##*-}
done
for m in llama3.2-1b-bf16; do
  t "octet-profile $m new"
  timeout 150 $C/bin/octet-profile $C/new/$m.octet --top 60 > $O/profile-$m.txt 2>&1
  grep -E "cross_entropy|global_norm|adamw" $O/profile-$m.txt
done
t done
kill $CL
cd $OUT && tar czf c2.tgz c2 && rm -rf c2

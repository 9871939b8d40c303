#!/bin/bash
# One H100, one call: GPU goldens of the new bundles, the Hopper attention
# backward with a third stage (carry/attn-v5) against the merged one
# (carry/attn-v2b) beside PyTorch's SDPA backends, then the bench models'
# tokens/s and peak memory beside torch.compile, then octet-profile.
set -u
C=carry/fin; O=$OUT/r; mkdir -p $O
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv > $O/gpu.txt
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw --format=csv,noheader -l 1 > $O/clocks.csv &
CL=$!
t() { echo "=== $1 ($SECONDS s)"; }
{
t golden-tiny-fp8; timeout 60 $C/bin/octet-run $C/golden/tiny-fp8/model.octet --golden $C/golden/tiny-fp8 > $O/golden-tiny-fp8.log 2>&1; echo "rc=$?"; tail -2 $O/golden-tiny-fp8.log
t golden-l8b2-fp8; timeout 90 $C/bin/octet-run $C/golden/l8b2-fp8/model.octet --golden $C/golden/l8b2-fp8 > $O/golden-l8b2-fp8.log 2>&1; echo "rc=$?"; tail -2 $O/golden-l8b2-fp8.log
A=carry/attn-v5
t attention-test-v5; timeout 90 $A/octet-gpu-attention-tests $A/attention-hopper-bwd-kernels --golden $A/attention-golden > $O/attention-test-v5.log 2>&1; echo "rc=$?"; grep -E "kernels failed|golden" $O/attention-test-v5.log
for d in $A carry/attn-v2b; do
  t "attention-bench $d"; timeout 90 $A/octet-gpu-attention-tests --bench $d/attention-bench-hopper-bwd-kernels 20 > $O/attention-$(basename $d).json 2>/dev/null
  python3 -c "import json,sys; print(' '.join(f\"{x['op'][10:]}{x['seq']}/{x['documents']}:{x['tflops']}\" for x in json.load(open(sys.argv[1]))))" $O/attention-$(basename $d).json
done
t attention-peers; timeout 120 python3 $C/attention_torch.py --cases 8192:0,4096:0,8192:8 --iterations 20 > $O/attention-peers.json 2>$O/attention-peers.err
python3 -c "import json,sys; [print(p['backend'],p.get('seq'),p.get('documents'),p['fwd_tflops'],p['bwd_tflops']) for p in json.load(open(sys.argv[1]))]" $O/attention-peers.json
octet() { timeout 120 $C/bin/octet-run $2 --bench --warmup 3 --steps 12 --json $O/$1.json > $O/$1.log 2>&1; tail -1 $O/$1.log; }
peer() { timeout 150 python3 bench/peers/torch_llama.py --model $2 --seq $3 --batch $4 --mode $5 --warmup 3 --steps 12 --out $O/$1.json > $O/$1.log 2>&1
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(round(r['tokens_per_s']), 'tok/s, peak', round(r['peak_mem_allocated_gib'], 2), 'GiB')" $O/$1.json; }
for m in llama3.2-1b-fp8 llama3.2-1b-bf16 llama3-8b-8l-fp8; do
  t "octet $m"; octet octet-$m $C/new/$m.octet
  case $m in llama3.2-1b-*) a="llama3.2-1b 4096 2";; *) a="llama3-8b-8l 8192 1";; esac
  t "torch $m"; peer torch-$m $a ${m##*-}
done
for m in llama3.2-1b-fp8 llama3-8b-8l-fp8; do
  [ $SECONDS -lt 330 ] || break
  t "octet old $m"; octet octet-old-$m $C/old/$m.octet
done
if [ $SECONDS -lt 350 ]; then t profile; timeout 60 $C/bin/octet-profile $C/new/llama3.2-1b-bf16.octet --top 60 > $O/profile-llama3.2-1b-bf16.txt 2>&1; grep -E "cross_entropy|attention" $O/profile-llama3.2-1b-bf16.txt | head -8; fi
t done
} 2>&1 | tee $O/summary.log
kill $CL
cd $OUT && tar czf r.tgz r && cp r/summary.log . && rm -rf r

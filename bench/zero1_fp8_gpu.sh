#!/bin/bash
# ZeRO-1 with FP8 on two GPUs, on the GPU host:
#   - 20 steps of tiny-llama (delayed and current FP8) and of 2 layers of
#     Llama 3 8B (delayed FP8) on one GPU, at data 2 replicated and at
#     data 2 with the optimizer
#     sharded, at the same global batch: each step's loss and grad norm
#     against one GPU's within the golden FP8 tolerances (step 1: loss
#     2e-3, grad norm 2e-2 relative; step s allows 1 + 0.1 (s - 1) times
#     more), and ZeRO-1 against replicated data 2 (the same bounds);
#   - tokens/s per GPU of the 8-layer Llama 3 8B FP8 bench model at data 2,
#     replicated against sharded (--bench), in the same call;
#   - kill -9 of rank 1 of the sharded 2-layer run mid-step: rank 0 must
#     exit non-zero within 60 s, naming rank 1.
#   - a checkpoint of the sharded tiny-llama run: ZeRO-1 at data 2 to step
#     10, one GPU resumes to step 15, ZeRO-1 at data 2 resumes to step 20;
#     steps 11-20 against 20 uninterrupted ZeRO-1 steps (the golden FP8
#     tolerances; rank 0 writes the moments whole, joined from the ranks'
#     parts, and each rank of a resume takes its part);
#
# Here (bundles compiled where MLIR is; about 18 MiB in all with octet-run):
#   mkdir -p carry/z1 carry/bin && for s in tiny-fp8-dp1 tiny-fp8-dp2 tiny-fp8-dp2-zero1 \
#       tiny-fp8current-dp1 tiny-fp8current-dp2 tiny-fp8current-dp2-zero1 \
#       l8b2-fp8-dp1 l8b2-fp8-dp2 l8b2-fp8-dp2-zero1 llama3-8b-8l-fp8-dp2 llama3-8b-8l-fp8-dp2-zero1; do
#     build/tools/octet/octet compile bench/specs/data-parallel/$s.pbtxt -o carry/z1/$s.octet; done
#   cp build/tools/octet-run/octet-run carry/bin/
# There (carry: carry, data/corpus.txt):
#   bash bench/zero1_fp8_gpu.sh carry/bin/octet-run carry/z1 OUT_DIR
R=${1:?octet-run}; D=${2:?bundle directory}; O=${3:?output directory}
W=$(mktemp -d); mkdir -p "$O"; bad=0; LOSS_TOL=2e-3; NORM_TOL=2e-2
. "$(dirname "$0")/launch2.sh"
. "$(dirname "$0")/zero1_common.sh"
for m in tiny-fp8 tiny-fp8current l8b2-fp8; do zero1_against_one $m; done
log "checkpoint: ZeRO-1 data 2 to step 10, one GPU resumes to 15, ZeRO-1 data 2 resumes to 20"
m=tiny-fp8; c=$W/moved-ckpt
launch2 $W/moved-a.log $D/$m-dp2-zero1.octet --text data/corpus.txt --steps 10 --checkpoint-dir $c || bad=1
ls $c
"$R" $D/$m-dp1.octet --text data/corpus.txt --steps 15 --checkpoint-dir $c --resume > $W/moved-b.log 2>&1 || { tail -3 $W/moved-b.log; bad=1; }
launch2 $W/moved-c.log $D/$m-dp2-zero1.octet --text data/corpus.txt --steps 20 --checkpoint-dir $c --resume || bad=1
grep -hE "^step +(1[1-9]|20)/" $W/moved-b.log $W/moved-c.log | tee $O/moved.log
grep -hE "resumed|note:" $W/moved-b.log $W/moved-c.log
grep -hE "^step +(1[1-9]|20)/" $W/$m-zero1.log > $W/straight.log
n=$(wc -l < $O/moved.log); [ "$n" = 10 ] || { echo "FAIL: $n resumed steps, not 10"; bad=1; }
echo "-- resumed steps 11-20 against the uninterrupted ZeRO-1 run"; close $W/straight.log $O/moved.log || bad=1
log "8-layer Llama 3 8B FP8 tokens/s at data 2: replicated, then ZeRO-1 (--bench, 20 steps)"
launch2 $W/b-dp2.log $D/llama3-8b-8l-fp8-dp2.octet --bench --warmup 4 --steps 20 --json $O/l8b8-fp8-dp2.json || bad=1
tail -1 $W/b-dp2.log
launch2 $W/b-zero1.log $D/llama3-8b-8l-fp8-dp2-zero1.octet --bench --warmup 4 --steps 20 --json $O/l8b8-fp8-dp2-zero1.json || bad=1
tail -1 $W/b-zero1.log
log "kill -9 of rank 1 of the ZeRO-1 FP8 2-layer run, mid-step"
kill_mid_step $O/kill.log $D/l8b2-fp8-dp2-zero1.octet --synthetic --steps 100000 || bad=1
rm -rf "$W"
exit $bad

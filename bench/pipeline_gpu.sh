#!/bin/bash
# Pipeline parallelism (train.parallel.pipeline) on two GPUs, BF16 and FP8,
# on the GPU host (kind nvidia-h100-x2), in parts:
#   step1-MODEL (MODEL: tiny-bf16 l8b4-bf16, and in FP8 tiny-fp8blockwise
#     l8b4-fp8blockwise (the seed's recipe), tiny-fp8 l8b4-fp8 (delayed),
#     tiny-fp8current l8b4-fp8current): one step on one GPU
#     (MODEL-pp1), at pipeline 2 with 1F1B (MODEL-pp2) and interleaved
#     (MODEL-pp2-v2, 2 chunks a rank), 4 microbatches at the same global
#     batch, each checkpointed after step 1; the pipeline checkpoint is
#     joined over the stages into the one-rank format (FP8 scale state
#     included), so bench/dp_equivalence.py compares the loss, the grad
#     norm and every tensor with one GPU's within the golden bounds
#     (--numerics fp8 for the FP8 models, as for data parallelism);
#     OUT/MODEL-VARIANT-step1.json. VARIANTS="pp2-v2" (say) runs only
#     those pipeline variants beside one GPU (default "pp2 pp2-v2");
#     VARIANTS="pp2-zb" the ZB-H1 bundles (MODEL-pp2-zb: tiny-bf16,
#     tiny-fp8blockwise, l8b4-bf16; input and weight gradients apart).
#   steps20-MODEL: 20 steps of the same three (or VARIANTS), each step's loss and grad
#     norm against one GPU's (golden tolerances: step 1 loss 1e-3, grad
#     norm 5e-3 relative in BF16, 2e-3 and 2e-2 in FP8; step s allows
#     1 + 0.1 (s - 1) times more).
#   bubble: l8b4-bf16 at m = 4, 8 and 16 microbatches, 20 steps each on one
#     GPU and at pipeline 2 (1F1B). The pipeline runs with
#     --pipeline-timeline: every rank times each instruction with CUDA
#     events after step 2, and rank 0 prints the measured bubble (the ranks'
#     idle time between the step's start and their last compute
#     instruction, over P x the longest) beside the schedule's prediction
#     (the simulator run with every stage's mean F, B and W times and the
#     shortest transfer of the same run). Those two must be within 2
#     points: a gap is time the runtime loses that the schedule does not
#     explain. Beside them, not judged: the step-time proxy 1 - (T1 / 2) /
#     T2 from the median tokens/s after step 2 (T1 the step time on one GPU
#     with the whole model, T2 the pipeline's; the transfers and the
#     optimizer step count as bubble) against the compiler's estimate
#     before anything ran (`octet inspect`'s "predicted bubble": its
#     chunks' estimated H100 times, D/BUNDLE.octet.inspect), and the
#     equal-chunk closed form (P - 1)/(m + P - 1). OUT/bubble.json.
#     BUBBLE_VARIANT=pp2-zb measures the ZB-H1 bundles instead
#     (l8b4-bf16-pp2-zb[-mM]; OUT/bubble-pp2-zb.json).
#   throughput16-RECIPE[-mM] (RECIPE: bf16 or fp8blockwise): 20 steps of
#     l8b16-RECIPE-pp2 (16 layers of Llama 3 8B, pipeline 2, 1F1B, 8
#     microbatches, or M with the -mM bundles) and of l8b8-RECIPE-pp1 (its
#     8-layer half on one GPU); the pipeline's model TFLOP/s per GPU must
#     keep 90% of the one GPU's (tokens/s beside it).
#     OUT/throughput16-RECIPE[-mM].json.
#   kill: kill -9 of pipeline rank 1 mid-step: rank 0 must exit non-zero
#     within 60 s naming rank 1 ('rank 1 is lost').
#   wrong-size: a pipeline-2 bundle started as one rank is told the layout.
# The script exits 1 when any check fails.
#
# Here (bundles compiled where MLIR is; about 20 MiB with octet-run for
# BF16, each FP8 recipe's six about as much again):
#   mkdir -p carry/pipeline/bin && cp build/tools/octet-run/octet-run carry/pipeline/bin/
#   for s in tiny-bf16-pp1 tiny-bf16-pp2 tiny-bf16-pp2-v2 l8b4-bf16-pp1 l8b4-bf16-pp2 l8b4-bf16-pp2-v2; do
#     build/tools/octet/octet compile bench/specs/pipeline/$s.pbtxt -o carry/pipeline/$s.octet || break; done
#   for m in 8 16; do for v in pp1 pp2; do
#     sed "s/global_batch_size: 4/global_batch_size: $m/" bench/specs/pipeline/l8b4-bf16-$v.pbtxt > /tmp/l8b4-bf16-$v-m$m.pbtxt
#     build/tools/octet/octet compile /tmp/l8b4-bf16-$v-m$m.pbtxt -o carry/pipeline/l8b4-bf16-$v-m$m.octet || break; done; done
#   for s in l8b16-bf16-pp2 l8b8-bf16-pp1; do
#     build/tools/octet/octet compile bench/specs/pipeline/$s.pbtxt -o carry/pipeline/$s.octet || break; done
# (throughput16-fp8blockwise: l8b16-fp8blockwise-pp2 and l8b8-fp8blockwise-pp1
# the same way, into carry/pipeline-fp8blockwise with its octet-run.)
# ZB-H1 (VARIANTS=pp2-zb, BUBBLE_VARIANT=pp2-zb):
#   for s in tiny-bf16-pp2-zb l8b4-bf16-pp2-zb; do
#     build/tools/octet/octet compile bench/specs/pipeline/$s.pbtxt -o carry/pipeline/$s.octet || break; done
#   for m in 8 16; do
#     sed "s/global_batch_size: 4/global_batch_size: $m/" bench/specs/pipeline/l8b4-bf16-pp2-zb.pbtxt > /tmp/l8b4-bf16-pp2-zb-m$m.pbtxt
#     build/tools/octet/octet compile /tmp/l8b4-bf16-pp2-zb-m$m.pbtxt -o carry/pipeline/l8b4-bf16-pp2-zb-m$m.octet || break; done
#   (and tiny-fp8blockwise-pp2-zb into carry/pipeline-fp8blockwise)
#   for b in carry/pipeline/*pp2*.octet; do build/tools/octet/octet inspect $b > $b.inspect || break; done
# FP8 (R: fp8blockwise, fp8 or fp8current; a directory of their own keeps
# each call's carry under 64 MiB):
#   R=fp8blockwise; mkdir -p carry/pipeline-$R/bin && cp build/tools/octet-run/octet-run carry/pipeline-$R/bin/
#   for m in tiny l8b4; do for v in pp1 pp2 pp2-v2; do
#     build/tools/octet/octet compile bench/specs/pipeline/$m-$R-$v.pbtxt -o carry/pipeline-$R/$m-$R-$v.octet || break; done; done
# There (carry: carry/pipeline, data/corpus.txt):
#   bash bench/pipeline_gpu.sh carry/pipeline/bin/octet-run carry/pipeline OUT_DIR [PART ...]
# and for FP8 (carry: carry/pipeline-$R, data/corpus.txt):
#   bash bench/pipeline_gpu.sh carry/pipeline-$R/bin/octet-run carry/pipeline-$R OUT_DIR step1-tiny-$R steps20-tiny-$R step1-l8b4-$R steps20-l8b4-$R
# Expected wall time on 2 x H100: each step1 and steps20 part of tiny-llama
# ~15 s, of l8b4 ~1 min (three loads with GEMM timing), bubble ~3 min,
# kill ~1 min; split the parts over calls of 600 s:
#   bash bench/pipeline_gpu.sh R D OUT step1-tiny-bf16 steps20-tiny-bf16 kill wrong-size step1-l8b4-bf16 steps20-l8b4-bf16
#   bash bench/pipeline_gpu.sh R D OUT bubble throughput16-bf16
# (throughput16 ~2 min: two loads with GEMM timing, 20 steps each.)
#
set -u
export NCCL_NVLS_ENABLE=0
R=${1:?octet-run}; D=${2:?bundle directory}; O=${3:?output directory}; shift 3
parts=${*:-step1-tiny-bf16 steps20-tiny-bf16 kill wrong-size step1-l8b4-bf16 steps20-l8b4-bf16 bubble throughput16-bf16}
B=$(cd "$(dirname "$0")" && pwd); mkdir -p "$O"
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
bad=0; LOSS_TOL=1e-3; NORM_TOL=5e-3
log() { echo; echo "=== $* ($(date +%T), ${SECONDS} s)"; }
. "$B/launch2.sh"
. "$B/zero1_common.sh"
dataOf() { case $1 in tiny*) echo "--text data/corpus.txt";; *) echo "--synthetic";; esac; }

# The golden bounds a model's recipe is held to.
numericsOf() { case $1 in *fp8*) echo fp8;; *) echo bf16;; esac; }

step1() {
  local m=$1 data v numerics; data=$(dataOf $m); numerics=$(numericsOf $m)
  log "$m step 1: one GPU, pipeline 2 (1F1B), pipeline 2 interleaved"
  "$R" $D/$m-pp1.octet $data --steps 1 --checkpoint-dir $W/$m-one > $O/$m-step1-one.log 2>&1 \
    || { echo "one GPU failed:"; tail -3 $O/$m-step1-one.log; bad=1; return; }
  for v in ${VARIANTS:-pp2 pp2-v2}; do
    launch2 $W/$m-$v-step1.log $D/$m-$v.octet $data --steps 1 --checkpoint-dir $W/$m-$v || { bad=1; continue; }
    cp $W/$m-$v-step1.log* $O/
    python3 $B/dp_equivalence.py --numerics $numerics --name "$m $v" --one $O/$m-step1-one.log $W/$m-one/step-1 \
      --data2 $W/$m-$v-step1.log $W/$m-$v/step-1 --out $O/$m-$v-step1.json || bad=1
    rm -rf $W/$m-$v
  done
  rm -rf $W/$m-one
}

steps20() {
  local m=$1 data v LOSS_TOL NORM_TOL; data=$(dataOf $m)
  case $(numericsOf $m) in fp8) LOSS_TOL=2e-3; NORM_TOL=2e-2;; *) LOSS_TOL=1e-3; NORM_TOL=5e-3;; esac
  log "$m: one GPU, pipeline 2 (1F1B), pipeline 2 interleaved (20 steps)"
  "$R" $D/$m-pp1.octet $data --steps 20 > $O/$m-one.log 2>&1 || { tail -3 $O/$m-one.log; bad=1; return; }
  for v in ${VARIANTS:-pp2 pp2-v2}; do
    launch2 $W/$m-$v.log $D/$m-$v.octet $data --steps 20 || { bad=1; continue; }
    cp $W/$m-$v.log* $O/
    echo "-- $v against one GPU"; close $O/$m-one.log $O/$m-$v.log || bad=1
  done
}

# The median after step 2 of one figure of a log's step lines: LABEL
# "tokens/s" (the job's) or "TFLOP/s" (per GPU).
median_of() {
  python3 - "$1" "$2" <<'EOF'
import re, sys
label, ts = re.escape(sys.argv[1]), []
for line in open(sys.argv[2]):
    m = re.match(r'^step\s+(\d+)/\d+.*?' + label + r' ([\d.]+)', line)
    if m and int(m.group(1)) > 2:
        ts.append(float(m.group(2)))
ts.sort()
print(ts[len(ts) // 2] if ts else 'nan')
EOF
}
median_tps() { median_of tokens/s "$1"; }
median_tflops() { median_of TFLOP/s "$1"; }

# The compiler's predicted bubble of a pipeline bundle, in percent, from
# `octet inspect BUNDLE > BUNDLE.inspect` (compiled with it: see above).
predicted_bubble() {
  sed -n 's/^predicted bubble \([0-9.]*\)%.*/\1/p' "$1.inspect" 2>/dev/null | head -1
}

bubble() {
  local n suffix one two predicted rows="" pv=${BUBBLE_VARIANT:-pp2} json
  json=$O/bubble$([ $pv = pp2 ] || echo "-$pv").json
  for n in 4 8 16; do
    suffix=$([ $n = 4 ] && echo "" || echo "-m$n")
    predicted=$(predicted_bubble $D/l8b4-bf16-$pv$suffix.octet)
    [ -n "$predicted" ] || { echo "no 'predicted bubble' in $D/l8b4-bf16-$pv$suffix.octet.inspect: run octet inspect on the bundle where it was compiled"; bad=1; continue; }
    log "bubble at m = $n: l8b4-bf16 on one GPU and at pipeline 2 ($pv), 20 steps"
    "$R" $D/l8b4-bf16-pp1$suffix.octet --synthetic --steps 20 > $O/bubble-m$n-one.log 2>&1 \
      || { tail -3 $O/bubble-m$n-one.log; bad=1; continue; }
    launch2 $W/bubble-m$n-$pv.log $D/l8b4-bf16-$pv$suffix.octet --synthetic --steps 20 --pipeline-timeline \
      || { bad=1; continue; }
    cp $W/bubble-m$n-$pv.log* $O/
    one=$(median_tps $O/bubble-m$n-one.log); two=$(median_tps $W/bubble-m$n-$pv.log)
    timeline=$(sed -n 's/.*pipeline timeline: [0-9]* steps, measured bubble \([0-9.]*\)%, the schedule with these op times predicts \([0-9.]*\)%.*/\1:\2/p' \
      $W/bubble-m$n-$pv.log | head -1)
    [ -n "$timeline" ] || { echo "no 'pipeline timeline' line in $W/bubble-m$n-$pv.log"; bad=1; continue; }
    rows="$rows $n:$one:$two:$predicted:$timeline"
  done
  python3 - $rows <<'EOF' | tee $json
import json, sys
out = []
for row in sys.argv[1:]:
    m, one, two, predicted, seen, scheduled = row.split(':')
    m, one, two = int(m), float(one), float(two)
    predicted, seen, scheduled = float(predicted) / 100, float(seen) / 100, float(scheduled) / 100
    # (T1 / 2) / T2 = tokens/s at pipeline 2 / (2 x one GPU's).
    proxy = 1 - two / (2 * one)
    out.append({'microbatches': m,
                'bubble_timeline_measured': round(seen, 4),
                'bubble_timeline_predicted': round(scheduled, 4),
                'within_2_points': abs(seen - scheduled) <= 0.02,
                'one_gpu_tokens_per_s': one, 'pipeline2_tokens_per_s': two,
                'bubble_step_proxy': round(proxy, 4),
                'bubble_cost_model': round(predicted, 4),
                'cost_model_within_2_points': abs(proxy - predicted) <= 0.02,
                'bubble_closed_form_equal_chunks': round(1 / (m + 1), 4)})
print(json.dumps(out, indent=1))
EOF
  python3 -c "import json,sys; sys.exit(0 if all(r['within_2_points'] for r in json.load(open('$json'))) else 1)" \
    || { echo "bubble: a measured bubble is more than 2 points from the schedule's prediction"; bad=1; }
}

# 16 layers at pipeline 2 against their 8-layer half on one GPU, same call.
# Each GPU of the pipeline holds about one 8-layer half, so the pipeline's
# job tokens/s is set beside one GPU's; the measure that counts is the
# model TFLOP/s per GPU (the step lines' per-GPU figure: the 16-layer
# model has less head per layer, which tokens/s would count as a gain),
# which must keep 90% of one GPU's. PART throughput16-RECIPE[-mM] reads
# l8b16-RECIPE-pp2[-mM] and l8b8-RECIPE-pp1[-mM] (8 microbatches without);
# PIPE_VARIANT=pp2-v2 takes l8b16-RECIPE-pp2-v2[-mM] (interleaved).
throughput16() {
  local arg=$1 recipe m suffix one two onef twof predicted
  recipe=${arg%%-m[0-9]*}; m=8; suffix=""
  [ "$recipe" = "$arg" ] || { m=${arg##*-m}; suffix=-m$m; }
  local half=l8b8-$recipe-pp1$suffix pipe=l8b16-$recipe-${PIPE_VARIANT:-pp2}$suffix
  [ -f $D/$half.octet ] && [ -f $D/$pipe.octet ] \
    || { echo "throughput16-$arg: $D/$half.octet and $D/$pipe.octet are needed (bench/specs/pipeline/)"; bad=1; return; }
  log "throughput16-$arg: $half on one GPU, $pipe at pipeline 2, 20 steps"
  "$R" $D/$half.octet --synthetic --steps 20 > $O/throughput16-$arg-one.log 2>&1 \
    || { tail -3 $O/throughput16-$arg-one.log; bad=1; return; }
  launch2 $W/throughput16-$arg-pp2.log $D/$pipe.octet --synthetic --steps 20 || { bad=1; return; }
  cp $W/throughput16-$arg-pp2.log* $O/
  one=$(median_tps $O/throughput16-$arg-one.log); two=$(median_tps $W/throughput16-$arg-pp2.log)
  onef=$(median_tflops $O/throughput16-$arg-one.log); twof=$(median_tflops $W/throughput16-$arg-pp2.log)
  predicted=$(predicted_bubble $D/$pipe.octet)
  python3 - "$pipe" "$m" "$one" "$two" "$onef" "$twof" "${predicted:-nan}" <<'EOF' | tee $O/throughput16-$arg.json
import json, sys
recipe, m = sys.argv[1], int(sys.argv[2])
one, two, onef, twof, predicted = map(float, sys.argv[3:])
print(json.dumps({'pipeline_bundle': recipe, 'microbatches': m,
                  'one_gpu_8_layers_tokens_per_s': one, 'pipeline2_16_layers_tokens_per_s': two,
                  'pipeline_tokens_per_s_over_one_gpu': round(two / one, 4),
                  'one_gpu_tflops': onef, 'pipeline2_tflops_per_gpu': twof,
                  'tflops_per_gpu_over_one_gpu': round(twof / onef, 4),
                  'bubble_predicted': round(predicted / 100, 4), 'keeps_90_percent': twof >= 0.9 * onef}, indent=1))
EOF
  python3 -c "import json,sys; sys.exit(0 if json.load(open('$O/throughput16-$arg.json'))['keeps_90_percent'] else 1)" \
    || { echo "throughput16-$arg: the pipeline keeps less than 90% of one GPU's TFLOP/s per GPU"; bad=1; }
}

kill_one() {
  log "kill -9 of pipeline rank 1 of the l8b4 1F1B run, mid-step"
  kill_mid_step $O/kill.log $D/l8b4-bf16-pp2.octet --synthetic --steps 100000 || bad=1
}

wrong_size() {
  log "pipeline 2 started as one rank"
  RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29999 \
    "$R" $D/tiny-bf16-pp2.octet --text data/corpus.txt --steps 1 > $O/wrong-size.log 2>&1
  grep -q "compiled for world size 2 (pipeline 2 × data 1)" $O/wrong-size.log || { cat $O/wrong-size.log; bad=1; }
}

for p in $parts; do
  case $p in
    step1-*) step1 ${p#step1-};;
    steps20-*) steps20 ${p#steps20-};;
    bubble) bubble;;
    throughput16-*) throughput16 ${p#throughput16-};;
    kill) kill_one;;
    wrong-size) wrong_size;;
    *) echo "pipeline_gpu.sh: unknown part '$p' (step1-MODEL, steps20-MODEL, bubble, throughput16-RECIPE, kill, wrong-size)"; bad=1;;
  esac
done
log "done: $([ $bad = 0 ] && echo every check passed || echo 'a check FAILED')"
exit $bad

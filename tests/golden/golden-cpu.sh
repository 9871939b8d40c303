#!/usr/bin/env bash
# octet golden on the CPU: a two-step golden of SPEC, then what a GPU check
# relies on: two finite steps, a gradient snapshot in which every gradient
# accumulator holds something, and, after the optimizer, the step counter at
# 1 and every accumulator either cleared or, where the next step's first
# microbatch writes it (octet-overwrite-gradients), gone: such a gradient is
# step-local, its slot reused until the next step writes it. With one
# microbatch a step every accumulator is step-local, so none may be left.
# usage: golden-cpu.sh OCTET SPEC DIR
set -euo pipefail
octet=$1 spec=$2 dir=$3
rm -rf "$dir"
"$octet" golden "$spec" -o "$dir" --steps 2
for f in model.octet model.mlir golden.txt init.tsv batches.safetensors \
         steps.tsv grads.tsv grads.safetensors after.tsv after.safetensors; do
  [ -s "$dir/$f" ] || { echo "missing $dir/$f"; exit 1; }
done
awk -F'\t' '!/^#/ { n++; if ($2 != $2 + 0 || $3 != $3 + 0 || $3 <= 0) bad = 1 }
  END { if (n != 2 || bad) { print "steps.tsv: want 2 steps with a loss and a positive grad norm"; exit 1 } }' \
  "$dir/steps.tsv"
awk -F'\t' '/^grad\./ { n++; if ($3 + 0 <= 0) { print "grads.tsv: " $1 " is zero before the optimizer"; bad = 1 } }
  END { if (n < 2 || bad) { print "grads.tsv: want every gradient nonzero (" n " gradients)"; exit 1 } }' \
  "$dir/grads.tsv"
awk -F'\t' 'FNR == NR { if ($1 ~ /^grad\./) before[$1] = $3; next }
  /^grad\./ { after[$1] = 1; if ($3 + 0 == 0) cleared++
    else { print "after.tsv: " $1 " is not cleared"; bad = 1 } }
  $1 == "optimizer.step" { step = $3 }
  END { for (g in before) if (!(g in after)) stepLocal++
        if (!stepLocal || bad || step != 1) {
          print "after.tsv: want gradients cleared (" cleared ") and step-local ones, which the first microbatch writes, gone (" stepLocal "), optimizer.step 1"; exit 1 } }' \
  "$dir/grads.tsv" "$dir/after.tsv"
echo "golden $dir: ok"

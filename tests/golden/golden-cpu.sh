#!/usr/bin/env bash
# octet golden on the CPU: a two-step golden of SPEC, then what a GPU check
# relies on: two finite steps, a gradient snapshot in which every gradient
# accumulator holds something, and, after the optimizer, every accumulator
# cleared and the step counter at 1.
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
awk -F'\t' '/^grad\./ { n++; if ($3 + 0 != 0) { print "after.tsv: " $1 " is not cleared by the optimizer"; bad = 1 } }
  $1 == "optimizer.step" { step = $3 }
  END { if (n < 2 || bad || step != 1) { print "after.tsv: want every gradient cleared and optimizer.step 1"; exit 1 } }' \
  "$dir/after.tsv"
echo "golden $dir: ok"

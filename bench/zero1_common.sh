# Sourced by bench/zero1_gpu.sh and bench/zero1_fp8_gpu.sh, after
# bench/launch2.sh; they set R (octet-run), D (bundles), O (output), W
# (scratch), bad, LOSS_TOL and NORM_TOL (the golden tolerances at step 1).
set -u
export NCCL_NVLS_ENABLE=0
log() { echo; echo "=== $* ($(date +%T))"; }
# close_steps LOSS NORM ONE OTHER: each step's loss and grad norm of OTHER's
# log against ONE's, relative, within LOSS and NORM at step 1 and 1 + 0.1
# (s - 1) times that at step s (the golden tolerances' growth); returns
# non-zero when a step is above them or none was compared.
close_steps() {
  awk -v tl="$1" -v tn="$2" 'FNR == 1 { f++ }
       $1 == "step" { split($2, at, "/"); s = at[1]
         for (i = 3; i < NF; i++) { if ($i == "loss") l = $(i+1); if ($i == "grad_norm") g = $(i+1) }
         if (f == 1) { L[s] = l; G[s] = g; next }
         grow = 1 + 0.1 * (s - 1)
         el = (l - L[s]) / L[s]; eg = (g - G[s]) / G[s]; if (el < 0) el = -el; if (eg < 0) eg = -eg
         printf "step %d loss %s vs %s (%.2e) grad_norm %s vs %s (%.2e)\n", s, l, L[s], el, g, G[s], eg
         if (el > tl * grow || eg > tn * grow) { print "  above the golden tolerance"; bad = 1 }
         n++ }
       END { if (n == 0) { print "no steps compared"; exit 1 } exit bad }' "$3" "$4"
}

# close ONE OTHER: close_steps within LOSS_TOL and NORM_TOL.
close() { close_steps "$LOSS_TOL" "$NORM_TOL" "$1" "$2"; }

# zero1_against_one MODEL: 20 steps of MODEL on one GPU (MODEL-dp1), at
# data 2 (MODEL-dp2) and at data 2 with ZeRO-1 (MODEL-dp2-zero1), each
# data-2 run against one GPU and ZeRO-1 against replicated data 2.
zero1_against_one() {
  local m=$1 data
  case $m in tiny*) data="--text data/corpus.txt";; *) data="--synthetic";; esac
  log "$m: one GPU, data 2, data 2 with ZeRO-1 (20 steps)"
  "$R" $D/$m-dp1.octet $data --steps 20 > $O/$m-one.log 2>&1 || { tail -3 $O/$m-one.log; bad=1; }
  launch2 $W/$m-dp2.log $D/$m-dp2.octet $data --steps 20 || bad=1; cp $W/$m-dp2.log $O/
  launch2 $W/$m-zero1.log $D/$m-dp2-zero1.octet $data --steps 20 || bad=1; cp $W/$m-zero1.log $O/
  echo "-- replicated data 2 against one GPU"; close $O/$m-one.log $O/$m-dp2.log || bad=1
  echo "-- ZeRO-1 data 2 against one GPU"; close $O/$m-one.log $O/$m-zero1.log || bad=1
  echo "-- ZeRO-1 data 2 against replicated data 2"; close $O/$m-dp2.log $O/$m-zero1.log || bad=1
}

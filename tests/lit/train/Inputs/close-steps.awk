# usage: awk -v loss=TOL -v norm=TOL -f close-steps.awk ONE_LOG OTHER_LOG
# Each step's loss and grad norm printed by OTHER against ONE's, relative
# errors within `loss` and `norm`; prints each step's errors.
FNR == 1 { file++ }
$1 == "step" {
  split($2, at, "/")
  s = at[1]
  for (i = 3; i < NF; i++) {
    if ($i == "loss") l = $(i + 1)
    if ($i == "grad_norm") g = $(i + 1)
  }
  if (file == 1) { L[s] = l; G[s] = g; next }
  el = (l - L[s]) / L[s]; if (el < 0) el = -el
  eg = (g - G[s]) / G[s]; if (eg < 0) eg = -eg
  printf "step %d: loss %.2e, grad norm %.2e\n", s, el, eg
  if (el > loss || eg > norm) { print "step " s ": above the tolerance"; bad = 1 }
  n++
}
END { if (bad || n == 0) exit 1; print n " steps agree" }

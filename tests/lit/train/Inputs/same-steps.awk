# usage: awk -f same-steps.awk TRAIN_LOG GOLDEN/steps.tsv
# Each step's loss, grad norm and lr of `octet train` (printed %.4f, %.4f,
# %.3e) against the golden's full-precision values rounded the same way.
NR == FNR {
  if ($1 == "step") {
    split($2, at, "/")
    line[at[1]] = $4 " " $6 " " $8
  }
  next
}
/^#/ { next }
{
  want = sprintf("%.4f %.4f %.3e", $2, $3, $4)
  if (line[$1] != want) {
    print "step " $1 ": octet train printed '" line[$1] "', the golden '" want "'"
    bad = 1
  }
  n++
}
END { if (!bad && n > 0) print n " steps agree"; else exit 1 }

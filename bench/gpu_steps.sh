# Sourced by the bench/*_gpu.sh runners on a GPU host, after they set
# carry, what (a comma-separated list of parts, or all) and out: samples
# nvidia-smi into $out/smi.csv until the shell exits, and defines
#   wants PART      whether PART is asked for;
#   step NAME CMD…  runs CMD with its output in $out/NAME.log, prints the
#                   outcome and the log's tail, sets status=1 if it fails.
mkdir -p "$out"
cd "$carry"
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv -l 2 > "$out/smi.csv" 2>&1 &
smi=$!
trap 'kill $smi 2>/dev/null' EXIT
nvidia-smi -L
status=0
wants() { [ "$what" = all ] || [[ ",$what," == *",$1,"* ]]; }
step() {
  local name=$1; shift
  local t0=$SECONDS
  "$@" > "$out/$name.log" 2>&1
  local rc=$?
  echo "== $name: rc $rc, $((SECONDS - t0)) s"
  tail -n 4 "$out/$name.log"
  [ $rc -eq 0 ] || status=1
}

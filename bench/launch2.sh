# Sourced by the two-GPU bench scripts (R: the octet-run to start).
# launch2 LOG ARGS...: $R ARGS as ranks 0 and 1 of one job on this host,
# with torchrun's variables; each rank's output in LOG.rR, rank 0's also in
# LOG. Prints both exit statuses and returns non-zero when a rank failed.
# With LAUNCH2_TIMEOUT set, each rank is killed after that many seconds
# (a hung job then fails instead of using up the call).
launch2() {
  local log=$1; shift
  local port=$((29500 + RANDOM % 2000))
  for r in 0 1; do
    RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      ${LAUNCH2_TIMEOUT:+timeout -s KILL $LAUNCH2_TIMEOUT} "$R" "$@" > "$log.r$r" 2>&1 &
    eval pid$r=$!
  done
  wait $pid0; local rc0=$?; wait $pid1; local rc1=$?
  echo "rc rank0=$rc0 rank1=$rc1"; cp "$log.r0" "$log"
  [ $rc1 = 0 ] || tail -3 "$log.r1"
  [ $rc0 = 0 ] && [ $rc1 = 0 ]
}

# kill_mid_step OUT_LOG ARGS...: $R ARGS as ranks 0 and 1; once rank 0 has
# printed step 5, kill -9 of rank 1, inside a step. Rank 0 must exit
# non-zero within 60 s naming rank 1 ('rank 1 is lost'); what it printed
# and the verdict in OUT_LOG. Returns non-zero when it did not.
kill_mid_step() {
  local out=$1; shift
  local port=$((31000 + RANDOM % 1000)) dir r k0 k1 guard rc t0 t1 took late
  dir=$(mktemp -d)
  for r in 0 1; do
    RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      "$R" "$@" > $dir/kill.r$r 2>&1 &
    eval k$r=$!
  done
  # Past loading and the first steps: rank 1 dies inside a step.
  for i in $(seq 240); do grep -q '^step  *5/' $dir/kill.r0 && break; sleep 0.5; done
  t0=$(date +%s.%N); kill -9 $k1
  ( sleep 90; kill -9 $k0 2>/dev/null ) & guard=$!
  wait $k0; rc=$?; t1=$(date +%s.%N); kill $guard 2>/dev/null
  took=$(python3 -c "print(f'{$t1-$t0:.1f}')")
  echo "rank 0 exited rc=$rc $took s after rank 1 was killed" | tee $out
  grep -v '^step' $dir/kill.r0 | tail -3 | tee -a $out
  late=$(python3 -c "print(1 if $took > 60 else 0)")
  rc=$([ $rc = 0 ] || [ $late = 1 ] && echo late ||
       (grep -q 'rank 1 is lost' $dir/kill.r0 && echo ok || echo unnamed))
  rm -rf $dir
  case $rc in
    late) echo "FAIL: rank 0 must exit non-zero within 60 s" | tee -a $out; return 1;;
    unnamed) echo "FAIL: rank 0 does not name the lost rank ('rank 1 is lost')" | tee -a $out; return 1;;
  esac
  echo "PASS: rank 0 ended in $took s naming rank 1" | tee -a $out
}

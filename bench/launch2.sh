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

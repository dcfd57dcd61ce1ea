# Sourced by trace-examples.sh and trace-examples-ddp.sh: how one example is run and kept.
#
# run NAME CMD...   runs CMD with its stdout, stderr, exit code and wall time (ns) kept in
#                   NAME.stdout, NAME.stderr, NAME.exit and NAME.wall_ns of the current folder,
#                   which the checkers (trace_examples_check.py, trace_ddp_check.py) read. With
#                   RUN_LIMIT_S set, CMD is stopped after that many seconds (SIGKILL 10 s later).
run() {
  local name=$1 rc=0 start end
  shift
  echo "== $name: $*"
  start=$(date +%s%N)
  if [[ -n ${RUN_LIMIT_S:-} ]]; then
    timeout --kill-after=10 "$RUN_LIMIT_S" "$@" >"$name.stdout" 2>"$name.stderr" || rc=$?
  else
    "$@" >"$name.stdout" 2>"$name.stderr" || rc=$?
  fi
  end=$(date +%s%N)
  echo "$rc" >"$name.exit"
  echo $((end - start)) >"$name.wall_ns"
  echo "   exit $rc, $(((end - start) / 1000000)) ms"
}

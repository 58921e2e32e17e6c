#!/bin/sh
# fuzz/run.sh BUILD SECONDS TARGET… — fuzzes each target (built by make
# fuzz in BUILD/fuzz/bin) for SECONDS, seeded from fuzz/corpus/TARGET and
# fuzz/regressions/TARGET (so the crashes found so far run under clang). New
# inputs go to BUILD/new/TARGET, crashes to BUILD/crashes/; the repository
# is never written. Fails, naming the crash files, if any target crashed.
build=$1
seconds=$2
shift 2
cd "$(dirname "$0")/.." || exit 2
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"
crashed=""
for t in "$@"; do
  mkdir -p "$build/new/$t" "$build/crashes"
  echo "fuzz $t for ${seconds}s"
  seeds="fuzz/corpus/$t"
  [ -d "fuzz/regressions/$t" ] && seeds="$seeds fuzz/regressions/$t"
  # shellcheck disable=SC2086 # seeds is a list of directories without spaces
  "$build/fuzz/bin/$t" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -max_len=4096 -print_final_stats=1 \
    -artifact_prefix="$build/crashes/$t-" "$build/new/$t" $seeds >"$build/$t.log" 2>&1
  status=$?
  grep -E '^#[0-9]+.*(DONE|cov:)' "$build/$t.log" | tail -n 1
  grep -E '^stat::(number_of_executed_units|average_exec_per_sec)' "$build/$t.log"
  if [ "$status" -ne 0 ]; then
    tail -n 60 "$build/$t.log"
    crashed="$crashed $t:$(sed -n 's/.*Test unit written to \(.*\)$/ \1/p' "$build/$t.log" | tr -d '\n')"
    echo "fuzz $t: FAILED (exit $status; log $build/$t.log)"
  fi
done
if [ -n "$crashed" ]; then
  echo "crash inputs:$crashed"
  exit 1
fi
echo "fuzz: no crash in $*"

#!/bin/sh
# Runs every C test and every busted spec; the last line counts them all:
#     tests: N passed, N failed
# BUILD names the build tree (build or build/asan); ASAN=1 preloads the
# sanitizer runtime into lua5.4 so the sanitized Lua module can load.
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 2
passed=0
failed=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

for t in "$BUILD"/spec/test_*; do
  [ -x "$t" ] || continue
  [ -f "spec/c/$(basename "$t").c" ] || continue  # a binary left by a test since removed or renamed
  "$t" >"$log" 2>&1
  status=$?
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
  if [ -z "$line" ]; then
    cat "$log"
    echo "$t: crashed (exit $status)"
    failed=$((failed + 1))
    continue
  fi
  p=${line%% passed*}
  f=${line#*passed, }
  f=${f%% failed}
  if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then  # e.g. LeakSanitizer's exit after all checks passed
    f=1
    p=$((p > 0 ? p - 1 : 0))
    echo "$(basename "$t"): exited with $status after its checks passed"
  fi
  [ "$f" -gt 0 ] && cat "$log"
  echo "$(basename "$t"): $p passed, $f failed"
  passed=$((passed + p))
  failed=$((failed + f))
done

# The fuzz targets replay their corpus and every crash ever found.
for t in "$BUILD"/fuzz/replay_*; do
  [ -x "$t" ] || continue
  name=${t##*/replay_}
  "$t" "fuzz/corpus/$name" "fuzz/regressions/$name" >"$log" 2>&1
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
  if [ -z "$line" ]; then cat "$log"; echo "fuzz $name: crashed"; failed=$((failed + 1)); continue; fi
  p=${line%% passed*}
  f=${line#*passed, }
  f=${f%% failed}
  [ "$f" -gt 0 ] && cat "$log"
  echo "fuzz $name: $line"
  passed=$((passed + p))
  failed=$((failed + f))
done

eval "$(make -s env BUILD="$BUILD")"
export RUNNEL_BIN="$PWD/$BUILD/runnel"
export RUNNEL_HOST="$PWD/$BUILD/host"
if [ -n "$ASAN" ]; then
  export LD_PRELOAD="$(gcc -print-file-name=libasan.so)"
  # Leak detection stays on for the binding too: busted ends with
  # os.exit(code, true), which closes the Lua state and runs every __gc, so
  # whatever runnel still holds then is a leak. lua5.4, busted and the
  # programs the specs start need no suppressions.
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
fi
lua5.4 "$(command -v busted)" -o TAP spec >"$log" 2>&1
status=$?
grep -v '^ok ' "$log"
ok=$(grep -c '^ok ' "$log")
notok=$(grep -c '^not ok ' "$log")
echo "busted: $ok passed, $notok failed"
if [ "$status" -ne 0 ] && [ "$notok" -eq 0 ]; then
  echo "busted exited with $status without a failing test: counting it as a failure"
  notok=1
fi
passed=$((passed + ok))
failed=$((failed + notok))
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]

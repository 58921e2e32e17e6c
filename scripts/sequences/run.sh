#!/bin/sh
# run.sh BUILD FROM TO STEPS — the API-sequence campaign (make sequences):
# seeds FROM..TO of reentry.lua and features.lua, each a new state, run by
# lua5.4 against BUILD's module under ASan and UBSan (leaks included). A
# seed fails when the run crashes, a sanitizer reports, or the state does
# not verify; its output is printed with the command that runs it again.
# Ends with "sequences: N passed, N failed" and exits 1 on a failure.
set -u
build=$1 from=$2 to=$3 steps=$4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
eval "$(make -s env BUILD="$build")"
preload="$(gcc -print-file-name=libasan.so) $PWD/$build/lua/runnel/core.so" # kept loaded: leaks name their frames
passed=0 failed=0
for seed in $(seq "$from" "$to"); do
  for script in reentry features; do
    out=$(RUNNEL_SEQ_DIR="$dir" RUNNEL_BIN="$PWD/$build/runnel" LD_PRELOAD="$preload" \
          ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" timeout 300 lua5.4 "scripts/sequences/$script.lua" \
          "$seed" "$steps" 2>&1)
    rc=$?
    if [ $rc -ne 0 ] || printf '%s\n' "$out" | grep -q "VERIFY FAILED\|ERROR: \|runtime error"; then
      failed=$((failed + 1))
      printf '%s\n' "--- $script seed $seed (exit $rc): make sequences SEED=$seed N=1" "$out" | head -80
    else
      passed=$((passed + 1))
    fi
    rm -rf "$dir/s$seed"
  done
done
echo "sequences: $passed passed, $failed failed"
[ $failed -eq 0 ]

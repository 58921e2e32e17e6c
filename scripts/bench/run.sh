#!/bin/sh
# make bench: every benchmark, one figure per line ("name: value"), then
# issue 13's table: each fkjoin path (and fkjoin's LMDB calls alone), the
# example host's ticks, memory and the LMDB file, set against the plain-Lua
# fkjoin of the same run.
# Figures are wall-clock rates on a shared 2-core machine: compare ratios
# within one run, not absolute numbers across runs.
#   FKJOIN=path   use this fkjoin workload instead of generating one
#   CORE_N, CDC_N change the row counts of the core and cdc benchmarks
#   HOST60_TICKS  ticks of 100 changes for the host row at 60 Hz (default 2000)
#   HOST_TICKS    the same, back to back (default 5000)
cd "$(dirname "$0")/../.." || exit 2
BIN=${BIN:-build/runnel}
set -e
echo "# runnel benchmarks ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores)"
$BIN run scripts/bench/core.lua "${CORE_N:-200000}"
$BIN run scripts/bench/cdc.lua "${CDC_N:-200000}"

if [ -z "$FKJOIN" ]; then
  FKJOIN=build/bench/fkjoin.ndjson
  if [ ! -s "$FKJOIN" ]; then
    mkdir -p build/bench
    echo "# generating $FKJOIN (scripts/bench/gen_fkjoin.lua: 10,000 teams, 200,000 players, 1,000,000 changes)"
    lua5.4 scripts/bench/gen_fkjoin.lua "$FKJOIN"
  fi
fi
# The events and checksum known for the two default files, told apart by
# size: this generator's, and ../shared/bench/gen_fkjoin.lua's.
case "$(wc -c < "$FKJOIN")" in
  106631758) KNOWN="2704041 16b33ee21262d724" ;;
  107678935) KNOWN="2708337 da177f34f520fcae" ;;
  *) KNOWN="" ;;
esac

# Figures for the table go to $FIG as "prefix.name: value" too. A failed run
# is said and leaves its figures out (the table prints n/a), so one broken
# path does not hide the others.
FIG=build/bench/figures.txt
mkdir -p build/bench
: > "$FIG"
figures() { # figures PREFIX COMMAND…: runs it, echoes its output, keeps it under PREFIX (- for none)
  prefix=$1
  shift
  out=build/bench/out.txt
  if "$@" > "$out" 2>&1; then status=0; else status=$?; fi
  cat "$out"
  [ "$status" -eq 0 ] || echo "# FAILED (exit $status): $*"
  if [ "$prefix" = - ]; then cat "$out" >> "$FIG"; else sed "s/^/$prefix./" "$out" >> "$FIG"; fi
}
STATE=build/bench/state
echo "# fkjoin on $FKJOIN"
figures - $BIN run scripts/bench/fkjoin_lua.lua "$FKJOIN" # its lines say lua. themselves
echo "# runnel, on = \"team_id\" (declarative: no Lua per row)"
rm -rf "$STATE"
figures decl $BIN run scripts/bench/fkjoin.lua "$FKJOIN" --state="$STATE"
if [ -f "$STATE/data.mdb" ]; then
  awk -v b="$(wc -c < "$STATE/data.mdb")" 'BEGIN { printf "lmdb.file_mib: %.1f\n", b / 1048576 }' >> "$FIG"
  echo "lmdb.inspect: $($BIN inspect "$STATE" 2>&1 | grep -E 'MiB|^space:' | tr '\n' ' ')" >> "$FIG"
  tail -n 2 "$FIG"
fi
rm -rf "$STATE"
echo "# fkjoin's LMDB calls alone, no join work (scripts/bench/fkjoin_floor.c): runnel's layout, then the least any layout must make"
FLOOR=$(dirname "$BIN")/fkjoin_floor
figures floor "$FLOOR" "$FKJOIN" --runnel-layout
figures floormin "$FLOOR" "$FKJOIN" --minimal
echo "# runnel, on = \"team_id\", writemap = true"
figures writemap $BIN run scripts/bench/fkjoin.lua "$FKJOIN" --writemap
echo "# runnel, on = \"team_id\", the file through p:run (parsing included, no Lua per change)"
figures run $BIN run scripts/bench/fkjoin.lua "$FKJOIN" --run
echo "# runnel, --mapper (a Lua mapper and joiner)"
figures mapper $BIN run scripts/bench/fkjoin.lua "$FKJOIN" --mapper
echo "# runnel, --lua-joiner (a Lua mapper, and a joiner that calls a function: Lua runs it per result row)"
figures mapperlua $BIN run scripts/bench/fkjoin.lua "$FKJOIN" --lua-joiner
echo "# the plain-Lua version again: the table sets each path against the mean of its two runs, which"
echo "# bracket them, so a machine that sped up or slowed down during the runnel paths biases no ratio"
$BIN run scripts/bench/fkjoin_lua.lua "$FKJOIN" > build/bench/out.txt 2>&1 || echo "# FAILED: plain Lua, second run"
grep changes_per_s build/bench/out.txt | sed 's/^lua\./lua2./' | tee -a "$FIG"
$BIN run scripts/bench/hot_parent.lua
$BIN run scripts/bench/aggregate.lua "$FKJOIN"
$BIN run scripts/bench/leaderboard.lua "${LEADERBOARD_N:-1000000}"
$BIN run scripts/bench/io.lua "$FKJOIN"
echo "# the example host (scripts/host) at its default 60 Hz: per-tick group latency, sync = false;"
echo "# control: a tick of arithmetic alone in each idle time, timed alike (the machine's own stalls)"
figures host60 env RUNNEL_HOST_CONTROL=1 build/host "${HOST60_TICKS:-2000}" 100 60
echo "# the same, ticks back to back (hz 0: no idle time to commit in)"
figures host build/host "${HOST_TICKS:-5000}" 100 0
echo "# the same, at most 8 ticks per LMDB transaction (carry_groups = 8): smaller spikes"
build/host 1000 100 0 scripts/host/game.lua 8 | grep -E "_ms"
build/host 200 1000 0 | grep -E "_ms|changes per tick"

echo
echo "# issue 13: fkjoin on $FKJOIN; ratios against the plain-Lua version of this run"
# shellcheck disable=SC2086 # KNOWN is two words or none
lua5.4 scripts/bench/table.lua "$FIG" $KNOWN

#!/bin/sh
# make bench: every benchmark, one figure per line ("name: value").
# Figures are wall-clock rates on a shared 2-core machine: compare ratios
# within one run, not absolute numbers across runs.
#   FKJOIN=path   use this fkjoin workload instead of generating one
#   CORE_N, CDC_N change the row counts of the core and cdc benchmarks
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
echo "# fkjoin on $FKJOIN"
$BIN run scripts/bench/fkjoin_lua.lua "$FKJOIN"
echo "# runnel, on = \"team_id\" (declarative: no Lua per row)"
$BIN run scripts/bench/fkjoin.lua "$FKJOIN"
echo "# runnel, on = \"team_id\", writemap = true"
$BIN run scripts/bench/fkjoin.lua "$FKJOIN" --writemap
echo "# runnel, on = \"team_id\", the file through p:run (parsing included, no Lua per change)"
$BIN run scripts/bench/fkjoin.lua "$FKJOIN" --run
echo "# runnel, --mapper (a Lua mapper and joiner)"
$BIN run scripts/bench/fkjoin.lua "$FKJOIN" --mapper
$BIN run scripts/bench/hot_parent.lua
$BIN run scripts/bench/aggregate.lua "$FKJOIN"
$BIN run scripts/bench/leaderboard.lua "${LEADERBOARD_N:-1000000}"
$BIN run scripts/bench/io.lua "$FKJOIN"
echo "# the example host (scripts/host): per-tick group latency, sync = false"
build/host 1000 100 0 | grep -E "_ms|changes per tick"
echo "# the same, at most 8 ticks per LMDB transaction (carry_groups = 8): smaller spikes"
build/host 1000 100 0 scripts/host/game.lua 8 | grep -E "_ms"
build/host 200 1000 0 | grep -E "_ms|changes per tick"

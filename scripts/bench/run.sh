#!/bin/sh
# make bench: every benchmark, one figure per line ("name: value").
# Figures are wall-clock rates on a shared 2-core machine: compare ratios
# within one run, not absolute numbers across runs.
cd "$(dirname "$0")/../.." || exit 2
BIN=${BIN:-build/runnel}
echo "# runnel benchmarks ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores)"
$BIN run scripts/bench/core.lua "${CORE_N:-200000}"
$BIN run scripts/bench/cdc.lua "${CDC_N:-200000}"

#!/usr/bin/env bash
# The headline table on a GPU, in parts that each fit one call of the device tool and
# accumulate across calls and leases into docs/results/gpu-table/<device>/gpu-table.json (a
# bisect-rate results file: `kplace plot` draws the whole table) and its table.md.
#
#   bench/gpu-table.sh [--force] [PART...]    on the GPU machine (device tool: carry
#                                             ["target/gpu-check"], timeout 600 s); PART is
#                                             alone, hog or mps; none: every part this device
#                                             model has not measured yet, in that order, as
#                                             many as fit the call (one, at 470 s each)
#   bench/gpu-table.sh --collect DIR          here, after the call: the parts DIR holds (the
#                                             device tool's files_at, or a results.tar.gz)
#                                             copied into docs/results/gpu-table/<device>/,
#                                             merged, tabled and plotted, for a commit
#
# It is bench/gpu-check.sh's `table` suite: the same preflight, budgets, process groups and
# the same three files in $OUT, the accumulated table in results.tar.gz under table/. A part
# already measured on this device model is skipped, saying when and at which commit, unless
# --force. The parts, their budgets and their worst case: docs/gpu.md.
set -euo pipefail
# DIR as given, from where the script was called.
if [ "${1:-}" = --collect ] && [ $# -eq 2 ] && [ -e "$2" ]; then
    source=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
fi
cd "$(dirname "$0")/.."
usage() {
    echo "usage: bench/gpu-table.sh [--force] [alone|hog|mps ...] | --collect DIR" >&2
    exit 2
}
if [ "${1:-}" = --collect ]; then
    if [ $# -ne 2 ] || [ -z "${source:-}" ]; then usage; fi
    results=${KPLACE_GPU_TABLE_RESULTS:-docs/results/gpu-table}
    kplace=${KPLACE:-target/debug/kplace}
    mapfile -t written < <(python3 bench/gpu-table.py collect "$source" "$results")
    [ "${#written[@]}" -gt 0 ] || exit 1
    for file in "${written[@]}"; do
        "$kplace" plot "$file" --out "$(dirname "$file")" > /dev/null
        echo "gpu-table: $file, $(dirname "$file")/table.md and its plots"
    done
    exit 0
fi
force=0
parts=()
for arg in "$@"; do
    case $arg in
        --force) force=1 ;;
        alone | hog | mps) parts+=("$arg") ;;
        *) usage ;;
    esac
done
export KPLACE_GPU_CHECK_SUITE=table KPLACE_GPU_TABLE_FORCE=$force
if [ "${#parts[@]}" -gt 0 ]; then
    KPLACE_GPU_CHECK_STEPS=$(IFS=,; echo "${parts[*]}")
    export KPLACE_GPU_CHECK_STEPS
fi
exec bench/gpu-check.sh

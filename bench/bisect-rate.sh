#!/usr/bin/env bash
# The sustained-rate results of docs/results/bisect-rate.md, in one call: all-cpu at 1024x128
# and 2048x256, three searches each, with the ingest-only and kernel-only bounds measured
# before and after every search; twice:
#   default/   the defaults: `kplace bisect-rate --placements placements/ ...` (sender spinning
#              to each chirp's deadline, processes wherever the scheduler puts them)
#   two-core/  laid out for a two-core machine: the sender sleeping between 50 us ticks, sender
#              and receiver on core 0, the worker pinned to core 1, 16 slots
#              (bench/placements/all-cpu-two-core.yaml)
# Each writes a table (table.md), JSON, CSV and SVG into OUT/<layout>/.
#   bench/bisect-rate.sh [OUT]   (default target/bench-bisect-rate; about 30 minutes on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-target/bench-bisect-rate}
cargo build --release --workspace >/dev/null
bin=target/release/kplace
cpis=1024x128,2048x256

sweep() {
    local name=$1; shift
    mkdir -p "$out/$name"
    echo "== $name: kplace bisect-rate $*" >&2
    local start=$SECONDS
    "$bin" bisect-rate --cpi "$cpis" --repeat 3 --bounds --out "$out/$name" "$@" \
        | tee "$out/$name/table.md"
    echo "== $name: $((SECONDS - start)) s" >&2
}

sweep default --placements placements/
sweep two-core --placements bench/placements/all-cpu-two-core.yaml \
    --sender-tick-us 50 --sender-cpus 0 --sut-cpus 0

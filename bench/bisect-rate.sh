#!/usr/bin/env bash
# The sustained-rate results of docs/results/bisect-rate.md, in one call: all-cpu at 1024x128
# and 2048x256, three searches each, with the defaults (latency budget `deadline`, the sender
# sleeping between 50 us ticks, slots for 50 ms of stream, steadiness probes around every
# search); per layout:
#   default/   `kplace bisect-rate --placements placements/all-cpu.yaml ...`, processes
#              wherever the scheduler puts them
#   two-core/  laid out for a two-core machine: sender and receiver on core 0, the worker
#              pinned to core 1 (bench/placements/all-cpu-two-core.yaml), with the
#              ingest-only and kernel-only bounds before and after every search
# Each writes a table (table.md), JSON, CSV and the plots into OUT/<layout>/.
#   bench/bisect-rate.sh [OUT [LAYOUT...]]   (default target/bench-bisect-rate, both layouts;
#                                            about 10 minutes each on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-target/bench-bisect-rate}
shift || true
layouts=("$@")
[ ${#layouts[@]} -gt 0 ] || layouts=(default two-core)
cargo build --release --workspace >/dev/null
bin=target/release/kplace
cpis=1024x128,2048x256

sweep() {
    local name=$1; shift
    mkdir -p "$out/$name"
    echo "== $name: kplace bisect-rate $*" >&2
    local start=$SECONDS status=0
    "$bin" bisect-rate --cpi "$cpis" --repeat 3 --out "$out/$name" "$@" \
        > "$out/$name/table.md" || status=$?
    cat "$out/$name/table.md"
    echo "== $name: $((SECONDS - start)) s, exit status $status (docs/bisect-rate.md)" >&2
}

for layout in "${layouts[@]}"; do
    case $layout in
        default) sweep default --placements placements/all-cpu.yaml ;;
        two-core) sweep two-core --placements bench/placements/all-cpu-two-core.yaml \
            --sender-cpus 0 --sut-cpus 0 --bounds ;;
        *) echo "bench/bisect-rate.sh: unknown layout $layout (default, two-core)" >&2; exit 2 ;;
    esac
done

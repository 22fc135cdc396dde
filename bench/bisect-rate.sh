#!/usr/bin/env bash
# The sustained-rate results of docs/results/bisect-rate.md, in one call, every search with
# the defaults (the robust and strict goals, latency budget `deadline`, the sender sleeping
# between 50 us ticks, slots for 50 ms of stream, steadiness probes around every search);
# per layout:
#   default/      all-cpu at 1024x128 and 2048x256, three searches each, with the
#                 ingest-only and kernel-only bounds before and after every search (the
#                 machine's own spread over the same minutes)
#   two-core/     the same laid out for a two-core machine: sender and receiver on core 0,
#                 the worker pinned to core 1 (bench/placements/all-cpu-two-core.yaml)
#   workers/      one worker against two (bench/placements/all-cpu-2w.yaml) at 1024x128,
#                 searched side by side three times: each one's rate and the ratio
#   spectrogram/  the spectrogram graph on two recordings of different frame periods (its
#                 default 20 MS/s, and 5 MS/s: four times the period), every default derived
#                 from the recording
# Each writes a table (table.md), JSON, CSV and the plots into OUT/<layout>/.
#   bench/bisect-rate.sh [OUT [LAYOUT...]]   (default target/bench-bisect-rate, every layout;
#                                            5 to 15 minutes each on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-target/bench-bisect-rate}
shift || true
layouts=("$@")
[ ${#layouts[@]} -gt 0 ] || layouts=(default two-core workers spectrogram)
cargo build --release --workspace >/dev/null
bin=target/release/kplace
cpis=1024x128,2048x256

sweep() { # NAME ARGS...: one bisect-rate run into OUT/NAME
    local name=$1; shift
    mkdir -p "$out/$name"
    echo "== $name: kplace bisect-rate $*" >&2
    local start=$SECONDS status=0
    "$bin" bisect-rate --out "$out/$name" "$@" > "$out/$name/table.md" || status=$?
    cat "$out/$name/table.md"
    echo "== $name: $((SECONDS - start)) s, exit status $status (docs/bisect-rate.md)" >&2
}

spectrogram() { # the spectrogram on a recording at each sample rate
    local dir=$out/spectrogram
    mkdir -p "$dir"
    for rate in 20e6 5e6; do
        "$bin" record --graph workloads/spectrogram/graph.yaml --frames 16 --sample-rate "$rate" \
            --out "$dir/tones-$rate.sigmf-data" >&2
        sweep "spectrogram/$rate" --graph workloads/spectrogram/graph.yaml \
            --placements workloads/spectrogram/placements/cpu.yaml \
            --recording "$dir/tones-$rate.sigmf-data" \
            --check reference:workloads/spectrogram/placements/cpu.yaml
    done
}

for layout in "${layouts[@]}"; do
    case $layout in
        default) sweep default --placements workloads/radar/placements/all-cpu.yaml --cpi "$cpis" --repeat 3 \
            --bounds ;;
        two-core) sweep two-core --placements bench/placements/all-cpu-two-core.yaml \
            --cpi "$cpis" --repeat 3 --sender-cpus 0 --sut-cpus 0 --bounds ;;
        workers) sweep workers \
            --placements workloads/radar/placements/all-cpu.yaml,bench/placements/all-cpu-2w.yaml \
            --cpi 1024x128 --repeat 3 ;;
        spectrogram) spectrogram ;;
        *) echo "bench/bisect-rate.sh: unknown layout $layout (default, two-core, workers, spectrogram)" >&2
            exit 2 ;;
    esac
done

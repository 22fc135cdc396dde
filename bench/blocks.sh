#!/usr/bin/env bash
# The spectrogram written with the block library (workloads/spectrogram/blocks/) against the same
# spectrogram's own C kernels (workloads/spectrogram/), on one recording, replayed, in alternating
# runs of one script: each run's throughput and kernel time per frame, every run checked (the C
# graph's sinks are the golden files of both), and the median ratio blocks / C of the kernel time.
# Compare the ratio, not the times: the machine is shared.
#
#   bench/blocks.sh                 # 1024x128, 100 frames, 3 rounds, target/release/kplace
#   KPLACE=target/debug/kplace SHAPE=256x32 FRAMES=50 ROUNDS=5 bench/blocks.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${KPLACE:-target/release/kplace}
shape=${SHAPE:-1024x128}
frames=${FRAMES:-100}
rounds=${ROUNDS:-3}
[ -x "$bin" ] || { echo "blocks.sh: $bin is missing: cargo build --release first" >&2; exit 2; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

"$bin" record --graph workloads/spectrogram/graph.yaml --cpi "$shape" --frames "$frames" \
    --out "$dir/tones.sigmf-data" >/dev/null
"$bin" run --graph workloads/spectrogram/graph.yaml --cpi "$shape" \
    --placement workloads/spectrogram/placements/cpu.yaml --recording "$dir/tones.sigmf-data" \
    --frames "$frames" --write-sinks "$dir/golden" >/dev/null 2>&1

# One run of graph $1 on placement $2: "<frames/s> <kernel ms per frame>", or a failure.
one() {
    local out
    out=$("$bin" run --graph "$1" --placement "$2" --cpi "$shape" \
        --recording "$dir/tones.sigmf-data" --frames "$frames" --check "golden:$dir/golden" 2>&1)
    grep -q "verification PASSED: $frames/$frames frames reported, $frames passed" <<<"$out" \
        || { echo "blocks.sh: $1 failed its check:" >&2; echo "$out" >&2; exit 1; }
    local rate kernels
    rate=$(sed -n 's/.*throughput \([0-9.]*\) frames\/s.*/\1/p' <<<"$out")
    kernels=$(sed -n 's/.*kernels \([0-9.]*\) ms.*/\1/p' <<<"$out")
    echo "$rate $kernels"
}

echo "spectrogram $shape, $frames frames replayed, $rounds rounds, $(basename "$bin") $(dirname "$bin")"
printf '%-6s %-8s %14s %18s\n' round graph "frames/s" "kernels ms/frame"
ratios=()
for round in $(seq 1 "$rounds"); do
    c=$(one workloads/spectrogram/graph.yaml workloads/spectrogram/placements/cpu.yaml)
    b=$(one workloads/spectrogram/blocks/graph.yaml workloads/spectrogram/blocks/cpu.yaml)
    read -r c_rate c_kernels <<<"$c"
    read -r b_rate b_kernels <<<"$b"
    printf '%-6s %-8s %14s %18s\n' "$round" C "$c_rate" "$c_kernels" "$round" blocks "$b_rate" "$b_kernels"
    ratios+=("$(awk -v b="$b_kernels" -v c="$c_kernels" 'BEGIN { printf "%.3f", b / c }')")
done
median=$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
echo "kernel time blocks / C per round: ${ratios[*]}; median $median"

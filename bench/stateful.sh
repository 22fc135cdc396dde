#!/usr/bin/env bash
# What a stateful stage costs: the filtered beamformer (workloads/beamformer/filtered/) with its
# FIR carrying each channel's history from frame to frame (stateful: the runtime runs it one
# frame at a time, in order) against the same FIR filtering every frame on its own
# (`--set lowpass.stream=false`: nothing carried, frames run concurrently), on one worker and on
# two, replayed as fast as the runtime takes frames, in alternating runs of one script. Every
# run is checked against NumPy (reference.py): the stateful runs against one continuous filter
# of the whole stream, the per-frame runs against a filter of each frame on its own. Reports
# each run's throughput and, per round and worker count, the ratio stateful / per-frame.
# Compare ratios, not rates: the machine is shared.
#
#   bench/stateful.sh                     # R=64 (1024 filtered snapshots a frame), 2000 frames, 5 rounds
#   KPLACE=target/debug/kplace FRAMES=200 ROUNDS=5 PYTHON=python3 bench/stateful.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${KPLACE:-target/release/kplace}
python=${PYTHON:-python3}
frames=${FRAMES:-2000}
rounds=${ROUNDS:-5}
packets=${PACKETS:-64}
graph=workloads/beamformer/filtered/graph.yaml
[ -x "$bin" ] || { echo "stateful.sh: $bin is missing: cargo build --release first" >&2; exit 2; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

"$bin" record --graph "$graph" --set "R=$packets" --frames "$frames" --sample-rate 250e3 \
    --tone 0.02:0.25:-30 --tone -0.05:0.1:14.4775 --tone 0.3:0.5:0 --noise 0.01 \
    --out "$dir/array.sigmf-data" >/dev/null
sed "s/^  R: 4 /  R: $packets /" "$graph" >"$dir/graph.yaml"
cp workloads/beamformer/filtered/lowpass.npy "$dir/"
"$python" workloads/beamformer/filtered/reference.py "$dir/graph.yaml" "$dir/array.sigmf-data" \
    "$dir/stream" >/dev/null
"$python" workloads/beamformer/filtered/reference.py --bursts "$dir/graph.yaml" \
    "$dir/array.sigmf-data" "$dir/frames" >/dev/null

# One run with `workers` workers: stateful ("stream") or not ("frames"); prints frames/s.
one() {
    local mode=$1 workers=$2 out
    local args=(--graph "$graph" --set "R=$packets" --placement workloads/beamformer/filtered/cpu.yaml
        --workers "$workers" --recording "$dir/array.sigmf-data" --frames "$frames"
        --check "golden:$dir/$mode")
    [ "$mode" = stream ] || args+=(--set lowpass.stream=false)
    out=$("$bin" run "${args[@]}" 2>&1)
    grep -q "verification PASSED: $frames/$frames frames reported, $frames passed" <<<"$out" \
        || { echo "stateful.sh: $mode on $workers workers failed its check:" >&2; echo "$out" >&2; exit 1; }
    if [ "$mode" = stream ]; then
        grep -q "lowpass: stateful, 0 frames lost" <<<"$out" \
            || { echo "stateful.sh: the FIR did not run as a stateful stage:" >&2; echo "$out" >&2; exit 1; }
    fi
    sed -n 's/.*throughput \([0-9.]*\) frames\/s.*/\1/p' <<<"$out"
}

echo "filtered beamformer, R=$packets ($((packets * 16)) filtered snapshots of 8 channels a frame), $frames frames replayed, $rounds rounds, $(basename "$bin") $(dirname "$bin"), $(nproc) cores"
printf '%-6s %-8s %12s %12s %10s\n' round workers "stateful/s" "per-frame/s" ratio
declare -A ratios
for round in $(seq 1 "$rounds"); do
    for workers in 1 2; do
        stream=$(one stream "$workers")
        frames_rate=$(one frames "$workers")
        ratio=$(awk -v a="$stream" -v b="$frames_rate" 'BEGIN { printf "%.3f", a / b }')
        ratios[$workers]+="$ratio "
        printf '%-6s %-8s %12s %12s %10s\n' "$round" "$workers" "$stream" "$frames_rate" "$ratio"
    done
done
for workers in 1 2; do
    median=$(tr ' ' '\n' <<<"${ratios[$workers]}" | sed '/^$/d' | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
    echo "stateful / per-frame on $workers worker(s): ${ratios[$workers]}; median $median"
done

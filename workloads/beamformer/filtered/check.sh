#!/usr/bin/env bash
# The filtered beamformer end to end against NumPy: record FRAMES frames of plane waves on the
# 8-channel array (two in band, one above the FIR's cutoff), compute the whole stream at once
# with reference.py, then stream the recording over UDP at its real per-channel rate
# (250 kS/s per channel: a packet every 256 us) into `kplace run` on one worker, then on two,
# each frame checked against NumPy's; then once more on two workers with a packet of three
# frames dropped on the way, against NumPy's filter of the stream with those frames silent:
# the FIR zero-fills what it lost. Passes only if every frame of the first two runs passes, and
# every frame but the three lost of the third, with the three lost counted.
#
# Usage: workloads/beamformer/filtered/check.sh
# Environment: KPLACE, the kplace binary (default target/release/kplace); PYTHON, a python
#              with NumPy (default python3); FRAMES (default 400); OUT, a directory to keep
#              the run reports in (default: a temporary one, removed).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
kplace="${KPLACE:-$root/target/release/kplace}"
python="${PYTHON:-python3}"
frames="${FRAMES:-400}"
graph="$here/graph.yaml"

work="$(mktemp -d)"
receiver_pid=""
cleanup() {
    if [[ -n "$receiver_pid" ]]; then kill "$receiver_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
out="${OUT:-$work}"
mkdir -p "$out"

"$kplace" record --graph "$graph" --frames "$frames" --sample-rate 250e3 \
    --tone 0.02:0.25:-30 --tone -0.05:0.1:14.4775 --tone 0.3:0.5:0 --noise 0.01 \
    --out "$work/array.sigmf-data"
"$python" "$here/reference.py" "$graph" "$work/array.sigmf-data" "$work/numpy"
lost=($((frames / 10)) $((frames / 10 + 1)) $((frames / 2)))
"$python" "$here/reference.py" --lost "$(IFS=,; echo "${lost[*]}")" "$graph" \
    "$work/array.sigmf-data" "$work/numpy-lost"
drops=()
for frame in "${lost[@]}"; do drops+=(--drop "$frame:$((frame % 4))"); done

for run in cpu cpu-2 lossy; do
    placement=$run golden=numpy expect="$frames/$frames frames reported, $frames passed" faults=()
    if [[ $run == lossy ]]; then
        placement=cpu-2 golden=numpy-lost faults=("${drops[@]}")
        expect="$((frames - 3))/$frames frames reported, $((frames - 3)) passed"
    fi
    rm -f "$work/ready.json"
    "$kplace" run --graph "$graph" --placement "$here/$placement.yaml" \
        --recording "$work/array.sigmf-data" --frames "$frames" --check "golden:$work/$golden" \
        --source udp://127.0.0.1:0 --slots 16 --frame-timeout 1000ms --idle-timeout 5s \
        --ready-file "$work/ready.json" --report "$out/run-$run.json" \
        >"$work/run.txt" 2>&1 &
    receiver_pid=$!
    for _ in $(seq 300); do
        [[ -s "$work/ready.json" ]] && break
        kill -0 "$receiver_pid" 2>/dev/null || break
        sleep 0.1
    done
    [[ -s "$work/ready.json" ]] || { cat "$work/run.txt" >&2; exit 1; }
    port="$("$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["sources"][0].rsplit(":", 1)[1])' "$work/ready.json")"
    "$kplace" send --dest "127.0.0.1:$port" --recording "$work/array.sigmf-data" \
        --frames "$frames" "${faults[@]}"
    status=0
    wait "$receiver_pid" || status=$?
    receiver_pid=""
    cat "$work/run.txt"
    # The lossy run fails its verification for the frames lost: what counts is the rest.
    if [[ $run != lossy && $status -ne 0 ]] || ! grep -q "$expect" "$work/run.txt"; then
        echo "check.sh: $run: not every frame matched NumPy (expected: $expect)" >&2
        exit 1
    fi
    if [[ $run == lossy ]] && ! grep -q "lowpass: stateful, 3 frames lost" "$work/run.txt"; then
        echo "check.sh: lossy: the FIR was not told of the three frames lost" >&2
        exit 1
    fi
done
echo "check.sh: $frames frames streamed at 250 kS/s per channel matched NumPy's continuous filter and beams, on one worker and on two, and with three frames lost on the way"

#!/usr/bin/env bash
# End-to-end check of the CuPy radar chain: send SCENE_FRAMES scene frames to radar_cupy.py,
# let it process FRAMES of them closed loop on the GPU, and pass only if `kplace verify`
# accepts its detections and `kplace compare-detections` finds them equal, within 1e-5
# relative power, to kplace's own on the same frames (all-gpu; all-cpu with
# ARRAY_MODULE=numpy). Prints both closed-loop rates.
#
# Without CuPy or a usable GPU it prints `skipped: <reason>` and exits 0, unless
# KPLACE_REQUIRE_GPU=1, where that is a failure (exit 1).
#
# Usage: bench/peers/cupy/test.sh [CPI]   (default 1024x128)
# Environment: KPLACE (default target/release/kplace), KPLACE_LIB_DIR (passed on to kplace),
#   PYTHON (default python3), FRAMES (default 64), WARMUP (default 16), SCENE_FRAMES
#   (default 8), ARRAY_MODULE (cupy, or numpy: the same code on the CPU, compared with
#   all-cpu), KEEP_DIR (keep detections, logs and result.json there instead of a temp dir).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=bench/peers/lib.sh
source "$here/../lib.sh"
repo="$(cd "$here/../../.." && pwd)"
kplace="$(kplace_binary)"
cpi="${1:-1024x128}"
frames="${FRAMES:-64}"
warmup="${WARMUP:-16}"
scene_frames="${SCENE_FRAMES:-8}"
python="${PYTHON:-python3}"
module="${ARRAY_MODULE:-cupy}"

skip() {
    if [[ "${KPLACE_REQUIRE_GPU:-}" == 1 ]]; then
        echo "cupy peer: FAILED: $1 (KPLACE_REQUIRE_GPU=1)" >&2
        exit 1
    fi
    echo "skipped: $1"
    exit 0
}

case "$module" in
    cupy)
        placement=all-gpu
        why="$("$python" -c 'import cupy; n = cupy.cuda.runtime.getDeviceCount(); print("" if n else "CuPy sees no GPU")' 2>&1 | tail -n 1)" \
            || skip "CuPy is not usable with $python: $why"
        [[ -z "$why" ]] || skip "$why"
        ;;
    numpy) placement=all-cpu ;;
    *) echo "cupy peer: ARRAY_MODULE must be cupy or numpy, not $module" >&2; exit 2 ;;
esac

if [[ -n "${KEEP_DIR:-}" ]]; then
    work="$KEEP_DIR"
    mkdir -p "$work"
else
    work="$(mktemp -d)"
fi
peer_pid=""
cleanup() {
    if [[ -n "$peer_pid" ]]; then kill "$peer_pid" 2>/dev/null || true; fi
    if [[ -z "${KEEP_DIR:-}" ]]; then rm -rf "$work"; fi
}
trap cleanup EXIT

# The sending rate: 20 CPI/s, or less where a CPI is large, so that a Python receiver holds
# the stream (about 32 MiB/s of datagrams: 4 CPI/s at 4096x512); the receiver gives up 10 s
# after the last frame is due.
samples="${cpi%x*}"
chirps="${cpi#*x}"
rate=$(( (32 << 20) / (samples * chirps * 4) ))
(( rate > 20 )) && rate=20
(( rate < 1 )) && rate=1
receive_timeout=$(( scene_frames / rate + 10 ))

port="$(free_udp_port "$python")"
: > "$work/peer.log"
"$python" "$here/radar_cupy.py" --port "$port" --cpi "$cpi" --scene-frames "$scene_frames" \
    --frames "$frames" --warmup-frames "$warmup" --array-module "$module" \
    --receive-timeout-s "$receive_timeout" \
    --out "$work/peer.txt" --result "$work/result.json" 2>"$work/peer.log" &
peer_pid=$!
for _ in $(seq 300); do
    grep -q listening "$work/peer.log" && break
    kill -0 "$peer_pid" 2>/dev/null || break
    sleep 0.1
done
grep -q listening "$work/peer.log" || { cat "$work/peer.log" >&2; exit 1; }

# Paced with a 1 ms tick: nothing is lost, and the sender sleeps between bursts.
"$kplace" send --graph "$PEER_GRAPH" --dest "127.0.0.1:$port" --cpi "$cpi" --frames "$scene_frames" \
    --scene-frames "$scene_frames" --rate "$rate" --pacing-tick-us 1000 >"$work/send.log" 2>&1
status=0
wait "$peer_pid" || status=$?
peer_pid=""
cat "$work/peer.log" >&2
[[ $status -eq 0 ]] || { echo "cupy peer: radar_cupy.py exited with status $status" >&2; exit 1; }

"$kplace" verify --graph "$PEER_GRAPH" --detections "$work/peer.txt" --frames "$frames" --cpi "$cpi" \
    --scene-frames "$scene_frames" | tee "$work/verify.txt"
grep -q PASSED "$work/verify.txt"

# kplace on the same frames, and the two compared cell by cell.
(cd "$repo" && "$kplace" run --placement "workloads/radar/placements/$placement.yaml" --cpi "$cpi" \
    --frames "$frames" --warmup-frames "$warmup" --scene-frames "$scene_frames" \
    --detections "$work/kplace.txt" --report "$work/kplace.json") >"$work/kplace.log" 2>&1 \
    || { cat "$work/kplace.log" >&2; echo "cupy peer: kplace run ($placement) failed" >&2; exit 1; }
compare=0
"$kplace" compare-detections "$work/kplace.txt" "$work/peer.txt" --rel-tol 1e-5 \
    --json >"$work/compare.json" || compare=$?
"$kplace" compare-detections "$work/kplace.txt" "$work/peer.txt" --rel-tol 1e-5 | tail -n 1
"$python" - "$work/result.json" "$work/kplace.json" "$placement" <<'PY'
import json, sys
peer, ours = (json.load(open(p)) for p in sys.argv[1:3])
print("closed loop %s: %s %.1f CPI/s, kplace %s %.1f CPI/s" % (
    peer["cpi"], peer["array_module"], peer["throughput_cpi_per_s"], sys.argv[3],
    ours["frames_per_s"]))
PY
[[ $compare -eq 0 ]] || { echo "cupy peer: detections differ from kplace's $placement (compare.json)" >&2; exit 1; }

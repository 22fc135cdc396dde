#!/usr/bin/env bash
# End-to-end check of the NumPy receiver: start it on a free port, pace 40 frames into it
# with `kplace send`, and pass only if `kplace verify` accepts its detections.
#
# Usage: bench/peers/numpy/test.sh [CPI]   (default 1024x128)
# Environment: KPLACE, the kplace binary (default: target/release/kplace of this repository);
#              FRAMES (default 40) and RATE in CPI/s (default 20); SCENE_ARGS, scene options
#              given to both send and verify (e.g. "--high-snr" or "--seed 7"); PYTHON, the
#              python that has requirements.txt installed (default python3; .ci/run passes
#              the project's environment, `scripts/setup.sh --python`); RECEIVER, the
#              receiver to check: receiver.py (default) or tuned.py.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=bench/peers/lib.sh
source "$here/../lib.sh"
kplace="$(kplace_binary)"
cpi="${1:-1024x128}"
frames="${FRAMES:-40}"
rate="${RATE:-20}"
python="${PYTHON:-python3}"
receiver="${RECEIVER:-receiver.py}"
read -r -a scene_args <<<"${SCENE_ARGS:-}"

work="$(mktemp -d)"
receiver_pid=""
cleanup() {
    if [[ -n "$receiver_pid" ]]; then kill "$receiver_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

port="$(free_udp_port "$python")"
detections="$work/detections.txt"

"$python" "$here/$receiver" --port "$port" --frames "$frames" --cpi "$cpi" \
    --out "$detections" 2>"$work/receiver.log" &
receiver_pid=$!

# The receiver announces itself on stderr once its socket is bound.
for _ in $(seq 100); do
    grep -q listening "$work/receiver.log" && break
    sleep 0.1
done
grep -q listening "$work/receiver.log" || { cat "$work/receiver.log" >&2; exit 1; }

# A 1 ms pacing tick: the sender sleeps between bursts instead of spinning on a core that the
# receiver needs (chirps leave up to about 1 ms late, never early).
"$kplace" send --graph "$PEER_GRAPH" --dest "127.0.0.1:$port" --cpi "$cpi" --frames "$frames" --rate "$rate" \
    --pacing-tick-us 1000 "${scene_args[@]}"

# The receiver exits after the last frame, or after its idle timeout if frames were lost.
status=0
wait "$receiver_pid" || status=$?
receiver_pid=""
cat "$work/receiver.log" >&2
if [[ $status -ne 0 ]]; then
    echo "test.sh: the receiver exited with status $status" >&2
fi

"$kplace" verify --graph "$PEER_GRAPH" --detections "$detections" --frames "$frames" --cpi "$cpi" \
    "${scene_args[@]}" | tee "$work/verify.txt"
grep -q PASSED "$work/verify.txt"

#!/usr/bin/env bash
# End-to-end check of the GNU Radio peer: start radar_flowgraph.py on a free UDP port, send it
# FRAMES paced frames with `kplace send`, and pass only if `kplace verify` passes its output.
#
# Environment: KPLACE (the kplace binary; default: target/release/kplace of the repository,
# built by `cargo build --release --workspace`), FRAMES (40), RATE (CPI/s, 10), CPI (1024x128),
# PYTHON (/usr/bin/python3, the interpreter with GNU Radio's bindings).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=bench/peers/lib.sh
source "$here/../lib.sh"
KPLACE="$(kplace_binary)"
export KPLACE_LIB_DIR="${KPLACE_LIB_DIR:-$(dirname "$KPLACE")}"
PYTHON="${PYTHON:-/usr/bin/python3}"
FRAMES="${FRAMES:-40}"
RATE="${RATE:-10}"
CPI="${CPI:-1024x128}"

work="$(mktemp -d)"
trap 'kill "$flowgraph" 2>/dev/null || true; rm -rf "$work"' EXIT
port="$(free_udp_port "$PYTHON")"

"$PYTHON" "$here/radar_flowgraph.py" --port "$port" --frames "$FRAMES" --cpi "$CPI" \
    --out "$work/detections.txt" --idle-timeout 10 2>"$work/flowgraph.log" &
flowgraph=$!

# Wait until the flowgraph listens (GNU Radio takes a few seconds to import).
wait_for_udp_listener "$port" "$flowgraph" "$work/flowgraph.log"

"$KPLACE" send --graph "$PEER_GRAPH" --dest "127.0.0.1:$port" --cpi "$CPI" --frames "$FRAMES" --rate "$RATE"
status=0
wait "$flowgraph" || status=$?
cat "$work/flowgraph.log" >&2
[[ $status -eq 0 ]] || { echo "test.sh: flowgraph exited with status $status" >&2; exit 1; }

"$KPLACE" verify --graph "$PEER_GRAPH" --detections "$work/detections.txt" --frames "$FRAMES" --cpi "$CPI" \
    | tee "$work/verify.txt"
grep -q PASSED "$work/verify.txt"

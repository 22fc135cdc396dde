#!/usr/bin/env bash
# End-to-end check of the C++ GNU Radio peer: build it (build.sh), start it on a free UDP port,
# send it FRAMES paced frames with `kplace send`, and pass only if `kplace verify` passes its
# output, every frame's completion time was written, and its detections are kplace's own
# (`kplace run` on the all-cpu placement, the same frames): the same cells, bin for bin, the
# powers within 1e-5 (the FFTs differ in the last bits).
#
# Environment: KPLACE (the kplace binary; default: target/release/kplace of the repository),
# FRAMES (40), RATE (CPI/s, 20), CPI (1024x128), FLOWGRAPH (a built radar_flowgraph; default:
# build one with build.sh).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=bench/peers/lib.sh
source "$here/../lib.sh"
repo="$(cd "$here/../../.." && pwd)"
KPLACE="$(kplace_binary)"
export KPLACE_LIB_DIR="${KPLACE_LIB_DIR:-$(dirname "$KPLACE")}"
FLOWGRAPH="${FLOWGRAPH:-$("$here/build.sh")}"
FRAMES="${FRAMES:-40}"
RATE="${RATE:-20}"
CPI="${CPI:-1024x128}"

work="$(mktemp -d)"
flowgraph=""
trap '[[ -n "$flowgraph" ]] && kill "$flowgraph" 2>/dev/null; rm -rf "$work"' EXIT
port="$(free_udp_port python3)"

"$FLOWGRAPH" --port "$port" --frames "$FRAMES" --cpi "$CPI" --out "$work/detections.txt" \
    --times "$work/times.csv" --idle-timeout 10 2>"$work/flowgraph.log" &
flowgraph=$!

wait_for_udp_listener "$port" "$flowgraph" "$work/flowgraph.log"

"$KPLACE" send --graph "$PEER_GRAPH" --dest "127.0.0.1:$port" --cpi "$CPI" --frames "$FRAMES" --rate "$RATE"
status=0
timeout 60 tail --pid="$flowgraph" -f /dev/null || true
wait "$flowgraph" || status=$?
flowgraph=""
cat "$work/flowgraph.log" >&2
[[ $status -eq 0 ]] || { echo "test.sh: flowgraph exited with status $status" >&2; exit 1; }
times="$(wc -l < "$work/times.csv")"
[[ "$times" -eq "$FRAMES" ]] || { echo "test.sh: $times completion times for $FRAMES frames" >&2; exit 1; }

"$KPLACE" verify --graph "$PEER_GRAPH" --detections "$work/detections.txt" --frames "$FRAMES" --cpi "$CPI" \
    | tee "$work/verify.txt"
grep -q PASSED "$work/verify.txt"
"$KPLACE" run -q --placement "$repo/workloads/radar/placements/all-cpu.yaml" --cpi "$CPI" --frames "$FRAMES" \
    --detections "$work/kplace.txt" >/dev/null
"$KPLACE" compare-detections --frames "$FRAMES" "$work/kplace.txt" "$work/detections.txt"

#!/usr/bin/env bash
# The main job: install, build, then run the radar graph on the default placement (all-cpu)
# over loopback: `kplace send` paces a generated scene's chirps at the radio's chirp interval
# as UDP packets, `kplace run` receives, processes and verifies every frame, and reports
# latency. Extra arguments go to `kplace run`.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/ready.sh
. scripts/ready.sh
# The CPU demo needs no NVRTC: the GPU library builds without it and loads CUDA at run time.
scripts/setup.sh --cpu
cargo build --release --workspace
bin=target/release/kplace
port=${KPLACE_PORT:-9000}
frames=${KPLACE_FRAMES:-500}
ready=target/demo-ready.json
rm -f "$ready"

$bin plan
# The receiver stops by itself: after its frames, or 2 s after the last packet, or if no
# packet comes within 30 s of its being ready; it ends on Ctrl-C too, with its report.
$bin run --source "udp://127.0.0.1:$port" --cpi 1024x128 --frames "$frames" \
    --start-timeout 30s --ready-file "$ready" --report target/demo-report.json "$@" &
receiver=$!
trap 'kill "$receiver" 2>/dev/null || true' EXIT
# Send only once the receiver is ready: plan, pools and socket made (its ready file exists).
wait_ready "$ready" "$receiver" || { wait "$receiver"; exit 1; }
$bin send --dest "127.0.0.1:$port" --cpi 1024x128 --frames "$frames"
status=0
wait "$receiver" || status=$?
trap - EXIT
echo "report: target/demo-report.json"
exit "$status"

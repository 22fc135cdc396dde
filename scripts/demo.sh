#!/usr/bin/env bash
# The main job: install, build, then run the radar graph on the default placement (all-cpu)
# over loopback: `kplace send` paces a generated scene's chirps at the radio's chirp interval
# as UDP packets, `kplace run` receives, processes and verifies every frame, and reports
# latency. Extra arguments go to `kplace run`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --release --workspace
bin=target/release/kplace
port=${KPLACE_PORT:-9000}
frames=${KPLACE_FRAMES:-500}

$bin plan
$bin run --source "udp://127.0.0.1:$port" --cpi 1024x128 --frames "$frames" \
    --report target/demo-report.json "$@" &
receiver=$!
# Send only once the receiver listens (its UDP port appears in /proc/net/udp).
hex=$(printf '%04X' "$port")
for _ in $(seq 100); do
    grep -qi ":$hex " /proc/net/udp && break
    sleep 0.1
done
$bin send --dest "127.0.0.1:$port" --cpi 1024x128 --frames "$frames"
wait "$receiver"
echo "report: target/demo-report.json"

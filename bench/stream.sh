#!/usr/bin/env bash
# Streaming figures on loopback, all-cpu placement: the receiver's own ceiling (ingest only,
# burst sender) and paced runs at several rates with post-CPI latency and cores used.
# Prints a markdown table; JSON reports stay in target/bench-stream/.
#   bench/stream.sh [CPI:RATE,RATE,...]...   (default 1024x128:156,600,1200 2048x256:39,150,300)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --workspace >/dev/null
bin=target/release/kplace
out=target/bench-stream
mkdir -p "$out"
port=${KPLACE_PORT:-9100}
hex=$(printf '%04X' "$port")

wait_listening() {
    for _ in $(seq 100); do grep -qi ":$hex " /proc/net/udp && return; sleep 0.1; done
    echo "receiver did not start" >&2; exit 1
}

specs=("$@")
[ ${#specs[@]} -gt 0 ] || specs=("1024x128:156,600,1200" "2048x256:39,150,300")

echo "| CPI | mode | offered CPI/s | processed CPI/s | Gbit/s | complete / partial / dropped | post-CPI p50 ms | post-CPI p99.9 ms | cores used | verified |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for spec in "${specs[@]}"; do
    cpi=${spec%%:*}
    rates=${spec#*:}
    frames=2000
    # Ingest only: a burst into the receiver with no processing.
    $bin run --source "udp://127.0.0.1:$port" --cpi "$cpi" --frames $frames --ingest-only \
        --idle-timeout-s 1 --start-timeout-s 60 > "$out/ingest-$cpi.txt" 2>/dev/null &
    receiver=$!
    wait_listening
    $bin send --dest "127.0.0.1:$port" --cpi "$cpi" --frames $frames --burst > /dev/null
    wait "$receiver" || true
    python3 - "$out/ingest-$cpi.txt" "$cpi" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
m = re.search(r"ingest only: (\d+) complete frames in ([\d.]+) s: ([\d.]+) frames/s, ([\d.]+) Gbit/s", text)
c = re.search(r"frames complete (\d+), partial (\d+), dropped (\d+)", text)
print(f"| {sys.argv[2]} | ingest only, burst | burst | {m.group(3)} | {m.group(4)} | {c.group(1)} / {c.group(2)} / {c.group(3)} | | | | |")
PY
    for rate in ${rates//,/ }; do
        n=$(python3 -c "print(max(100, int($rate * 4)))")   # about four seconds of stream
        $bin run --source "udp://127.0.0.1:$port" --cpi "$cpi" --frames "$n" --idle-timeout-s 1 --start-timeout-s 60 \
            --report "$out/run-$cpi-$rate.json" > /dev/null 2>&1 &
        receiver=$!
        wait_listening
        $bin send --dest "127.0.0.1:$port" --cpi "$cpi" --frames "$n" --rate "$rate" > /dev/null
        wait "$receiver" || true
        python3 - "$out/run-$cpi-$rate.json" "$rate" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
l = r["latency"]["post_frame"]
print(f"| {r['frame_shape']} | paced | {sys.argv[2]} | {r['frames_per_s']:.1f} | {r['input_gbit_per_s']:.2f} | "
      f"{r['frames']} / {r['partial_frames']} / {r['dropped_frames']} | {l['p50_ms']:.2f} | {l['p999_ms']:.2f} | "
      f"{r['cores_used']:.2f} | {'yes' if r['verification']['passed'] else 'no'} |")
PY
    done
done

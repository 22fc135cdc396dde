#!/usr/bin/env bash
# bench/soak.sh MINUTES [OUT]: a soak of the UDP receiver and pipeline. `kplace send` paces a
# scene at the radio's physical chirp rate (1024x128: 50 us chirps, 156.25 CPI/s) for MINUTES
# into `kplace run`, which verifies every frame; the receiver's resident memory and CPU time
# are sampled every 10 s from /proc. Writes OUT/soak.json (the samples, the growth after the
# first minute's warm-up, and the run's own report) and OUT/samples.csv, prints a table, and
# exits non-zero if the run fails verification or memory grows after warm-up.
#
# Environment: KPLACE (the binary, default target/release/kplace), SOAK_PORT (19500),
# SOAK_PLACEMENT (placements/all-cpu.yaml), SOAK_SLOTS (frame slots, 16: enough to ride out
# this kind of machine's stalls of tens of milliseconds; the placement's 4 drop a frame on
# each), SOAK_GROWTH_KIB (allowed growth, 1024).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/ready.sh
. scripts/ready.sh
minutes=${1:?usage: bench/soak.sh MINUTES [OUT]}
out=${2:-target/soak}
bin=${KPLACE:-target/release/kplace}
port=${SOAK_PORT:-19500}
placement=${SOAK_PLACEMENT:-placements/all-cpu.yaml}
slots=${SOAK_SLOTS:-16}
growth_kib=${SOAK_GROWTH_KIB:-1024}
interval=10
mkdir -p "$out"
[ -x "$bin" ] || cargo build --release --workspace
# 156.25 CPI/s at 1024x128: 9375 frames a minute.
frames=$((minutes * 9375))
ready="$out/ready.json"
rm -f "$ready" "$out/run.json"

"$bin" run --source "udp://127.0.0.1:$port" --cpi 1024x128 --placement "$placement" --slots "$slots" \
    --frames "$frames" --warmup-frames 200 --start-timeout-s 60 --ready-file "$ready" \
    --report "$out/run.json" >"$out/run.txt" 2>"$out/run.err" &
receiver=$!
trap 'kill "$receiver" "${sender:-}" 2>/dev/null || true' EXIT
wait_ready "$ready" "$receiver" || { cat "$out/run.err" >&2; exit 1; }
"$bin" send --dest "127.0.0.1:$port" --cpi 1024x128 --frames "$frames" >"$out/send.txt" 2>&1 &
sender=$!

ticks=$(getconf CLK_TCK)
echo "t_s,rss_kib,cpu_s" >"$out/samples.csv"
start=$(date +%s)
while kill -0 "$receiver" 2>/dev/null; do
    now=$(date +%s)
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$receiver/status" 2>/dev/null || true)
    # utime and stime: fields 14 and 15 of /proc/PID/stat (after the parenthesised name).
    cpu=$(sed 's/.*) //' "/proc/$receiver/stat" 2>/dev/null | awk -v t="$ticks" '{printf "%.2f", ($12 + $13) / t}' || true)
    [ -n "$rss" ] && echo "$((now - start)),$rss,$cpu" >>"$out/samples.csv"
    sleep "$interval"
done
status=0
wait "$receiver" || status=$?
wait "$sender" || true
trap - EXIT

python3 - "$out" "$minutes" "$growth_kib" "$status" "$slots" <<'PY'
import csv, json, sys
out, minutes, allowed, status, slots = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
rows = [dict(t_s=int(r["t_s"]), rss_kib=int(r["rss_kib"]), cpu_s=float(r["cpu_s"]))
        for r in csv.DictReader(open(f"{out}/samples.csv"))]
for a, b in zip(rows, rows[1:]):
    b["cpu_pct"] = round(100 * (b["cpu_s"] - a["cpu_s"]) / max(b["t_s"] - a["t_s"], 1), 1)
after = [r for r in rows if r["t_s"] >= 60]
base = after[0]["rss_kib"] if after else None
growth = (max(r["rss_kib"] for r in after) - base) if after else None
run = json.load(open(f"{out}/run.json"))
flat = growth is not None and growth <= allowed
passed = status == 0 and run["verification"]["passed"] and flat
report = {"schema": "kplace-soak/1", "minutes": minutes, "slots": slots, "interval_s": 10, "samples": rows,
          "rss_after_warmup_kib": base, "rss_growth_after_warmup_kib": growth,
          "rss_growth_allowed_kib": allowed, "flat": flat, "passed": passed, "run": run}
json.dump(report, open(f"{out}/soak.json", "w"), indent=2)
print("t_s  rss_MiB  cpu_%")
for r in rows:
    print(f"{r['t_s']:4d}  {r['rss_kib'] / 1024:7.1f}  {r.get('cpu_pct', float('nan')):5.1f}")
v = run["verification"]
ing = run["ingest"]
print(f"frames {run['frames']}/{run['frames_expected']}, partial {run['partial_frames']}, dropped {run['dropped_frames']}, "
      f"packets {ing['packets']} (accepted {ing['accepted']}), verification {'PASSED' if v['passed'] else 'FAILED'}")
print(f"RSS after the first minute {base} KiB, growth after it {growth} KiB (allowed {allowed}): {'flat' if flat else 'GROWS'}")
print(f"soak {'PASSED' if passed else 'FAILED'}: {out}/soak.json")
sys.exit(0 if passed else 1)
PY

#!/usr/bin/env bash
# bench/soak.sh MINUTES [OUT]: a soak of the UDP receiver and pipeline. `kplace send` paces a
# scene at the radio's physical chirp rate (1024x128: 50 us chirps, 156.25 CPI/s) for MINUTES
# into `kplace run`, which verifies every frame; the receiver's resident memory and CPU time
# are sampled every 10 s from /proc. Writes OUT/soak.json (the samples, the growth after the
# first minute's warm-up, and the run's own report) and OUT/samples.csv, prints a table, and
# exits non-zero if the run fails verification or memory grows after warm-up.
#
# Beside the run, a stall probe (a thread asking to sleep 1 ms, again and again) records every
# time the machine woke it more than 5 ms late (OUT/stalls.csv), and the run reports its
# progress every second (OUT/progress.jsonl): each second that dropped or cut a frame is
# printed with the longest stall the probe saw around it, and the stalls longer than the
# placement's slots hold are counted.
#
# Environment: KPLACE (the binary, default target/release/kplace), SOAK_PORT (19500),
# SOAK_PLACEMENT (workloads/radar/placements/all-cpu.yaml), SOAK_SLOTS (frame slots; default the placement's
# own), SOAK_GROWTH_KIB (allowed growth, 1024).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/ready.sh
. scripts/ready.sh
minutes=${1:?usage: bench/soak.sh MINUTES [OUT]}
out=${2:-target/soak}
bin=${KPLACE:-target/release/kplace}
port=${SOAK_PORT:-19500}
placement=${SOAK_PLACEMENT:-workloads/radar/placements/all-cpu.yaml}
slots=${SOAK_SLOTS:-}
growth_kib=${SOAK_GROWTH_KIB:-1024}
interval=10
mkdir -p "$out"
[ -x "$bin" ] || cargo build --release --workspace
# 156.25 CPI/s at 1024x128: 9375 frames a minute.
frames=$((minutes * 9375))
ready="$out/ready.json"
rm -f "$ready" "$out/run.json"

slot_args=()
[ -n "$slots" ] && slot_args=(--slots "$slots")
"$bin" run --source "udp://127.0.0.1:$port" --cpi 1024x128 --placement "$placement" "${slot_args[@]}" \
    --frames "$frames" --warmup-frames 200 --start-timeout-s 60 --ready-file "$ready" \
    --report-every 1s --progress-out "$out/progress.jsonl" \
    --report "$out/run.json" >"$out/run.txt" 2>"$out/run.err" &
receiver=$!
# The stall probe: CLOCK_MONOTONIC seconds and how late a 1 ms sleep woke, in ms.
python3 -c '
import sys, time
out = open(sys.argv[1], "w", buffering=1)
out.write("t_s,late_ms\n")
while True:
    before = time.monotonic()
    time.sleep(0.001)
    late = (time.monotonic() - before - 0.001) * 1e3
    if late > 5:
        out.write(f"{before:.3f},{late:.1f}\n")
' "$out/stalls.csv" &
probe=$!
trap 'kill "$receiver" "${sender:-}" "$probe" 2>/dev/null || true' EXIT
wait_ready "$ready" "$receiver" || { cat "$out/run.err" >&2; exit 1; }
run_start=$(python3 -c 'import time; print(f"{time.monotonic():.3f}")')
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
kill "$probe" 2>/dev/null || true
wait "$probe" 2>/dev/null || true
trap - EXIT

python3 - "$out" "$minutes" "$growth_kib" "$status" "$run_start" "$slots" "$placement" <<'PY'
import csv, json, math, re, sys
out, minutes, allowed, status, run_start = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
period_ms = 1e3 / 156.25
if sys.argv[6]:
    slots = int(sys.argv[6])
else:
    # The placement's own: a count, or `auto` (slot_buffer_ms of stream, default 50, 4 to 64).
    text = open(sys.argv[7]).read()
    count = re.search(r"^\s*slots:\s*(\d+)", text, re.M)
    buffer = re.search(r"slot_buffer_ms:\s*([\d.]+)", text)
    slots = int(count.group(1)) if count else min(64, max(4, math.ceil(float(buffer.group(1) if buffer else 50) / period_ms)))
holds_ms = slots * period_ms
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
# The stalls, on the run's clock, and what the slots hold: a stall longer than that drops.
stalls = [(float(r["t_s"]) - run_start, float(r["late_ms"])) for r in csv.DictReader(open(f"{out}/stalls.csv"))]
progress = [json.loads(l) for l in open(f"{out}/progress.jsonl") if l.strip()]
lossy = []
for p in progress:
    if p["interval_dropped_frames"] or p["interval_partial_frames"]:
        lo, hi = p["elapsed_s"] - p["interval_s"] - 1.0, p["elapsed_s"] + 1.0
        near = [late for t, late in stalls if lo <= t <= hi]
        lossy.append({"elapsed_s": round(p["elapsed_s"], 1), "dropped": p["interval_dropped_frames"],
                      "partial": p["interval_partial_frames"], "longest_stall_ms": max(near, default=None)})
def over(ms):
    return sum(1 for _, late in stalls if late > ms)
stall_summary = {"probe": "a 1 ms sleep woken more than 5 ms late", "count": len(stalls),
                 "slots": slots, "slots_hold_ms": round(holds_ms, 1), "over_slots": over(holds_ms),
                 "over_10_ms": over(10), "over_25_ms": over(25), "over_50_ms": over(50), "over_100_ms": over(100),
                 "longest_ms": max((late for _, late in stalls), default=0.0)}
report = {"schema": "kplace-soak/2", "minutes": minutes, "slots": slots, "interval_s": 10, "samples": rows,
          "rss_after_warmup_kib": base, "rss_growth_after_warmup_kib": growth,
          "rss_growth_allowed_kib": allowed, "flat": flat, "passed": passed,
          "stalls": stall_summary, "seconds_with_loss": lossy, "run": run}
json.dump(report, open(f"{out}/soak.json", "w"), indent=2)
print("t_s  rss_MiB  cpu_%")
for r in rows:
    print(f"{r['t_s']:4d}  {r['rss_kib'] / 1024:7.1f}  {r.get('cpu_pct', float('nan')):5.1f}")
v = run["verification"]
ing = run["ingest"]
print(f"frames {run['frames']}/{run['frames_expected']}, partial {run['partial_frames']}, dropped {run['dropped_frames']}, "
      f"packets {ing['packets']} (accepted {ing['accepted']}), verification {'PASSED' if v['passed'] else 'FAILED'}")
print(f"RSS after the first minute {base} KiB, growth after it {growth} KiB (allowed {allowed}): {'flat' if flat else 'GROWS'}")
s = stall_summary
print(f"stalls (a 1 ms sleep woken late): {s['count']} over 5 ms, {s['over_10_ms']} over 10, {s['over_25_ms']} over 25, "
      f"{s['over_50_ms']} over 50, {s['over_100_ms']} over 100; longest {s['longest_ms']:.1f} ms; "
      f"{s['over_slots']} longer than the {slots} slots hold ({holds_ms:.1f} ms of stream)")
for l in lossy:
    st = "none seen" if l["longest_stall_ms"] is None else f"{l['longest_stall_ms']:.1f} ms"
    print(f"  at {l['elapsed_s']:7.1f} s: dropped {l['dropped']}, partial {l['partial']}; longest stall around it {st}")
print(f"soak {'PASSED' if passed else 'FAILED'}: {out}/soak.json")
sys.exit(0 if passed else 1)
PY

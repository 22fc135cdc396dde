#!/usr/bin/env bash
# A co-tenant arriving mid-stream, against fixed placements and a run that adapts
# (`kplace run --adapt`, docs/adapt.md), interleaved: each round streams RATE CPI/s for SECONDS
# into each system in turn, with `kplace hog cpu` (two spinning threads) from AT to AT + FOR
# seconds, every frame verified. Prints a table (frames lost, p99, switches, a stateful
# stage's carry moves) and keeps each run's report in OUT; the last round's adaptive trace is
# drawn with `plot-trace --switches`. The radar by default; another graph with RUN_ARGS (the
# receivers' extra arguments, e.g. "--graph G --recording R --check golden:DIR") and
# SEND_ARGS (the sender's, e.g. "--recording R").
#   bench/adapt.sh [OUT] (environment: KPLACE, RATE, SECONDS_RUN, AT, FOR, ROUNDS, BUDGET,
#   PREFERRED, FALLBACK, RUN_ARGS, SEND_ARGS)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
# shellcheck source=scripts/ready.sh
. scripts/ready.sh
out=${1:-target/adapt-out}
kplace=${KPLACE:-target/release/kplace}
rate=${RATE:-700}
seconds=${SECONDS_RUN:-10}
at=${AT:-3}
for_s=${FOR:-3}
rounds=${ROUNDS:-2}
budget=${BUDGET:-5ms}
preferred=${PREFERRED:-all-cpu}
fallback=${FALLBACK:-all-cpu-pinned}
read -ra run_args <<< "${RUN_ARGS:-}"
read -ra send_args <<< "${SEND_ARGS:-}"
[ -x "$kplace" ] || { echo "adapt: no kplace at $kplace (cargo build --release)" >&2; exit 2; }
mkdir -p "$out"
frames=$((rate * seconds))

# One run: NAME EXTRA_RUN_ARGS...; prints nothing, leaves OUT/NAME.json and NAME.log.
run_one() {
    local name=$1 receiver sender hog port
    shift
    rm -f "$out/$name.ready" "$out/$name.json"
    "$kplace" run --source udp://127.0.0.1:0 --frames "$frames" --ready-file "$out/$name.ready" \
        --report "$out/$name.json" --idle-timeout 5s "${run_args[@]}" "$@" > "$out/$name.log" 2>&1 &
    receiver=$!
    wait_ready "$out/$name.ready" "$receiver" 2>> "$out/$name.log" || { wait "$receiver"; return 1; }
    port=$(python3 -c 'import json, sys
print(json.load(open(sys.argv[1]))["sources"][0].rsplit(":", 1)[1])' "$out/$name.ready")
    "$kplace" send --dest "127.0.0.1:$port" --frames "$frames" --rate "$rate" "${send_args[@]}" \
        > "$out/$name.send.log" 2>&1 &
    sender=$!
    (sleep "$at"; exec "$kplace" hog cpu --threads 2 --duration "${for_s}s") \
        > "$out/$name.hog.jsonl" 2>&1 &
    hog=$!
    wait "$sender"
    wait "$receiver"
    kill "$hog" 2> /dev/null
    wait "$hog" 2> /dev/null
}

for round in $(seq 1 "$rounds"); do
    # Placements given as files are named by their file's stem.
    run_one "r$round-$(basename "$preferred" .yaml)" --placement "$preferred"
    run_one "r$round-$(basename "$fallback" .yaml)" --placement "$fallback"
    trace=()
    [ "$round" = "$rounds" ] && trace=(--trace "$out/adapt.trace.json")
    run_one "r$round-adapt" --placement "$preferred" --adapt "$fallback" --budget "$budget" \
        --adapt-hold 1s "${trace[@]}"
done
"$kplace" plot-trace "$out/adapt.trace.json" --switches --budget "$budget" --out "$out/switches.svg" \
    > /dev/null


python3 - "$out" "$rate" "$frames" "$budget" <<'EOF'
import json, os, sys
out, rate, frames, budget = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
print("| run | frames processed | lost (never reported) | verified | post-frame p99 ms | p99.9 ms | cores | frames per placement | switches | carry moves |")
print("|---|---|---|---|---|---|---|---|---|---|")
for name in sorted(f[:-5] for f in os.listdir(out) if f.endswith(".json") and f.startswith("r")):
    r = json.load(open(os.path.join(out, name + ".json")))
    lat = r["latency"]["post_frame"]
    a = r.get("adaptation") or {}
    moves = [s["carry"].get("moves", 0) for s in r["stages"] if s.get("carry")]
    print("| %s | %d | %d | %s | %.3f | %.3f | %.2f | %s | %s | %s |" % (
        name, r["frames"], frames - r["frames"], "yes" if r["verification"]["passed"] else "no",
        lat["p99_ms"], lat["p999_ms"], r["cores_used"],
        ", ".join("%s %d" % (p, n) for p, n in zip(a.get("placements", []), a.get("frames", []))),
        "; ".join("%.2f s %s" % (s["at_s"], s["reason"]) for s in a.get("switches", [])),
        ", ".join(map(str, moves)) or "-"))
print("\n%s frames/s for %d frames, hog cpu (2 threads) mid-stream, budget %s" % (rate, frames, budget))
EOF

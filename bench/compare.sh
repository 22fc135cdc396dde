#!/usr/bin/env bash
# Peers side by side: kplace's all-cpu placement, a NumPy receiver and a GNU Radio 3.10
# flowgraph, measured by the same sender, verifier and search (`kplace bisect-rate`, the peers
# through --sut-cmd with their completion times), at 1024x128 and 2048x256, on this machine.
# Installs what the peers need (Debian's gnuradio, the NumPy receiver's pip requirements),
# builds kplace, runs every search, then one fixed-rate trial per system at a rate every
# system sustains (for latency at equal load), and writes a table and the plots (`kplace plot`).
#   bench/compare.sh [--quick]      (results in $OUT_DIR, default target/compare;
#                                   COMPARE_REUSE=1 keeps searches already there)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT_DIR:-target/compare}
quick=${1:-}
mkdir -p "$out"

# Installs: kplace's own, then the peers'.
scripts/setup.sh >/dev/null
if ! /usr/bin/python3 -c 'import gnuradio.gr' 2>/dev/null; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "compare: installing gnuradio (Debian)" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq gnuradio >/dev/null
fi
python3 -m pip install --quiet --disable-pip-version-check -r bench/peers/numpy/requirements.txt >&2 \
    || python3 -m pip install --quiet --disable-pip-version-check --break-system-packages \
        -r bench/peers/numpy/requirements.txt >&2
cargo build --release --workspace >&2
kplace=${CARGO_TARGET_DIR:-target}/release/kplace

cpis=(1024x128 2048x256)
[ "$quick" = --quick ] && cpis=(1024x128)
# Every system gets the same search settings: the sender sleeps between ticks so that it
# leaves the cores to the system under test; bisection to 5% (not the default 2%) keeps the
# whole comparison within about 15 minutes.
common=(--sender-tick-us 100 --tolerance 0.05)
numpy_cmd='python3 bench/peers/numpy/receiver.py --port {port} --frames {frames} --cpi {cpi} --out {detections} --times {times}'
# The flowgraph's own idle timeout (10 s by default) would idle out every failed trial; 2 s, as
# the NumPy receiver's, is plenty once the sender has stopped.
gnuradio_cmd='/usr/bin/python3 bench/peers/gnuradio/radar_flowgraph.py --port {port} --frames {frames} --cpi {cpi} --out {detections} --times {times} --idle-timeout 2'

search() { # NAME CPI ARGS...
    local name=$1 cpi=$2
    shift 2
    # COMPARE_REUSE=1 keeps a search already in $out (to resume, or redo only the summary).
    if [ -n "${COMPARE_REUSE:-}" ] && [ -f "$out/$name-$cpi/bisect-rate.json" ]; then
        return
    fi
    echo "compare: $name at $cpi" >&2
    "$kplace" bisect-rate --cpi "$cpi" "${common[@]}" "$@" --out "$out/$name-$cpi" \
        > "$out/$name-$cpi.md" 2> "$out/$name-$cpi.log" || true
}
for cpi in "${cpis[@]}"; do
    search kplace "$cpi" --placements placements/all-cpu.yaml --max-trials 30
    search numpy "$cpi" --sut-cmd "$numpy_cmd" --sut-name numpy --max-trials 30
    search gnuradio "$cpi" --sut-cmd "$gnuradio_cmd" --sut-name gnuradio --max-trials 30
done

# Latency at equal load: one trial per system at 80% of the lowest sustained rate.
for cpi in "${cpis[@]}"; do
    rate=$(python3 - "$out" "$cpi" <<'PY'
import json, sys
out, cpi = sys.argv[1:]
rates = []
for name in ("kplace", "numpy", "gnuradio"):
    try:
        r = json.load(open(f"{out}/{name}-{cpi}/bisect-rate.json"))["searches"][0]["sustained_cpi_per_s"]
        if r:
            rates.append(r)
    except (OSError, KeyError, IndexError, ValueError):
        pass
print(f"{0.8 * min(rates):.1f}" if rates else "")
PY
)
    [ -n "$rate" ] || continue
    one=(--start-rate "$rate" --max-trials 1 --confirm 1)
    search kplace-at "$cpi" --placements placements/all-cpu.yaml "${one[@]}"
    search numpy-at "$cpi" --sut-cmd "$numpy_cmd" --sut-name numpy "${one[@]}"
    search gnuradio-at "$cpi" --sut-cmd "$gnuradio_cmd" --sut-name gnuradio "${one[@]}"
done

python3 - "$out" "${cpis[@]}" <<'PY'
import json, sys
out, cpis = sys.argv[1], sys.argv[2:]
systems = ("kplace", "numpy", "gnuradio")
def result(name, cpi):
    try:
        return json.load(open(f"{out}/{name}-{cpi}/bisect-rate.json"))["searches"][0]
    except (OSError, KeyError, IndexError, ValueError):
        return None
def at_rate(name, cpi):
    """The one trial at the common rate (kplace-bisect-rate/2: its status and post-CPI
    latency are in the results file), and the cores used from its run report."""
    r = result(name + "-at", cpi)
    trial = ((r or {}).get("trials") or [{}])[0]
    latency = trial.get("latency") or {}
    out_row = {"rate": trial.get("rate"), "status": trial.get("status"),
               "p50_ms": latency.get("p50_ms"), "p999_ms": latency.get("p999_ms")}
    if trial.get("report"):
        try:
            rep = json.load(open(f"{out}/{name}-at-{cpi}/{trial['report']}"))
            out_row["cores_used"] = rep.get("cores_used")
        except (OSError, ValueError):
            pass
    return out_row
rows = []
for cpi in cpis:
    base = (result("kplace", cpi) or {}).get("sustained_cpi_per_s")
    for name in systems:
        r = result(name, cpi) or {}
        rate = r.get("sustained_cpi_per_s")
        rows.append({"system": name, "cpi": cpi, "sustained_cpi_per_s": rate,
                     "outcome": r.get("outcome"), "trials": len(r.get("trials", [])),
                     "ratio_to_kplace": (rate / base) if rate and base else None,
                     "at_common_rate": at_rate(name, cpi)})
json.dump(rows, open(f"{out}/compare.json", "w"), indent=1)
print("| system | CPI | sustained CPI/s | ratio to kplace | search | common rate CPI/s | trial there | post-CPI p50 ms | post-CPI p99.9 ms | cores used |")
print("|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    f = lambda v, fmt="%.1f": fmt % v if isinstance(v, (int, float)) else "n/a"
    a = r["at_common_rate"]
    print("| %s | %s | %s | %s | %s trials, %s | %s | %s | %s | %s | %s |" % (
        r["system"], r["cpi"], f(r["sustained_cpi_per_s"]), f(r["ratio_to_kplace"], "%.2f"),
        r["trials"], r["outcome"], f(a.get("rate")), a.get("status") or "n/a", f(a.get("p50_ms"), "%.2f"),
        f(a.get("p999_ms"), "%.2f"), f(a.get("cores_used"), "%.2f")))
PY
# The plots of every search together (latency.svg, sustained.svg, cdf.svg, stages.svg).
results=()
for cpi in "${cpis[@]}"; do
    for name in kplace numpy gnuradio; do
        if [ -f "$out/$name-$cpi/bisect-rate.json" ]; then
            results+=("$out/$name-$cpi/bisect-rate.json")
        fi
    done
done
if [ "${#results[@]}" -gt 0 ]; then
    "$kplace" plot "${results[@]}" --out "$out/plots" >&2
fi
echo "compare: table above; results in $out (compare.json, plots/*.svg, every search's JSON)" >&2

#!/usr/bin/env bash
# Peers side by side, each searched three times: kplace's all-cpu placement; the NumPy
# receiver as a user writes it and tuned as an expert would (NumPy/SciPy); GNU Radio 3.10 as a
# Python flowgraph and with no Python in the streaming path (C++ blocks). The same sender,
# verifier, gates and search for all (`kplace bisect-rate --repeat 3`, the peers through
# --sut-cmd with their completion times for post-CPI latency), at 1024x128 and 2048x256.
# Installs what the peers need (bench/peers/install.sh), builds kplace and the C++ flowgraph,
# runs every search, then one trial per system at a rate every system sustains (latency at
# equal load), and writes the table (compare.md, compare.json) and the plots.
#   bench/compare.sh [--quick]      (results in $OUT_DIR, default target/compare;
#                                   COMPARE_REUSE=1 keeps searches already there;
#                                   REPEAT=N searches per system, default 3;
#                                   SYSTEMS="kplace numpy-tuned ..." a subset)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT_DIR:-target/compare}
quick=${1:-}
repeat=${REPEAT:-3}
read -r -a systems <<<"${SYSTEMS:-kplace numpy numpy-tuned gnuradio gnuradio-cpp}"
mkdir -p "$out"

# Installs: kplace's own, then the peers'; builds.
scripts/setup.sh >/dev/null
python="$(bench/peers/install.sh | tail -n 1)"
cargo build --release --workspace >&2
kplace=${CARGO_TARGET_DIR:-target}/release/kplace
flowgraph="$(bench/peers/gnuradio-cpp/build.sh | tail -n 1)"

cpis=(1024x128 2048x256)
[ "$quick" = --quick ] && cpis=(1024x128)
# Every system gets the same search settings: the sender sleeps between ticks so that it
# leaves the cores to the system under test; a width of 5% (not the default 2%) keeps the
# whole comparison within about an hour. Goals, latency budget and gates are bisect-rate's
# defaults.
common=(--sender-tick-us 100 --width 0.05)
peer_args='--port {port} --frames {frames} --cpi {shape} --out {detections} --times {times}'
# The flowgraphs' own idle timeout (10 s by default) would idle out every failed trial; 2 s, as
# the NumPy receivers', is plenty once the sender has stopped.
sut_cmd() { # SYSTEM
    case "$1" in
        numpy) echo "$python bench/peers/numpy/receiver.py $peer_args" ;;
        numpy-tuned) echo "$python bench/peers/numpy/tuned.py $peer_args" ;;
        gnuradio) echo "/usr/bin/python3 bench/peers/gnuradio/radar_flowgraph.py $peer_args --idle-timeout 2" ;;
        gnuradio-cpp) echo "$flowgraph $peer_args --idle-timeout 2" ;;
        *) echo "compare: unknown system $1" >&2; exit 2 ;;
    esac
}
search() { # NAME SYSTEM CPI ARGS...
    local name=$1 system=$2 cpi=$3
    shift 3
    # COMPARE_REUSE=1 keeps a search already in $out (to resume, or redo only the summary).
    if [ -n "${COMPARE_REUSE:-}" ] && [ -f "$out/$name-$cpi/bisect-rate.json" ]; then
        return
    fi
    local args=()
    if [ "$system" = kplace ]; then
        args=(--placements workloads/radar/placements/all-cpu.yaml)
    else
        args=(--sut-cmd "$(sut_cmd "$system")" --sut-name "$system")
    fi
    echo "compare: $name at $cpi ($(date +%T))" >&2
    "$kplace" bisect-rate --cpi "$cpi" "${common[@]}" "${args[@]}" "$@" --out "$out/$name-$cpi" \
        > "$out/$name-$cpi.md" 2> "$out/$name-$cpi.log" || true
}
for cpi in "${cpis[@]}"; do
    for system in "${systems[@]}"; do
        search "$system" "$system" "$cpi" --repeat "$repeat" --max-trials 30
    done
done

# Latency at equal load: one trial per system at 80% of the lowest median sustained rate.
for cpi in "${cpis[@]}"; do
    rate=$(python3 bench/compare-summary.py --common-rate "$out" "$cpi" "${systems[@]}")
    [ -n "$rate" ] || continue
    for system in "${systems[@]}"; do
        search "$system-at" "$system" "$cpi" --start-rate "$rate" --max-trials 1 --initial-window-s 2
    done
done

python3 bench/compare-summary.py "$out" "${cpis[*]}" "${systems[@]}" | tee "$out/compare.md"
# The plots of every search together (latency.svg, sustained.svg, cdf.svg, stages.svg).
results=()
for cpi in "${cpis[@]}"; do
    for system in "${systems[@]}"; do
        if [ -f "$out/$system-$cpi/bisect-rate.json" ]; then
            results+=("$out/$system-$cpi/bisect-rate.json")
        fi
    done
done
if [ "${#results[@]}" -gt 0 ]; then
    "$kplace" plot "${results[@]}" --out "$out/plots" >&2
fi
echo "compare: table above and in $out/compare.md; compare.json, plots/*.svg, every search's JSON in $out" >&2

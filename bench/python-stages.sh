#!/usr/bin/env bash
# What a kernel written in Python costs, and what the GIL costs with several workers: the
# filtered beamformer with its FIR from the block library (placement cpu) against its twin
# written in Python with NumPy (fir.py, placement python), on one worker and on two, replayed as
# fast as the runtime takes frames, in alternating runs of one script. Every run is checked
# against the C placement on the same recording (--check reference:cpu). Twice over: as a stream
# (the FIR stateful, so one frame at a time whatever the workers) and as bursts
# (--set lowpass.stream=false: nothing carried, frames run concurrently, so two workers run two
# FIRs at once, and two Python FIRs contend for the GIL). Reports each run's throughput and the
# FIR's time per frame, and per round the ratios Python / C and two workers / one.
# Compare ratios, not rates: the machine is shared.
#
#   bench/python-stages.sh              # R=64 (1024 filtered snapshots a frame), 1000 frames, 3 rounds
#   KPLACE=target/debug/kplace FRAMES=200 ROUNDS=1 bench/python-stages.sh
# Environment: KPLACE (default target/release/kplace); KPLACE_PYTHON, the interpreter the Python
# FIR runs in (default: the project's environment, scripts/setup.sh --python, which has NumPy).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${KPLACE:-target/release/kplace}
frames=${FRAMES:-1000}
rounds=${ROUNDS:-3}
packets=${PACKETS:-64}
graph=workloads/beamformer/filtered/graph.yaml
[ -x "$bin" ] || { echo "python-stages.sh: $bin is missing: cargo build --release first" >&2; exit 2; }
export KPLACE_PYTHON="${KPLACE_PYTHON:-$(scripts/setup.sh --python | tail -n 1)}"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

"$bin" record --graph "$graph" --set "R=$packets" --frames "$frames" --sample-rate 250e3 \
    --tone 0.02:0.25:-30 --tone -0.05:0.1:14.4775 --tone 0.3:0.5:0 --noise 0.01 \
    --out "$dir/array.sigmf-data" >/dev/null

# One run: placement, mode (stream or bursts), workers; prints "frames/s FIR-ms-per-frame".
one() {
    local placement=$1 mode=$2 workers=$3 out
    local args=(--graph "$graph" --set "R=$packets" --placement "$placement" --workers "$workers"
        --recording "$dir/array.sigmf-data" --frames "$frames" --check reference:cpu)
    [ "$mode" = stream ] || args+=(--set lowpass.stream=false)
    out=$("$bin" run "${args[@]}" 2>&1)
    grep -q "verification PASSED: $frames/$frames frames reported, $frames passed" <<<"$out" \
        || { echo "python-stages.sh: $placement, $mode, $workers workers failed its check:" >&2; echo "$out" >&2; exit 1; }
    echo "$(sed -n 's/.*throughput \([0-9.]*\) frames\/s.*/\1/p' <<<"$out") $(awk '$1 == "lowpass" && $2 == "cpu" { print $4 }' <<<"$out")"
}

echo "filtered beamformer, R=$packets ($((packets * 16)) filtered snapshots of 8 channels a frame), $frames frames replayed, $rounds rounds, $(basename "$bin") $(dirname "$bin"), Python $("$KPLACE_PYTHON" -c 'import platform, numpy; print(platform.python_version(), "NumPy", numpy.__version__)'), $(nproc) cores"
printf '%-5s %-7s %-7s %12s %12s %9s %9s %9s\n' round mode workers "C frames/s" "Py frames/s" "Py/C" "C FIR ms" "Py FIR ms"
declare -A rate
for round in $(seq 1 "$rounds"); do
    for mode in stream bursts; do
        for workers in 1 2; do
            read -r c c_ms < <(one workloads/beamformer/filtered/cpu.yaml "$mode" "$workers")
            read -r py py_ms < <(one workloads/beamformer/filtered/python.yaml "$mode" "$workers")
            rate[$round,$mode,$workers,c]=$c
            rate[$round,$mode,$workers,py]=$py
            printf '%-5s %-7s %-7s %12s %12s %9s %9s %9s\n' "$round" "$mode" "$workers" "$c" "$py" \
                "$(awk -v a="$py" -v b="$c" 'BEGIN { printf "%.3f", a / b }')" "$c_ms" "$py_ms"
        done
    done
done
echo
echo "two workers / one, per round (the GIL: a Python FIR that scaled as the C one would match it)"
printf '%-5s %-7s %9s %9s\n' round mode C Python
for round in $(seq 1 "$rounds"); do
    for mode in stream bursts; do
        printf '%-5s %-7s %9s %9s\n' "$round" "$mode" \
            "$(awk -v a="${rate[$round,$mode,2,c]}" -v b="${rate[$round,$mode,1,c]}" 'BEGIN { printf "%.3f", a / b }')" \
            "$(awk -v a="${rate[$round,$mode,2,py]}" -v b="${rate[$round,$mode,1,py]}" 'BEGIN { printf "%.3f", a / b }')"
    done
done

#!/usr/bin/env bash
# The results of docs/results/tune.md, in one call:
#   model.md     the model against closed-loop runs on the CPU: every CPU placement (workers 1
#                and 2, slots 1, 2 and 4) predicted from a fresh calibration, then run closed
#                loop in the same process, three rounds alternating the placements
#                (bench/src/bin/tune_model.rs);
#   tune-<CPI>/  `kplace tune --max-rate` at 1024x128 and 2048x256: calibration, every
#                placement predicted (the Pareto front marked), the best three proven by
#                bisect-rate, predicted against measured, the winner written as tuned.yaml.
#   bench/tune.sh [OUT]   (default target/bench-tune; about 15 minutes on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-target/bench-tune}
mkdir -p "$out"
cargo build --release --workspace >/dev/null
export KPLACE_LIB_DIR=$PWD/target/release
echo "== the model against closed-loop runs (tune_model)" >&2
target/release/tune_model --cpi 1024x128,2048x256 --workers 1,2 --slots 1,2,4 --rounds 3 \
    2> "$out/model.log" | tee "$out/model.md"
echo "== kplace tune --max-rate at 1024x128 and 2048x256" >&2
status=0
target/release/kplace tune --graph workloads/radar/graph.yaml --cpi 1024x128,2048x256 --max-rate \
    --recalibrate --calibrations "$out/calibrations" --out "$out" \
    > "$out/tune.md" 2> "$out/tune.log" || status=$?
cat "$out/tune.md"
echo "== exit status $status (docs/tune.md)" >&2

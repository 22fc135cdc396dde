#!/usr/bin/env bash
# The main job: install, build, and run the radar graph on the default placement (all-cpu)
# with a generated scene, every frame verified. Extra arguments go to `kplace run`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --release --workspace
target/release/kplace plan
target/release/kplace run --cpi 1024x128 --frames 500 "$@"

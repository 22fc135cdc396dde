#!/usr/bin/env bash
# Installs what the tests need, checks formatting and lint, builds every crate (the tests load
# the kernel libraries it produces), and runs the whole test suite. Every CUDA C source is
# compiled to PTX for sm_90 by NVRTC (no GPU needed; a compile error fails the suite); GPU
# tests skip, saying why, without a GPU. Last, the GPU check's bundle is run from a copy with
# target/ hidden (bench/gpu-bundle-dry-run.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
nvrtc_lib="$(scripts/setup.sh | tail -n 1)"
export LD_LIBRARY_PATH="${nvrtc_lib}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export KPLACE_REQUIRE_NVRTC=1
# Lint that holds: formatting, then clippy with the workspace's lints (Cargo.toml) and every
# warning an error, before anything is built for the tests.
if command -v rustup >/dev/null; then
    rustup component add rustfmt clippy >/dev/null 2>&1 || true
fi
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
# The libraries' rustdoc: no broken or private link.
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps -p kplace -p kplace-core -p kplace-net -p kplace-report \
    -p kplace-harness -p kplace-lab -p kplace-radar
cargo build --workspace --all-targets
cargo test --workspace
# The GPU check's test executables from a copy of their bundle, with target/ hidden: what the
# GPU machine runs must not depend on this machine's build paths.
bench/gpu-bundle-dry-run.sh

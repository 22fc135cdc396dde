#!/usr/bin/env bash
# Installs what the tests need, builds every crate (the tests load the kernel libraries it
# produces), and runs the whole test suite. Every CUDA C source is compiled to PTX for sm_90
# by NVRTC (no GPU needed; a compile error fails the suite); GPU tests skip, saying why,
# without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
nvrtc_lib="$(scripts/setup.sh | tail -n 1)"
export LD_LIBRARY_PATH="${nvrtc_lib}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export KPLACE_REQUIRE_NVRTC=1
cargo build --workspace --all-targets
cargo test --workspace

#!/usr/bin/env bash
# Installs what the tests need, builds every crate (the tests load the kernel libraries it
# produces), and runs the whole test suite. GPU tests skip, saying why, without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --workspace --all-targets
cargo test --workspace

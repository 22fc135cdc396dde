#!/usr/bin/env bash
# Installs what kplace needs on a Debian or Ubuntu machine that has Rust (cargo) already:
# the FFTW development package, whose static libfftw3f.a the CPU kernel library links.
set -euo pipefail

need=()
[ -f /usr/lib/x86_64-linux-gnu/libfftw3f.a ] || [ -f /usr/lib/aarch64-linux-gnu/libfftw3f.a ] \
    || [ -f /usr/lib/libfftw3f.a ] || need+=(libfftw3-dev)
command -v cc >/dev/null || need+=(gcc)

if [ ${#need[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "setup: installing ${need[*]}" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi
command -v cargo >/dev/null || { echo "setup: cargo not found; install Rust from rustup.rs" >&2; exit 1; }

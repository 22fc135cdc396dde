#!/usr/bin/env bash
# Installs what kplace needs on a Debian or Ubuntu machine that has Rust (cargo) already:
# the FFTW development package, whose static libfftw3f.a the CPU kernel library links, a C and
# C++ compiler (tests build C kernel libraries and run the CUDA C kernels on the host), and
# NVRTC from PyPI (nvidia-cuda-nvrtc 13.0), which compiles the GPU library's CUDA C to PTX
# without a GPU. Prints, as its last line, the directory of libnvrtc.so.13.
set -euo pipefail

need=()
[ -f /usr/lib/x86_64-linux-gnu/libfftw3f.a ] || [ -f /usr/lib/aarch64-linux-gnu/libfftw3f.a ] \
    || [ -f /usr/lib/libfftw3f.a ] || need+=(libfftw3-dev)
command -v cc >/dev/null || need+=(gcc)
command -v c++ >/dev/null || need+=(g++)
command -v python3 >/dev/null || need+=(python3 python3-pip)

if [ ${#need[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "setup: installing ${need[*]}" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi
command -v cargo >/dev/null || { echo "setup: cargo not found; install Rust from rustup.rs" >&2; exit 1; }

# NVRTC 13.0 (the GPU machines' CUDA version: PTX from a newer NVRTC would not load there).
nvrtc_dir() {
    python3 - <<'PY' 2>/dev/null
import importlib.util, os, sys
spec = importlib.util.find_spec("nvidia")
for base in (spec.submodule_search_locations if spec else []):
    lib = os.path.join(base, "cu13", "lib")
    if os.path.exists(os.path.join(lib, "libnvrtc.so.13")):
        print(lib)
        sys.exit(0)
sys.exit(1)
PY
}
if ! nvrtc_dir >/dev/null; then
    echo "setup: installing nvidia-cuda-nvrtc==13.0.48 from PyPI" >&2
    python3 -m pip install --quiet --disable-pip-version-check nvidia-cuda-nvrtc==13.0.48 >&2 \
        || python3 -m pip install --quiet --disable-pip-version-check --break-system-packages \
            nvidia-cuda-nvrtc==13.0.48 >&2
fi
nvrtc_dir || { echo "setup: libnvrtc.so.13 not found after installing the wheel" >&2; exit 1; }

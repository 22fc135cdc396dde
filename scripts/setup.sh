#!/usr/bin/env bash
# Installs what kplace needs on a Debian or Ubuntu machine that has Rust (cargo) already:
# the FFTW development package, whose static libfftw3f.a the CPU kernel library links, a C and
# C++ compiler (tests build C kernel libraries and run the CUDA C kernels on the host), the
# shell linter shellcheck (a test checks every script with it), the DejaVu fonts (the plot
# tests measure rendered text), NumPy and SciPy from PyPI into the project's environment (the
# runnable blocks of docs/*.md check kplace's output with them, and the examples' design.py
# and reference.py use NumPy), and NVRTC from PyPI
# (nvidia-cuda-nvrtc 13.0), which compiles the GPU library's CUDA C to PTX without a GPU.
#
# Usage: scripts/setup.sh            prints, as its last line, the directory of libnvrtc.so.13
#        scripts/setup.sh --python   prints, as its last line, the python of the project's
#                                    environment (for the peers' requirements, .ci/run)
#        scripts/setup.sh --cpu      installs only what building and running on the CPU
#                                    needs (no Python environment, no NVRTC download: the
#                                    CPU demo's)
#
# Nothing is pip-installed into the system Python: packages go into the project's own virtual
# environment, $KPLACE_VENV (default ${XDG_CACHE_HOME:-$HOME/.cache}/kplace/venv), created with
# `python3 -m venv` (on Debian that needs python3-venv, installed here when missing). An NVRTC
# 13.0 that the current python3 already has is used as it is. A second run installs nothing.
set -euo pipefail

mode=nvrtc
case "${1:-}" in
    "") ;;
    --python) mode=python ;;
    --cpu) mode=cpu ;;
    *) echo "usage: scripts/setup.sh [--python|--cpu]" >&2; exit 2 ;;
esac

venv="${KPLACE_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/kplace/venv}"
nvrtc_wheel=nvidia-cuda-nvrtc==13.0.48
# The versions bench/peers/numpy/requirements.txt pins too.
numpy_wheel=numpy==2.4.6
scipy_wheel=scipy==1.17.1

apt_install() {
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "setup: installing $*" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null
}

need=()
[ -f /usr/lib/x86_64-linux-gnu/libfftw3f.a ] || [ -f /usr/lib/aarch64-linux-gnu/libfftw3f.a ] \
    || [ -f /usr/lib/libfftw3f.a ] || need+=(libfftw3-dev)
command -v cc >/dev/null || need+=(gcc)
command -v c++ >/dev/null || need+=(g++)
command -v python3 >/dev/null || need+=(python3 python3-venv)
command -v shellcheck >/dev/null || need+=(shellcheck)
# A font for the plot tests, which render every plot to PNG and measure its text as drawn.
[ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need+=(fonts-dejavu-core)
[ ${#need[@]} -eq 0 ] || apt_install "${need[@]}"
command -v cargo >/dev/null || { echo "setup: cargo not found; install Rust from rustup.rs" >&2; exit 1; }

# The project's environment, with pip in it; made anew when it is missing or broken.
ensure_venv() {
    if "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
        return
    fi
    # Debian and Ubuntu ship ensurepip, which `venv` needs to put pip in, in python3-venv.
    python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || apt_install python3-venv
    echo "setup: creating the Python environment $venv" >&2
    rm -rf "$venv"
    mkdir -p "$(dirname "$venv")"
    python3 -m venv "$venv" >&2 || {
        echo "setup: \`python3 -m venv $venv\` failed (python3 is $(command -v python3))" >&2
        exit 1
    }
}

# The directory holding libnvrtc.so.13 in the packages of python $1.
nvrtc_dir() {
    "$1" - <<'PY' 2>/dev/null
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

# NumPy and SciPy at the pinned versions in the project's environment.
ensure_numpy() {
    ensure_venv
    if "$venv/bin/python" -c "import numpy, scipy, sys; sys.exit(
            (numpy.__version__, scipy.__version__) != ('${numpy_wheel#*==}', '${scipy_wheel#*==}'))" \
            >/dev/null 2>&1; then
        return
    fi
    echo "setup: installing $numpy_wheel and $scipy_wheel from PyPI into $venv" >&2
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        "$numpy_wheel" "$scipy_wheel" >&2
}

if [ "$mode" = cpu ]; then
    exit 0
fi
ensure_numpy
if [ "$mode" = python ]; then
    echo "$venv/bin/python"
    exit 0
fi

# NVRTC 13.0 (the GPU machines' CUDA version: PTX from a newer NVRTC would not load there).
nvrtc_dir python3 && exit 0
nvrtc_dir "$venv/bin/python" && exit 0
ensure_venv
echo "setup: installing $nvrtc_wheel from PyPI into $venv" >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$nvrtc_wheel" >&2
nvrtc_dir "$venv/bin/python" \
    || { echo "setup: libnvrtc.so.13 not found after installing $nvrtc_wheel" >&2; exit 1; }

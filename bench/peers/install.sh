#!/usr/bin/env bash
# Installs what the peers need, on Debian or Ubuntu, after scripts/setup.sh:
# - Debian's GNU Radio 3.10 with its headers and gr-radar (gnuradio, gnuradio-dev, gr-radar,
#   pkg-config), for the Python flowgraph (bench/peers/gnuradio) and the C++ one
#   (bench/peers/gnuradio-cpp, built by its build.sh);
# - the NumPy peers' requirements (bench/peers/numpy/requirements.txt) into the project's
#   virtual environment, never the system Python.
# Prints, as its last line, that environment's python. A second run installs nothing.
#
# Usage: bench/peers/install.sh [--no-gnuradio]
set -euo pipefail
cd "$(dirname "$0")/../.."

gnuradio=yes
case "${1:-}" in
    "") ;;
    --no-gnuradio) gnuradio=no ;;
    *) echo "usage: bench/peers/install.sh [--no-gnuradio]" >&2; exit 2 ;;
esac

if [ "$gnuradio" = yes ]; then
    need=()
    /usr/bin/python3 -c 'import gnuradio.gr' 2>/dev/null || need+=(gnuradio)
    [ -f /usr/include/gnuradio/top_block.h ] || need+=(gnuradio-dev)
    [ -f /usr/include/gnuradio/radar/transpose_matrix_vcvc.h ] || need+=(gr-radar)
    command -v pkg-config >/dev/null || need+=(pkg-config)
    if [ "${#need[@]}" -gt 0 ]; then
        sudo=""
        [ "$(id -u)" -eq 0 ] || sudo="sudo"
        echo "peers: installing ${need[*]} (Debian)" >&2
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
            "${need[@]}" >/dev/null
    fi
fi
python="$(scripts/setup.sh --python | tail -n 1)"
"$python" -m pip install --quiet --disable-pip-version-check -r bench/peers/numpy/requirements.txt >&2
echo "$python"

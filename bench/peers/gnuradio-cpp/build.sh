#!/usr/bin/env bash
# Builds the C++ GNU Radio peer: radar_flowgraph.cc and its two blocks, against Debian's
# gnuradio-dev and gr-radar, into OUT (default target/peers/gnuradio-cpp/radar_flowgraph).
# Prints the binary's path. Needs: apt-get install gnuradio-dev gr-radar g++ pkg-config.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
out="${OUT:-$repo/target/peers/gnuradio-cpp/radar_flowgraph}"
mkdir -p "$(dirname "$out")"
for pc in gnuradio-runtime gnuradio-blocks gnuradio-fft volk; do
    pkg-config --exists "$pc" || {
        echo "build.sh: $pc not found: apt-get install gnuradio-dev gr-radar g++ pkg-config" >&2
        exit 2
    }
done
[[ -f /usr/include/gnuradio/radar/transpose_matrix_vcvc.h ]] || {
    echo "build.sh: gr-radar not found: apt-get install gr-radar" >&2
    exit 2
}
# -O3 -march=native: the blocks' loops vectorised for this machine, as an expert builds.
# gr-radar's headers include <radar/api.h>, hence -I/usr/include/gnuradio.
# shellcheck disable=SC2046
g++ -std=c++17 -O3 -march=native -Wall -Wextra -I/usr/include/gnuradio \
    "$here/radar_flowgraph.cc" "$here/udp_chirp_source.cc" "$here/cacfar_sink.cc" \
    -o "$out" \
    $(pkg-config --cflags --libs gnuradio-runtime gnuradio-blocks gnuradio-fft volk) \
    -lgnuradio-radar -lfmt -lpthread
echo "$out"

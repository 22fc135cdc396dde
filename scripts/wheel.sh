#!/usr/bin/env bash
# Builds kplace's Python wheel (python/: the `kplace` package) with maturin, in one command:
#
#   kplace/_kplace.abi3.so               the extension module (PyO3, the stable ABI: any
#                                        CPython from 3.9)
#   kplace/_install/bin/kplace           the command, run by the `kplace` console script
#   kplace/_install/lib/kplace/lib*.so   its kernel libraries (CPU, GPU, the block library, the
#                                        spectrogram's), found beside the command, and by the
#                                        module through KPLACE_LIB_DIR
#   kplace/_install/share/kplace/        the workloads' graphs and placements (by name:
#                                        Pipeline("beamformer/filtered")), man pages,
#                                        completions
#
# laid out by scripts/install.sh into python/kplace/_install/ (ignored by git) before maturin
# packs the package. The tag is manylinux for the newest glibc symbol version any bundled file
# needs (objdump, from binutils), and the build fails if the module links a library a
# manylinux wheel may not (`--auditwheel check`). maturin comes from
# python/requirements-build.txt, into the project's virtual environment (scripts/setup.sh), never
# the system Python.
#
# Usage: scripts/wheel.sh [OUT_DIR]      (default: target/wheels)
#   prints, as its last line, the wheel's path; then: pip install THAT.whl
#
# It builds the release profile first (`cargo build --release --locked --workspace`).
# KPLACE_BUILD_DIR=DIR bundles what an earlier build left in DIR instead, without building
# it; with target/debug, the module is built with the dev profile too (what CI does, after
# scripts/test.sh has built everything). Debug information is stripped from the module, the
# bundled command and the libraries.
set -euo pipefail
cd "$(dirname "$0")/.."

out="${1:-target/wheels}"
case "$out" in
    /*) ;;
    *) out="$PWD/$out" ;;
esac

python="$(scripts/setup.sh --python | tail -n 1)"
"$python" -m pip install --quiet --disable-pip-version-check -r python/requirements-build.txt >&2

if [ -n "${KPLACE_BUILD_DIR:-}" ]; then
    build="$KPLACE_BUILD_DIR"
else
    cargo build --release --locked --workspace >&2
    build=target/release
fi
case "$(basename "$build")" in
    debug) profile=dev ;;
    *) profile="$(basename "$build")" ;;
esac

stage=python/kplace/_install
rm -rf "$stage"
KPLACE_BUILD_DIR="$build" scripts/install.sh "$stage" >&2
if command -v strip >/dev/null; then
    strip --strip-debug "$stage/bin/kplace" "$stage"/lib/kplace/*.so
fi

# The tag: the newest glibc any bundled file needs (the command and libraries too, which maturin
# does not inspect), so a machine the tag admits runs all of them.
glibc="$(objdump -T "$stage/bin/kplace" "$stage"/lib/kplace/*.so | grep -o 'GLIBC_2\.[0-9]*' |
    sort -uV | tail -n 1)"
compatibility="manylinux_2_${glibc#GLIBC_2.}"

mkdir -p "$out"
rm -f "$out"/kplace-*.whl
PYO3_PYTHON="$python" "$python" -m maturin build --manifest-path python/Cargo.toml \
    --profile "$profile" --locked --strip --compatibility "$compatibility" --auditwheel check \
    --out "$out" >&2
wheel="$(ls "$out"/kplace-*.whl)"
echo "wheel.sh: built $wheel; install it with: pip install $wheel" >&2
echo "$wheel"

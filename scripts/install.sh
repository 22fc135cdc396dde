#!/usr/bin/env bash
# Installs kplace into a prefix, to be run from anywhere:
#
#   PREFIX/bin/kplace                     the command
#   PREFIX/lib/kplace/lib*.so             its kernel libraries (CPU, GPU, the block library,
#                                         the spectrogram's, and the one that runs kernels
#                                         written in Python), found beside the command
#   PREFIX/share/kplace/workloads/        the graphs, placements, recordings' designs and
#                                         checks, found by name (`--graph radar`,
#                                         `--placement all-cpu`)
#   PREFIX/share/man/man1/                kplace(1) and one page per subcommand
#   PREFIX/share/bash-completion/completions/kplace, PREFIX/share/zsh/site-functions/_kplace,
#   PREFIX/share/fish/vendor_completions.d/kplace.fish
#
# Usage: scripts/install.sh [PREFIX]       (default: $HOME/.local)
#
# It builds the release profile first (`cargo build --release --locked`: the lock file's
# versions, nothing re-resolved). KPLACE_BUILD_DIR=DIR installs what an earlier build left in
# DIR (e.g. target/debug) instead, without building. Then:
#   cd / && PREFIX/bin/kplace run --graph radar --frames 20
set -euo pipefail
cd "$(dirname "$0")/.."

prefix="${1:-$HOME/.local}"
case "$prefix" in
    /*) ;;
    *) prefix="$PWD/$prefix" ;;
esac

if [ -n "${KPLACE_BUILD_DIR:-}" ]; then
    build="$KPLACE_BUILD_DIR"
else
    cargo build --release --locked --workspace
    build=target/release
fi
[ -x "$build/kplace" ] || { echo "install.sh: no kplace in $build: build it first" >&2; exit 1; }

libs=(libkplace_cpu.so libkplace_gpu.so libkplace_blocks.so libkplace_blocks_gpu.so libkplace_spectrogram.so
      libkplace_spectrogram_gpu.so libkplace_python.so)
mkdir -p "$prefix/bin" "$prefix/lib/kplace" "$prefix/share/kplace"
install -m 755 "$build/kplace" "$prefix/bin/kplace"
for lib in "${libs[@]}"; do
    [ -f "$build/$lib" ] || { echo "install.sh: $build/$lib is missing" >&2; exit 1; }
    install -m 644 "$build/$lib" "$prefix/lib/kplace/$lib"
done

# The workloads' data files, in their tree: graphs, placements, designs, arrays and checks
# (not the Rust and C sources of their kernels, which are built into the libraries above).
rm -rf "$prefix/share/kplace/workloads"
find workloads -type f \( -name '*.yaml' -o -name '*.npy' -o -name '*.py' -o -name '*.sh' \) \
    -not -path '*/src/*' -not -path '*/tests/*' -print0 |
    while IFS= read -r -d '' file; do
        mode=644
        [ -x "$file" ] && mode=755
        install -D -m "$mode" "$file" "$prefix/share/kplace/$file"
    done

"$prefix/bin/kplace" man "$prefix/share/man/man1" >/dev/null
mkdir -p "$prefix/share/bash-completion/completions" "$prefix/share/zsh/site-functions" \
    "$prefix/share/fish/vendor_completions.d"
"$prefix/bin/kplace" completions bash > "$prefix/share/bash-completion/completions/kplace"
"$prefix/bin/kplace" completions zsh > "$prefix/share/zsh/site-functions/_kplace"
"$prefix/bin/kplace" completions fish > "$prefix/share/fish/vendor_completions.d/kplace.fish"

echo "kplace installed in $prefix: $prefix/bin/kplace, libraries in $prefix/lib/kplace,"
echo "graphs and placements in $prefix/share/kplace/workloads (by name: --graph radar)"

#!/usr/bin/env bash
# Builds, here, everything bench/gpu-check.sh runs on a GPU machine that has no Rust: the
# release `kplace` binary, the copy-rate probe, every kernel library (the radar's CPU and GPU
# libraries, the spectrogram's C and CUDA libraries: the tests load them from lib/, so the GPU
# machine needs no C compiler), and the GPU test executables, without debug info and
# stripped, into target/gpu-check/ (ignored by git; the device tool carries it). Refuses a
# bundle over 40 MiB (the device tool carries 64 MiB in all, the source tree included), and
# prints the device-tool call that runs the check.
#
#   bench/gpu-bundle.sh                  the release bundle, in target/gpu-check
#   bench/gpu-bundle.sh --dev DIR        the same layout from the dev profile (what
#                                        scripts/test.sh built), into DIR: for the dry run
#                                        (bench/gpu-bundle-dry-run.sh), not for a GPU
set -euo pipefail
cd "$(dirname "$0")/.."
bundle=target/gpu-check
limit_mib=40
profile=release
case "${1:-}" in
    "") ;;
    --dev)
        profile=dev
        bundle=${2:?usage: bench/gpu-bundle.sh --dev DIR}
        if [ -e "$bundle" ] && [ -n "$(ls -A "$bundle")" ]; then
            echo "gpu-bundle: $bundle is not empty; name a new directory" >&2
            exit 2
        fi
        ;;
    *) echo "usage: bench/gpu-bundle.sh [--dev DIR]" >&2; exit 2 ;;
esac
if [ "$profile" = release ]; then
    built=${CARGO_TARGET_DIR:-target}/release
    cargo_profile=(--release)
else
    built=${CARGO_TARGET_DIR:-target}/debug
    cargo_profile=()
fi
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/tests"
cargo build "${cargo_profile[@]}" --workspace >&2
cp "$built/kplace" "$built/copy_rate" "$bundle/bin/"
cp "$built/libkplace_cpu.so" "$built/libkplace_gpu.so" "$built/libkplace_spectrogram.so" \
    "$built/libkplace_spectrogram_gpu.so" "$built/libkplace_blocks.so" \
    "$built/libkplace_blocks_gpu.so" "$bundle/lib/"
# Test executables: the GPU library's tests (kernels against rustfft and the CPU library on a
# real device; `gpu` is the one compute-sanitizer checks), the spectrogram's CUDA library on
# a device (bit for bit against its C library), the runtime's real-GPU round trip, GPU hog,
# and GPU sharing (several GPU pipelines, a real MPS daemon). Cargo names them with a
# hash; its JSON messages say which file is which. The host simulation's tests need no GPU and
# stay here.
cargo test "${cargo_profile[@]}" -p kplace-gpu -p kplace-spectrogram-gpu -p kplace-cli --no-run --message-format=json 2>/dev/null |
    python3 -c '
import json, shutil, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") != "compiler-artifact" or not m.get("executable") or not m["profile"]["test"]:
        continue
    manifest, name = m["manifest_path"], m["target"]["name"]
    if manifest.endswith("workloads/radar/kernels/gpu/Cargo.toml") and name != "hostsim":
        pkg = "kplace-gpu"
    elif manifest.endswith("workloads/spectrogram/gpu/Cargo.toml") and name == "gpu":
        pkg = "kplace-spectrogram"
    elif manifest.endswith("cli/Cargo.toml") and name in ("devices", "gpu_sharing", "hog"):
        pkg = "kplace"
    else:
        continue
    dest = sys.argv[1] + "/tests/%s-%s" % (pkg, name)
    shutil.copy(m["executable"], dest)
    print(dest)
' "$bundle" >&2
# Debug info (the release profile keeps line tables) is most of a test executable's size and
# nothing on the GPU machine reads it: strip it, and the symbol tables with it.
strip "$bundle"/bin/* "$bundle"/tests/*
strip --strip-unneeded "$bundle"/lib/*
[ -x "$bundle/tests/kplace-gpu-gpu" ] || { echo "gpu-bundle: the kplace-gpu gpu test executable is missing" >&2; exit 1; }
# The commit it was built from, for the check's summary and the table's parts (the GPU machine
# gets the working tree, not its history); "+uncommitted" when tracked files differ from it.
commit=$(git rev-parse --short=12 HEAD 2> /dev/null || echo unknown)
git diff --quiet HEAD 2> /dev/null || commit+="+uncommitted"
echo "$commit" > "$bundle/commit.txt"
[ "$profile" = release ] || exit 0
size_kib=$(du -sk "$bundle" | cut -f1)
du -sh "$bundle"/* >&2
if [ "$size_kib" -gt $((limit_mib * 1024)) ]; then
    echo "gpu-bundle: $bundle is $((size_kib / 1024)) MiB, over the $limit_mib MiB limit (the device tool carries 64 MiB in all): drop a test executable or shrink a binary" >&2
    exit 1
fi
echo "gpu-bundle: $bundle is $((size_kib / 1024)) MiB (limit $limit_mib MiB), built from $commit. Run the check, or its smoke and pcie steps, and the table's next part on the GPU machine with the device tool (docs/gpu.md):" >&2
echo "  run(command=\"bench/gpu-check.sh\", carry=[\"$bundle\"], timeout_s=600)"
echo "  run(command=\"KPLACE_GPU_CHECK_STEPS=smoke,pcie bench/gpu-check.sh\", carry=[\"$bundle\"], timeout_s=600)"
echo "  run(command=\"bench/gpu-table.sh\", carry=[\"$bundle\"], timeout_s=600)"

#!/usr/bin/env bash
# Builds, here, everything bench/gpu-check.sh runs on a GPU machine that has no Rust: the
# release `kplace` binary, the copy-rate probe, both kernel libraries, and the GPU test
# executables, stripped, into target/gpu-check/ (ignored by git; carry it to the GPU machine).
#   bench/gpu-bundle.sh && ls target/gpu-check
set -euo pipefail
cd "$(dirname "$0")/.."
bundle=target/gpu-check
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/tests"
cargo build --release --workspace >&2
cp target/release/kplace target/release/copy_rate "$bundle/bin/"
cp target/release/libkplace_cpu.so target/release/libkplace_gpu.so "$bundle/lib/"
# Test executables: the GPU library's tests (kernels against rustfft and the CPU library on a
# real device), the runtime's real-GPU round trip, GPU hog, and GPU sharing (several GPU
# pipelines, a real MPS daemon). Cargo names them with a hash; its JSON
# messages say which file is which.
cargo test --release -p kplace-gpu -p kplace --no-run --message-format=json 2>/dev/null |
    python3 -c '
import json, shutil, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") != "compiler-artifact" or not m.get("executable") or not m["profile"]["test"]:
        continue
    manifest, name = m["manifest_path"], m["target"]["name"]
    if manifest.endswith("backends/gpu/Cargo.toml"):
        pkg = "kplace-gpu"
    elif manifest.endswith("runtime/Cargo.toml") and name in ("devices", "gpu_sharing", "hog"):
        pkg = "kplace"
    else:
        continue
    if True:
        dest = "'"$bundle"'/tests/%s-%s" % (pkg, name)
        shutil.copy(m["executable"], dest)
        print(dest)
' >&2
strip --strip-debug "$bundle"/bin/* "$bundle"/lib/* "$bundle"/tests/* 2>/dev/null || true
du -sh "$bundle" >&2

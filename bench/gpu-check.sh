#!/usr/bin/env bash
# The GPU check: on a machine with a GPU (and no Rust), from the repository root, with the
# bundle bench/gpu-bundle.sh built elsewhere in target/gpu-check/:
#   1. `kplace devices`: what the driver reports;
#   2. the GPU tests: the GPU library's kernels against rustfft and the CPU library, and the
#      runtime's real-device round trip (pinned copies, streams, events, host callbacks);
#   3. every placement's detections against the all-cpu placement's, byte for byte, on the test
#      scenes (default and high-SNR) at 1024x128, 2048x256 and 4096x512, each run verified;
#   4. a short paced UDP stream per placement and CPI: processed rate, post-CPI latency, cores;
#   5. the pinned copy rate host->device and back (the PCIe bound), in the same run.
# Prints one markdown table and writes summary.json (and everything else) to $OUT_DIR
# (default target/gpu-check-out; $OUT when the device tool runs it). Exit status 1 when a test
# fails or a GPU placement's detections differ from the CPU's.
#   KPLACE_BUNDLE=target/gpu-check bench/gpu-check.sh [--quick]
set -uo pipefail
cd "$(dirname "$0")/.."
bundle=${KPLACE_BUNDLE:-target/gpu-check}
out=${OUT_DIR:-${OUT:-target/gpu-check-out}}
quick=${1:-}
mkdir -p "$out/runs"
log="$out/log.txt"
: > "$log"

[ -x "$bundle/bin/kplace" ] || { echo "gpu-check: no bundle at $bundle (run bench/gpu-bundle.sh where Rust is)" >&2; exit 2; }
# The CUDA toolkit's libraries (cuFFT, NVRTC and its builtins) may live outside the loader path.
for d in /usr/local/cuda/lib64 /usr/local/cuda-13.0/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -d "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
export KPLACE_LIB_DIR="$bundle/lib"
kplace="$bundle/bin/kplace"
# Carried test executables find the binary and the repository here, not where they were built.
export KPLACE_BIN="$(cd "$bundle" && pwd)/bin/kplace" KPLACE_WORKSPACE="$PWD"

say() { echo "$@" | tee -a "$log" >&2; }

# 1. Devices.
"$kplace" devices 2>&1 | tee -a "$log" >&2
"$kplace" devices --json > "$out/devices.json" 2>>"$log"

# 2. GPU tests (they print "skipped: <reason>" and pass where no device is usable).
tests_json="$out/tests.jsonl"
: > "$tests_json"
for t in "$bundle"/tests/*; do
    name=$(basename "$t")
    filter=()
    [ "$name" = kplace-devices ] && filter=(gpu_round_trip)
    [ "$name" = kplace-hog ] && filter=(gpu_hog_reports_tflops_on_a_real_gpu)
    say "== test $name"
    timeout 600 "$t" --test-threads=1 --nocapture "${filter[@]}" > "$out/runs/test-$name.txt" 2>&1
    rc=$?
    cat "$out/runs/test-$name.txt" >> "$log"
    python3 - "$out/runs/test-$name.txt" "$name" "$rc" >> "$tests_json" <<'PY'
import json, re, sys
text = open(sys.argv[1], errors="replace").read()
m = re.findall(r"test result: \w+\. (\d+) passed; (\d+) failed", text)
passed = sum(int(p) for p, _ in m); failed = sum(int(f) for _, f in m)
print(json.dumps({"test": sys.argv[2], "rc": int(sys.argv[3]), "passed": passed,
                  "failed": failed, "skipped": text.count("skipped:")}))
PY
done

# 3. Detections of every placement against all-cpu, byte for byte.
cpis=(1024x128 2048x256 4096x512)
[ "$quick" = --quick ] && cpis=(1024x128)
placements=(all-cpu all-gpu hybrid gpu-fft)
ident_json="$out/identical.jsonl"
: > "$ident_json"
for cpi in "${cpis[@]}"; do
    for scene in default high-snr; do
        snr=()
        [ "$scene" = high-snr ] && snr=(--high-snr)
        for p in "${placements[@]}"; do
            base="$out/runs/det-$p-$cpi-$scene"
            timeout 300 "$kplace" run --placement "placements/$p.yaml" --cpi "$cpi" "${snr[@]}" \
                --frames 8 --scene-frames 8 --detections "$base.txt" --report "$base.json" --profile-gpu \
                > "$base.log" 2>&1
            rc=$?
            cat "$base.log" >> "$log"
            same=null
            if [ "$p" != all-cpu ]; then
                if [ $rc -eq 0 ] && cmp -s "$base.txt" "$out/runs/det-all-cpu-$cpi-$scene.txt"; then
                    same=true
                else
                    same=false
                fi
            fi
            echo "{\"placement\":\"$p\",\"cpi\":\"$cpi\",\"scene\":\"$scene\",\"rc\":$rc,\"identical_to_cpu\":$same,\"report\":\"$base.json\"}" >> "$ident_json"
            say "detections $p $cpi $scene: rc $rc, identical to all-cpu: $same"
        done
    done
done

# 4. Short paced streams over loopback: post-CPI latency per placement and CPI.
rate_for() { case $1 in 1024x128) echo 500 ;; 2048x256) echo 120 ;; *) echo 30 ;; esac; }
port=9300
stream_json="$out/streams.jsonl"
: > "$stream_json"
for cpi in "${cpis[@]}"; do
    rate=$(rate_for "$cpi")
    frames=$((rate * 3))
    for p in "${placements[@]}"; do
        port=$((port + 1))
        hex=$(printf '%04X' "$port")
        base="$out/runs/stream-$p-$cpi"
        "$kplace" run --placement "placements/$p.yaml" --cpi "$cpi" --source "udp://127.0.0.1:$port" \
            --frames "$frames" --warmup-frames $((rate / 2)) --idle-timeout-s 2 --start-timeout-s 60 \
            --report "$base.json" > "$base.log" 2>&1 &
        receiver=$!
        for _ in $(seq 200); do grep -qi ":$hex " /proc/net/udp && break; sleep 0.05; done
        "$kplace" send --dest "127.0.0.1:$port" --cpi "$cpi" --rate "$rate" --frames "$frames" \
            >> "$base.log" 2>&1
        wait "$receiver"
        rc=$?
        cat "$base.log" >> "$log"
        echo "{\"placement\":\"$p\",\"cpi\":\"$cpi\",\"rate\":$rate,\"rc\":$rc,\"report\":\"$base.json\"}" >> "$stream_json"
        say "stream $p $cpi at $rate CPI/s: rc $rc"
    done
done

# 5. The PCIe bound.
"$bundle/bin/copy_rate" > "$out/copy-rate.jsonl" 2>>"$log"
say "copy rate: rc $?"

# Table and summary.
python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
def lines(name):
    path = os.path.join(out, name)
    return [json.loads(l) for l in open(path) if l.strip()] if os.path.exists(path) else []
devices = json.load(open(os.path.join(out, "devices.json"))) if os.path.getsize(os.path.join(out, "devices.json")) else None
tests, ident, streams, copies = lines("tests.jsonl"), lines("identical.jsonl"), lines("streams.jsonl"), lines("copy-rate.jsonl")
for s in streams:
    try:
        r = json.load(open(s["report"]))
        s.update(processed_cpi_per_s=r["throughput_cpi_per_s"], frames=r["frames"],
                 partial=r["partial_frames"], dropped=r["dropped_frames"],
                 post_cpi_p50_ms=r["latency"]["post_cpi"]["p50_ms"],
                 post_cpi_p99_ms=r["latency"]["post_cpi"]["p99_ms"],
                 cores_used=r["cores_used"], verified=r["verification"]["passed"])
    except Exception as e:  # a run that failed has no report
        s.update(error=str(e))
for d in ident:
    try:
        r = json.load(open(d["report"]))
        d["gpu_ms_per_frame"] = {st["name"]: st.get("gpu_ms_per_frame") for st in r["stages"] if st.get("gpu_ms_per_frame") is not None}
    except Exception:
        d["gpu_ms_per_frame"] = {}
h2d = max((c["gb_per_s"] for c in copies if c["direction"] == "h2d"), default=None)
d2h = max((c["gb_per_s"] for c in copies if c["direction"] == "d2h"), default=None)
summary = {"schema": "kplace-gpu-check/1", "devices": devices, "tests": tests,
           "detections": ident, "streams": streams, "copy_rate": copies,
           "pinned_h2d_gb_per_s": h2d, "pinned_d2h_gb_per_s": d2h}
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1)
md = []
md.append("| test binary | passed | failed | skipped |\n|---|---|---|---|")
md += ["| %s | %d | %d | %d |" % (t["test"], t["passed"], t["failed"], t["skipped"]) for t in tests]
md.append("\n| placement | CPI | scene | run | identical to all-cpu | GPU ms per frame (profiled) |\n|---|---|---|---|---|---|")
md += ["| %s | %s | %s | %s | %s | %s |" % (d["placement"], d["cpi"], d["scene"], "ok" if d["rc"] == 0 else "rc %d" % d["rc"],
        {None: "(reference)", True: "yes", False: "**NO**"}[d["identical_to_cpu"]],
        ", ".join("%s %.3f" % kv for kv in d["gpu_ms_per_frame"].items())) for d in ident]
md.append("\n| placement | CPI | offered CPI/s | processed CPI/s | complete / partial / dropped | post-CPI p50 ms | post-CPI p99 ms | cores used | verified |\n|---|---|---|---|---|---|---|---|---|")
for s in streams:
    if "error" in s:
        md.append("| %s | %s | %d | failed (rc %d) | | | | | |" % (s["placement"], s["cpi"], s["rate"], s["rc"]))
    else:
        md.append("| %s | %s | %d | %.1f | %d / %d / %d | %.3f | %.3f | %.2f | %s |" % (
            s["placement"], s["cpi"], s["rate"], s["processed_cpi_per_s"], s["frames"], s["partial"],
            s["dropped"], s["post_cpi_p50_ms"], s["post_cpi_p99_ms"], s["cores_used"], "yes" if s["verified"] else "**no**"))
md.append("\npinned copy rate (best over sizes): host->device %s GB/s, device->host %s GB/s" % (h2d, d2h))
table = "\n".join(md)
open(os.path.join(out, "table.md"), "w").write(table + "\n")
print(table)
failed = any(t["failed"] or t["rc"] for t in tests) or any(d["identical_to_cpu"] is False for d in ident)
sys.exit(1 if failed else 0)
PY
status=$?
# The device tool brings back at most 8 files: the summary, the table, the log, and the runs.
tar -czf "$out/runs.tar.gz" -C "$out" runs 2>/dev/null && rm -rf "$out/runs"
exit $status

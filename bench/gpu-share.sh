#!/usr/bin/env bash
# The shared-GPU check, on a GPU machine (no Rust needed), from the repository root, with the
# bundle of bench/gpu-bundle.sh in target/gpu-check/. Short paced UDP runs, every frame
# verified, at 2048x256 and 4096x512:
#   1. all-gpu and hybrid alone, then beside a GPU co-tenant (`kplace hog gpu`: SGEMM loop);
#   2. all-gpu with N = 1, 2, 4 pipelines (one process each, one sender each), MPS off and on
#      (a private daemon from `kplace mps start`; each pipeline records whether it really is
#      an MPS client).
# Prints one table and writes share.json to $OUT_DIR (default target/gpu-share-out; $OUT when
# the device tool runs it). Runs take about 3 s each, some 25 runs in all; each sender starts
# once the receiver's --ready-file says every pipeline takes packets. For a longer lease than
# bench/gpu-check.sh's sharing step (which runs a subset of these).
#   KPLACE_BUNDLE=target/gpu-check bench/gpu-share.sh
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
# shellcheck source=scripts/ready.sh
. scripts/ready.sh
bundle=${KPLACE_BUNDLE:-target/gpu-check}
out=${OUT_DIR:-${OUT:-target/gpu-share-out}}
mkdir -p "$out/share-runs"
[ -x "$bundle/bin/kplace" ] || { echo "gpu-share: no bundle at $bundle (run bench/gpu-bundle.sh where Rust is)" >&2; exit 2; }
export KPLACE_LIB_DIR="$bundle/lib"
kplace="$bundle/bin/kplace"
# kplace finds the CUDA libraries itself (docs/gpu.md, "Where the CUDA libraries come from");
# the hog and pipeline processes it starts inherit this, so they load the same files.
libs=$("$kplace" devices --library-path) || { echo "gpu-share: kplace devices --library-path failed" >&2; exit 2; }
[ -n "$libs" ] && export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
runs="$out/share-runs.jsonl"
: > "$runs"
port=9500

rate_for() { case $1 in 2048x256) echo 150 ;; *) echo 40 ;; esac; }

# One paced run: PLACEMENT CPI PIPELINES LABEL COTENANT MPS
run_case() {
    local placement=$1 cpi=$2 n=$3 label=$4 cotenant=$5 mps=$6
    local rate frames base receiver hog=""
    rate=$(rate_for "$cpi")
    frames=$((rate * 3))
    base="$out/share-runs/$label-$placement-$cpi-n$n"
    port=$((port + 10))
    if [ "$cotenant" = gpu-hog ]; then
        "$kplace" hog gpu --size 4096 --duty 1.0 --seconds 60 > "$base.hog.jsonl" 2>&1 &
        hog=$!
        sleep 2
    fi
    rm -f "$base.ready"
    "$kplace" run --placement "workloads/radar/placements/$placement.yaml" --cpi "$cpi" \
        --source "udp://127.0.0.1:$port" --pipelines "$n" --pipeline-mode process \
        --frames "$frames" --warmup-frames $((rate / 2)) --idle-timeout-s 2 --start-timeout-s 60 \
        --ready-file "$base.ready" --report "$base.json" > "$base.log" 2>&1 &
    receiver=$!
    # Senders start once every pipeline takes packets.
    wait_ready "$base.ready" "$receiver" 2>> "$base.log"
    local senders=()
    for i in $(seq 0 $((n - 1))); do
        "$kplace" send --dest "127.0.0.1:$((port + i))" --cpi "$cpi" --rate "$rate" \
            --frames "$frames" >> "$base.log" 2>&1 &
        senders+=($!)
    done
    wait "${senders[@]}"
    wait "$receiver"
    local rc=$?
    if [ -n "$hog" ]; then kill -TERM "$hog" 2>/dev/null; wait "$hog" 2>/dev/null; fi
    echo "{\"label\":\"$label\",\"placement\":\"$placement\",\"cpi\":\"$cpi\",\"pipelines\":$n,\"rate_per_pipeline\":$rate,\"cotenant\":\"$cotenant\",\"mps\":\"$mps\",\"rc\":$rc,\"report\":\"$base.json\",\"hog\":\"$base.hog.jsonl\"}" >> "$runs"
    echo "share: $label $placement $cpi x$n (cotenant $cotenant, mps $mps): rc $rc" >&2
}

for cpi in 2048x256 4096x512; do
    for placement in all-gpu hybrid; do
        run_case "$placement" "$cpi" 1 alone none off
        run_case "$placement" "$cpi" 1 cotenant gpu-hog off
    done
done
for mps in off on; do
    if [ "$mps" = on ]; then
        mpsdir=$(mktemp -d /tmp/kplace-share-mps.XXXXXX)
        "$kplace" mps start --dir "$mpsdir" >> "$out/mps.log" 2>&1 \
            || echo "share: mps start failed (see mps.log)" >&2
        "$kplace" mps status --dir "$mpsdir" >> "$out/mps.log" 2>&1
        # Clients find the daemon through its pipe directory; each pipeline's report says
        # whether it really became a client.
        export CUDA_MPS_PIPE_DIRECTORY="$mpsdir/pipe" CUDA_MPS_LOG_DIRECTORY="$mpsdir/log"
    fi
    for cpi in 2048x256 4096x512; do
        for n in 1 2 4; do
            run_case all-gpu "$cpi" "$n" "mps-$mps" none "$mps"
        done
    done
    if [ "$mps" = on ]; then
        "$kplace" mps stop --dir "$mpsdir" >> "$out/mps.log" 2>&1
        unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    fi
done

python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
rows = [json.loads(l) for l in open(os.path.join(out, "share-runs.jsonl")) if l.strip()]
for r in rows:
    try:
        rep = json.load(open(r["report"]))
        pipes = rep.get("pipelines", [rep])
        agg = rep.get("aggregate", {})
        r["aggregate_cpi_per_s"] = agg.get("frames_per_s", rep.get("frames_per_s"))
        r["all_passed"] = agg.get("all_passed", rep.get("verification", {}).get("passed"))
        r["worst_p99_ms"] = agg.get("worst_post_frame_p99_ms", rep.get("latency", {}).get("post_frame", {}).get("p99_ms"))
        r["dropped"] = agg.get("dropped_frames", rep.get("dropped_frames"))
        r["mps_clients"] = [p.get("mps", {}).get("is_client") for p in pipes]
        r["gpu_util_mean_pct"] = [d.get("gpu_util_mean_pct") for p in pipes for d in p.get("gpu_telemetry", {}).get("devices", [])][:1]
    except Exception as e:
        r["error"] = str(e)
    try:
        lines = [json.loads(l) for l in open(r["hog"]) if l.strip().startswith("{")]
        r["hog_tflops"] = lines[-1].get("tflops") if lines else None
    except Exception:
        r["hog_tflops"] = None
json.dump(rows, open(os.path.join(out, "share.json"), "w"), indent=1)
print("| case | placement | CPI | pipelines | offered per pipeline | aggregate CPI/s | all verified | worst post-CPI p99 ms | dropped | MPS client (per pipeline) | hog TFLOP/s |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    fmt = lambda v, f="%.1f": (f % v) if isinstance(v, (int, float)) else str(v)
    print("| %s | %s | %s | %d | %d | %s | %s | %s | %s | %s | %s |" % (
        r["label"], r["placement"], r["cpi"], r["pipelines"], r["rate_per_pipeline"],
        fmt(r.get("aggregate_cpi_per_s")), r.get("all_passed", r.get("error")),
        fmt(r.get("worst_p99_ms"), "%.3f"), r.get("dropped"), r.get("mps_clients"),
        fmt(r.get("hog_tflops"))))
PY
tar -czf "$out/share-runs.tar.gz" -C "$out" share-runs 2>/dev/null && rm -rf "$out/share-runs"

#!/usr/bin/env bash
# The GPU check, in one call of at most about 7 minutes, on a machine with a GPU and no Rust:
# from the repository root, with the bundle of bench/gpu-bundle.sh in target/gpu-check/.
#
#   bench/gpu-check.sh          (the device tool: carry ["target/gpu-check"], bounded 600 s)
#
# Steps, each under its own bounded (budgets in seconds; they sum to 530 s, under 9.5 min,
# and the whole call is expected to take 4 to 7 minutes):
#   1. preflight  15  driver and devices (`kplace devices --json`), each CUDA library and its
#                     version, rmem_max, MPS programs, compute-sanitizer, python3 and CuPy;
#                     stops the call at once, exit 1, when the GPU path cannot run (no driver,
#                     no device, cuFFT or NVRTC missing), saying exactly what is missing;
#   2. tests     130  the bundle's GPU test executables, KPLACE_REQUIRE_GPU=1 (a skip fails);
#   3. memcheck   70  compute-sanitizer --tool memcheck on the GPU kernel tests (kplace-gpu's
#                     `gpu` test binary); skipped, saying why, if the tool refuses the device;
#   4. replay    150  closed-loop replay runs of every placement (all-cpu, cfar-gpu, gpu-fft,
#                     hybrid, all-gpu) at 1024x128 and 4096x512, default and high-SNR scenes,
#                     then all-cpu and all-gpu at 8192x1024: warm-up frames, the same scene
#                     frames for every placement, --profile-gpu; each GPU placement's
#                     detections compared with all-cpu's by `kplace compare-detections` (bins
#                     exact, power within 1e-5 relative; cfar-gpu bit-identical, --exact);
#   5. streams    45  paced UDP streams of all-gpu and hybrid at 1024x128 and 4096x512, each
#                     sender started once the receiver's --ready-file says ready, every frame
#                     verified;
#   6. copies     20  pinned copy rates host to device, device to host and both at once, as a
#                     fraction of the PCIe link's nominal rate (`copy_rate --pcie GEN,WIDTH`);
#   7. tune       30  `kplace tune` at 1024x128 predicting only: the calibration of both
#                     devices (kernel times, bus, host costs) and every placement's prediction;
#   8. share      60  all-gpu at 2048x256 alone, beside the GPU hog, and 2 pipelines (one
#                     process each) with MPS off and on (bench/gpu-share.sh does more);
#   9. cupy       40  the CuPy peer (bench/peers/cupy) on the same frames as kplace's all-gpu:
#                     closed-loop rates side by side, detections compared.
#
# $OUT (the device tool's; else $OUT_DIR, else target/gpu-check-out) receives exactly three
# files, rewritten after every step, so a call killed midway still returns what was measured:
# summary.json (schema kplace-gpu-check/2), table.md, and results.tar.gz (every log, report,
# detections file and comparison, from a scratch directory outside $OUT). Exit status 0 when
# every step passed, 1 when the preflight stopped the call, a test failed, a run failed or a
# GPU placement's detections differ from all-cpu's, 2 without a bundle.
# The step_* functions run indirectly, as "step_$2", which shellcheck cannot follow.
# shellcheck disable=SC2317
set -uo pipefail
self="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
cd "$(dirname "$self")/.." || exit 2
summarizer=$PWD/bench/gpu-check-summary.py
# shellcheck source-path=SCRIPTDIR/..
. scripts/ready.sh

STEPS=(preflight tests memcheck replay streams copies tune share cupy)

budget_of() {
    case $1 in
        preflight) echo 15 ;;
        tests) echo 130 ;;
        memcheck) echo 70 ;;
        replay) echo 150 ;;
        streams) echo 45 ;;
        copies) echo 20 ;;
        tune) echo 30 ;;
        share) echo 60 ;;
        cupy) echo 40 ;;
    esac
}

title_of() {
    case $1 in
        preflight) echo "preflight: driver, devices, CUDA libraries, tools" ;;
        tests) echo "GPU test executables (KPLACE_REQUIRE_GPU=1)" ;;
        memcheck) echo "compute-sanitizer memcheck of the GPU kernel tests" ;;
        replay) echo "replay runs of every placement, detections against all-cpu" ;;
        streams) echo "UDP streams of all-gpu and hybrid" ;;
        copies) echo "pinned copy rates against the PCIe link" ;;
        tune) echo "kplace tune's calibration and predictions, CPU and GPU" ;;
        share) echo "sharing: alone, beside the GPU hog, MPS off and on" ;;
        cupy) echo "the CuPy peer beside kplace's all-gpu" ;;
    esac
}

# An inner time limit that stays in the step's process group, so that the step's own timeout
# ends it with everything else the step started.
bounded() { timeout --foreground "$@"; }

log() { echo "gpu-check: $*" >&2; }

# One JSON line for a results file: key=value pairs, values given as JSON already.
jsonl() {
    local file=$1 sep="" line="{" kv
    shift
    for kv in "$@"; do
        line+="$sep\"${kv%%=*}\":${kv#*=}"
        sep=","
    done
    echo "$line}" >> "$file"
}
str() { printf '"%s"' "$1"; }

# ---------------------------------------------------------------------------------------------
# Steps. Each runs as `gpu-check.sh --step NAME` under `timeout` (which signals its whole
# process group), reads GC_* from the environment and appends to $GC_SCRATCH/results/NAME.jsonl.

step_preflight() {
    local d=$GC_SCRATCH/preflight
    mkdir -p "$d"
    bounded 10 "$GC_KPLACE" devices --json > "$d/devices.json" 2> "$d/devices.err"
    echo $? > "$d/devices.rc"
    bounded 10 "$GC_KPLACE" devices --library-path > "$d/library_path.txt" 2> "$d/library_path.err"
    echo $? > "$d/library_path.rc"
    bounded 10 nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.max,pcie.link.width.max,pcie.link.gen.current,pcie.link.width.current,memory.total \
        --format=csv,noheader > "$d/nvidia-smi.txt" 2>&1
    cat /proc/sys/net/core/rmem_max > "$d/rmem_max.txt" 2>/dev/null
    local tool
    for tool in nvidia-cuda-mps-control nvidia-cuda-mps-server compute-sanitizer ncu nvcc python3; do
        command -v "$tool" >> "$d/tools.txt" 2>/dev/null || echo "$tool: not found" >> "$d/tools.txt"
    done
    bounded 10 compute-sanitizer --version > "$d/compute-sanitizer.txt" 2>&1
    bounded 20 python3 -c 'import cupy; print(cupy.__version__, cupy.cuda.runtime.getDeviceCount())' \
        > "$d/cupy.txt" 2>&1
    python3 "$GC_SUMMARIZER" preflight "$GC_SCRATCH"
}

# The bundle's GPU test executables; each binary under its own timeout.
step_tests() {
    export KPLACE_REQUIRE_GPU=1
    local t name rc start filter
    for t in "$GC_BUNDLE"/tests/*; do
        name=$(basename "$t")
        filter=()
        [ "$name" = kplace-devices ] && filter=(gpu_round_trip)
        [ "$name" = kplace-hog ] && filter=(gpu_hog_reports_tflops_on_a_real_gpu)
        log "test $name"
        start=$SECONDS
        bounded -k 5 60 "$t" --test-threads=1 --nocapture "${filter[@]}" \
            > "$GC_SCRATCH/logs/test-$name.txt" 2>&1
        rc=$?
        jsonl "$GC_SCRATCH/results/tests.jsonl" "test=$(str "$name")" "rc=$rc" \
            "seconds=$((SECONDS - start))" "log=$(str "logs/test-$name.txt")"
    done
}

step_memcheck() {
    export KPLACE_REQUIRE_GPU=1
    local bin=$GC_BUNDLE/tests/kplace-gpu-gpu out=$GC_SCRATCH/logs/memcheck.txt rc
    if ! command -v compute-sanitizer > /dev/null; then
        jsonl "$GC_SCRATCH/results/memcheck.jsonl" 'status="skipped"' 'reason="compute-sanitizer not found"'
        return 0
    fi
    if [ ! -x "$bin" ]; then
        jsonl "$GC_SCRATCH/results/memcheck.jsonl" 'status="failed"' "reason=$(str "no $bin in the bundle")"
        return 1
    fi
    bounded -k 5 65 compute-sanitizer --tool memcheck --error-exitcode 86 --print-limit 50 \
        "$bin" --test-threads=1 > "$out" 2>&1
    rc=$?
    jsonl "$GC_SCRATCH/results/memcheck.jsonl" 'status="ran"' "rc=$rc" 'log="logs/memcheck.txt"'
}

# One replay run: PLACEMENT CPI SCENE FRAMES WARMUP SCENE_FRAMES; then, for a GPU placement,
# its detections against all-cpu's on the same frames.
replay_run() {
    local p=$1 cpi=$2 scene=$3 frames=$4 warmup=$5 scene_frames=$6 snr=() rc start
    local base=replay/$p-$cpi-$scene
    [ "$scene" = high-snr ] && snr=(--high-snr)
    start=$SECONDS
    bounded -k 5 60 "$GC_KPLACE" run --placement "placements/$p.yaml" --cpi "$cpi" "${snr[@]}" \
        --frames "$frames" --warmup-frames "$warmup" --scene-frames "$scene_frames" \
        --profile-gpu --detections "$GC_SCRATCH/$base.txt" --report "$GC_SCRATCH/$base.json" \
        > "$GC_SCRATCH/$base.log" 2>&1
    rc=$?
    local seconds=$((SECONDS - start)) crc=null rule=null
    local reference=replay/all-cpu-$cpi-$scene.txt
    if [ "$rc" -eq 0 ] && [ "$p" != all-cpu ] && [ -f "$GC_SCRATCH/$reference" ]; then
        local how=(--rel-tol 1e-5)
        rule='"rel 1e-5"'
        if [ "$p" = cfar-gpu ]; then how=(--exact); rule='"exact"'; fi
        bounded 30 "$GC_KPLACE" compare-detections "$GC_SCRATCH/$reference" "$GC_SCRATCH/$base.txt" \
            "${how[@]}" --frames "$frames" --json > "$GC_SCRATCH/$base.compare.json" 2> "$GC_SCRATCH/$base.compare.err"
        crc=$?
    fi
    jsonl "$GC_SCRATCH/results/replay.jsonl" "placement=$(str "$p")" "cpi=$(str "$cpi")" \
        "scene=$(str "$scene")" "frames=$frames" "warmup=$warmup" "scene_frames=$scene_frames" \
        "rc=$rc" "seconds=$seconds" "base=$(str "$base")" "compare_rc=$crc" "rule=$rule"
    log "replay $p $cpi $scene: rc $rc in ${seconds}s, compare rc $crc"
}

step_replay() {
    mkdir -p "$GC_SCRATCH/replay"
    local cpi scene p
    # Frames per CPI: a closed-loop second or so of the slowest placement, after warm-up.
    for cpi in 1024x128 4096x512; do
        for scene in default high-snr; do
            for p in all-cpu cfar-gpu gpu-fft hybrid all-gpu; do
                case $cpi in
                    1024x128) replay_run "$p" "$cpi" "$scene" 96 32 8 ;;
                    *) replay_run "$p" "$cpi" "$scene" 24 8 8 ;;
                esac
            done
        done
    done
    for p in all-cpu all-gpu; do
        replay_run "$p" 8192x1024 default 12 4 4
    done
    spectrogram_run
}

# The spectrogram (graphs/spectrogram.yaml) on its CUDA library, replaying a synthesized
# recording, every frame's spectrum checked against the C library's (a run that fails the check
# exits 1).
spectrogram_run() {
    local base=replay/spectrogram-gpu-1024x128 rc start
    start=$SECONDS
    bounded 30 "$GC_KPLACE" record --graph graphs/spectrogram.yaml --frames 8 \
        --out "$GC_SCRATCH/replay/tones.sigmf-data" > "$GC_SCRATCH/$base.log" 2>&1
    bounded -k 5 60 "$GC_KPLACE" run --graph graphs/spectrogram.yaml \
        --placement graphs/spectrogram/placements/gpu.yaml --recording "$GC_SCRATCH/replay/tones.sigmf-data" \
        --check reference:graphs/spectrogram/placements/cpu.yaml --frames 200 --warmup-frames 40 \
        --profile-gpu --report "$GC_SCRATCH/$base.json" >> "$GC_SCRATCH/$base.log" 2>&1
    rc=$?
    jsonl "$GC_SCRATCH/results/replay.jsonl" "placement=$(str spectrogram-gpu)" "cpi=$(str 1024x128)" \
        "scene=$(str recording)" "frames=200" "warmup=40" "scene_frames=8" "rc=$rc" \
        "seconds=$((SECONDS - start))" "base=$(str "$base")" "compare_rc=null" "rule=null"
    log "replay spectrogram-gpu 1024x128: rc $rc (checked against the C library) in $((SECONDS - start))s"
}

# Starts `kplace run` on UDP port 0 with ARGS..., waits for its ready file, and sets
# `receiver` (its pid) and `ports` (one per pipeline). BASE names its files.
start_receiver() {
    local base=$1
    shift
    rm -f "$GC_SCRATCH/$base.ready"
    "$GC_KPLACE" run --source udp://127.0.0.1:0 --ready-file "$GC_SCRATCH/$base.ready" \
        --idle-timeout-s 2 --start-timeout-s 20 --report "$GC_SCRATCH/$base.json" "$@" \
        > "$GC_SCRATCH/$base.log" 2>&1 &
    receiver=$!
    wait_ready "$GC_SCRATCH/$base.ready" "$receiver" 2>> "$GC_SCRATCH/$base.log" || return 1
    mapfile -t ports < <(python3 -c 'import json, sys
for s in json.load(open(sys.argv[1]))["sources"]: print(s.rsplit(":", 1)[1])' "$GC_SCRATCH/$base.ready")
}

# One paced stream: BASE CPI RATE SECONDS EXTRA_RUN_ARGS...; every pipeline gets its sender.
stream_case() {
    local base=$1 cpi=$2 rate=$3 seconds=$4 rc=1 i
    shift 4
    local frames=$((rate * seconds)) warmup=$((rate / 4 + 1))
    local receiver ports=() senders=()
    if start_receiver "$base" --cpi "$cpi" --frames "$frames" --warmup-frames "$warmup" \
        --scene-frames 8 "$@"; then
        for i in "${!ports[@]}"; do
            bounded $((seconds + 20)) "$GC_KPLACE" send --dest "127.0.0.1:${ports[$i]}" --cpi "$cpi" \
                --rate "$rate" --frames "$frames" --scene-frames 8 >> "$GC_SCRATCH/$base.send.log" 2>&1 &
            senders+=($!)
        done
        wait "${senders[@]}"
        wait "$receiver"
        rc=$?
    else
        kill "$receiver" 2> /dev/null
        wait "$receiver" 2> /dev/null
    fi
    echo "$rc"
}

step_streams() {
    mkdir -p "$GC_SCRATCH/streams"
    local cpi p rate rc
    for cpi in 1024x128 4096x512; do
        # Offered rates well above the physical CPI rate (156 and 9.8 CPI/s) and within what
        # the sender paces on one core.
        case $cpi in 1024x128) rate=400 ;; *) rate=30 ;; esac
        for p in all-gpu hybrid; do
            rc=$(stream_case "streams/$p-$cpi" "$cpi" "$rate" 2 --placement "placements/$p.yaml")
            jsonl "$GC_SCRATCH/results/streams.jsonl" "placement=$(str "$p")" "cpi=$(str "$cpi")" \
                "rate=$rate" "rc=$rc" "base=$(str "streams/$p-$cpi")"
            log "stream $p $cpi at $rate CPI/s: rc $rc"
        done
    done
}

step_copies() {
    local link gen width pcie=()
    link=$(bounded 10 nvidia-smi --query-gpu=pcie.link.gen.max,pcie.link.width.max --format=csv,noheader 2> /dev/null | head -n 1)
    gen=$(echo "$link" | cut -d, -f1 | tr -d ' ')
    width=$(echo "$link" | cut -d, -f2 | tr -d ' ')
    if [[ "$gen" =~ ^[0-9]+$ && "$width" =~ ^[0-9]+$ ]]; then
        pcie=(--pcie "$gen,$width")
    else
        log "no PCIe link from nvidia-smi ($link): rates without their nominal fraction"
    fi
    bounded -k 5 15 "$GC_BUNDLE/bin/copy_rate" --sizes 1048576,8388608,67108864 --seconds 0.3 \
        "${pcie[@]}" > "$GC_SCRATCH/results/copies.jsonl" 2> "$GC_SCRATCH/logs/copies.txt"
}

# The tune model on both devices: calibrated here, every placement predicted, none proven
# (bisect-rate searches take minutes); tune.txt and calibration.json go into results.tar.gz.
step_tune() {
    mkdir -p "$GC_SCRATCH/tune"
    bounded -k 5 25 "$GC_KPLACE" tune --cpi 1024x128 --prove 0 --calibrate-s 0.5 \
        --calibrations "$GC_SCRATCH/tune/calibrations" --out "$GC_SCRATCH/tune" \
        > "$GC_SCRATCH/logs/tune.txt" 2>&1
}

step_share() {
    mkdir -p "$GC_SCRATCH/share"
    local rc hog mpsdir
    rc=$(stream_case share/alone 2048x256 150 2 --placement placements/all-gpu.yaml)
    jsonl "$GC_SCRATCH/results/share.jsonl" 'case="alone"' 'pipelines=1' "rc=$rc" 'base="share/alone"'
    bounded 40 "$GC_KPLACE" hog gpu --size 4096 --duty 1.0 --seconds 30 > "$GC_SCRATCH/share/hog.jsonl" 2>&1 &
    hog=$!
    sleep 2
    rc=$(stream_case share/hog 2048x256 150 2 --placement placements/all-gpu.yaml)
    kill -TERM "$hog" 2> /dev/null
    wait "$hog" 2> /dev/null
    jsonl "$GC_SCRATCH/results/share.jsonl" 'case="beside the GPU hog"' 'pipelines=1' "rc=$rc" \
        'base="share/hog"' 'hog="share/hog.jsonl"'
    rc=$(stream_case share/mps-off 2048x256 150 2 --placement placements/all-gpu.yaml \
        --pipelines 2 --pipeline-mode process)
    jsonl "$GC_SCRATCH/results/share.jsonl" 'case="MPS off"' 'pipelines=2' "rc=$rc" 'base="share/mps-off"'
    mpsdir=$GC_SCRATCH/mps
    if bounded 20 "$GC_KPLACE" mps start --dir "$mpsdir" > "$GC_SCRATCH/share/mps.log" 2>&1; then
        export CUDA_MPS_PIPE_DIRECTORY="$mpsdir/pipe" CUDA_MPS_LOG_DIRECTORY="$mpsdir/log"
        rc=$(stream_case share/mps-on 2048x256 150 2 --placement placements/all-gpu.yaml \
            --pipelines 2 --pipeline-mode process)
        unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
        bounded 15 "$GC_KPLACE" mps stop --dir "$mpsdir" >> "$GC_SCRATCH/share/mps.log" 2>&1
        jsonl "$GC_SCRATCH/results/share.jsonl" 'case="MPS on"' 'pipelines=2' "rc=$rc" 'base="share/mps-on"'
    else
        jsonl "$GC_SCRATCH/results/share.jsonl" 'case="MPS on"' 'pipelines=2' 'rc=null' \
            'error="kplace mps start failed (share/mps.log)"'
    fi
}

step_cupy() {
    export KPLACE_REQUIRE_GPU=1
    local cpi rc frames warmup
    for cpi in 1024x128 4096x512; do
        case $cpi in 1024x128) frames=200 warmup=40 ;; *) frames=40 warmup=8 ;; esac
        KEEP_DIR="$GC_SCRATCH/cupy/$cpi" KPLACE="$GC_KPLACE" FRAMES=$frames WARMUP=$warmup \
            bounded -k 5 18 bench/peers/cupy/test.sh "$cpi" > "$GC_SCRATCH/logs/cupy-$cpi.txt" 2>&1
        rc=$?
        jsonl "$GC_SCRATCH/results/cupy.jsonl" "cpi=$(str "$cpi")" "rc=$rc" "dir=$(str "cupy/$cpi")"
        log "cupy peer $cpi: rc $rc"
    done
}

if [ "${1:-}" = --step ]; then
    "step_$2"
    exit $?
fi

# ---------------------------------------------------------------------------------------------
# The call.

bundle=${KPLACE_BUNDLE:-target/gpu-check}
out=${OUT:-${OUT_DIR:-target/gpu-check-out}}
mkdir -p "$out" || exit 2
# The summary when nothing else can write one: STATUS REASON.
bare_summary() {
    printf '{"schema": "kplace-gpu-check/2", "status": "%s", "reason": "%s"}\n' "$1" "$2" > "$out/summary.json"
    printf '# kplace GPU check\n\n**%s**: %s\n' "$1" "$2" > "$out/table.md"
}
if [ ! -x "$bundle/bin/kplace" ]; then
    bare_summary stopped "no bundle at $bundle (run bench/gpu-bundle.sh where Rust is, and carry target/gpu-check)"
    log "no bundle at $bundle (run bench/gpu-bundle.sh where Rust is)"
    exit 2
fi
if ! command -v python3 > /dev/null; then
    bare_summary stopped "python3 not found: the check needs it for its summary"
    log "python3 not found"
    exit 1
fi
scratch=$(mktemp -d "${TMPDIR:-/tmp}/kplace-gpu-check.XXXXXX") || exit 2
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/results" "$scratch/logs"
abs_bundle=$(cd "$bundle" && pwd)
export GC_SCRATCH=$scratch GC_SUMMARIZER=$summarizer GC_BUNDLE=$abs_bundle GC_KPLACE=$abs_bundle/bin/kplace
export KPLACE_LIB_DIR=$abs_bundle/lib KPLACE_BIN=$abs_bundle/bin/kplace KPLACE_WORKSPACE=$PWD

# Rewrites the three files in $OUT from the scratch directory.
publish() {
    python3 "$summarizer" summary "$scratch" "$out" 2>> "$scratch/logs/summarize.txt" \
        || bare_summary error "the summary could not be written (logs/summarize.txt in results.tar.gz)"
    tar -czf "$scratch/results.tar.gz" -C "$scratch" --exclude results.tar.gz --exclude mps . 2> /dev/null
    cp "$scratch/results.tar.gz" "$out/results.tar.gz"
}

started=$SECONDS
for i in "${!STEPS[@]}"; do
    name=${STEPS[$i]}
    budget=$(budget_of "$name")
    log "== step $((i + 1))/${#STEPS[@]}: $(title_of "$name") (budget $budget s)"
    jsonl "$scratch/steps.jsonl" "step=$(str "$name")" "budget_s=$budget" 'rc=null' 'seconds=null'
    t0=$SECONDS
    timeout -k 5 "$budget" "$self" --step "$name" 2>&1 | tee "$scratch/logs/step-$name.txt" >&2
    rc=${PIPESTATUS[0]}
    # The step's line, now with its outcome (the last line for a step wins).
    jsonl "$scratch/steps.jsonl" "step=$(str "$name")" "budget_s=$budget" "rc=$rc" "seconds=$((SECONDS - t0))"
    if [ "$name" = share ] && [ -d "$scratch/mps" ]; then
        # A share step killed with MPS on leaves its daemon: stop it.
        bounded 15 "$KPLACE_BIN" mps stop --dir "$scratch/mps" >> "$scratch/logs/step-share.txt" 2>&1
    fi
    if [ "$name" = preflight ]; then
        if [ "$rc" -ne 0 ]; then
            publish
            log "stopped after the preflight: $(python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("reason"))' "$out/summary.json")"
            cat "$out/table.md" >&2
            exit 1
        fi
        # The CUDA user-space libraries kplace found, for programs that look on the loader path
        # (compute-sanitizer, the test executables' own dlopen of cuFFT and NVRTC).
        libpath=$(cat "$scratch/preflight/library_path.txt" 2> /dev/null)
        [ -n "$libpath" ] && export LD_LIBRARY_PATH="$libpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    fi
    publish
done
log "done in $((SECONDS - started)) s"
cat "$out/table.md" >&2
python3 -c 'import json, sys; sys.exit(0 if json.load(open(sys.argv[1]))["status"] == "passed" else 1)' "$out/summary.json"

#!/usr/bin/env bash
# The GPU check, in one call of the device tool, on a machine with a GPU and no Rust: from the
# repository root, with the bundle of bench/gpu-bundle.sh in target/gpu-check/.
#
#   bench/gpu-check.sh          (the device tool: carry ["target/gpu-check"], timeout 600 s)
#   bench/gpu-table.sh [PART]   (the headline table's parts: this script's `table` suite)
#
# Fourteen steps, each under its own budget (seconds; docs/gpu.md has the table), in this order:
#   1. preflight  60  driver and devices (`kplace devices --json`, timed cold and warm: the
#                     first CUDA context a process pays), each CUDA library and its version,
#                     nvidia-smi (PCIe link, persistence mode), rmem_max, the driver's tools;
#                     stops the call, exit 1, when the GPU path cannot run, saying what is
#                     missing;
#   2. smoke     120  every GPU path once, each with its verification and a verdict of its own
#                     (PASS, FAIL or SKIP, with the reason; a failure does not stop the next):
#                     radar all-gpu against all-cpu, the block library's CUDA variant against
#                     the CPU blocks (filtered beamformer, spectrogram), a constant tensor on the
#                     GPU, the FIR's carry moving GPU to CPU and back under --adapt, NVML gauges
#                     in --metrics, one bisect-rate trial of all-gpu, `kplace admit --prove` at
#                     512x64;
#   3. pcie      150  the GPU path with its graphs against the PCIe bound (issue 50): the pinned
#                     copy rate at each frame's size, then at 1024x128 and 4096x512 all-cpu
#                     once (the detections' reference), each GPU placement probed, three
#                     rounds of closed-loop rows without --profile-gpu, each measuring at least
#                     1.2 s and 200 frames, alternating, and one --profile-gpu row each; before
#                     the rows, all-gpu streamed at 400 CPI/s and the CuPy peer on the same
#                     frames; every row's detections compared with all-cpu's; the rows share
#                     what the rest leaves of the budget, so the step ends within it;
#   4. tests     120  the bundle's GPU test executables, KPLACE_REQUIRE_GPU=1 (a skip fails);
#   5. replay    120  closed-loop replay of every placement at 1024x128 and 4096x512, default
#                     and high-SNR scenes, then all-cpu and all-gpu at 8192x1024, the
#                     spectrogram on its CUDA library, and the filtered beamformer and the
#                     spectrogram on the block library's CUDA variant against the CPU blocks;
#                     each GPU placement's detections compared
#                     with all-cpu's (bins exact, power within 1e-5 relative; cfar-gpu exact);
#   6. streams    35  paced UDP streams of all-gpu and hybrid, every frame verified;
#   7. copies     15  pinned copy rates against the PCIe link's nominal rate;
#   8. tune       25  `kplace tune --prove 0`: both devices calibrated, every placement predicted;
#   9. share      45  all-gpu at 2048x256 alone, beside the GPU hog (a measurement: time slicing
#                     may cost frames), two pipelines with MPS off and on ("skipped: no MPS
#                     control" without nvidia-cuda-mps-control);
#  10. adapt      40  `kplace run --adapt`: a paced stream on all-gpu at 1024x128 that may move
#                     to all-cpu-pinned, the GPU hog for 4 s of its 10 (a measurement: the
#                     switches, frames per placement, every frame verified or not), its trace
#                     drawn with `plot-trace --switches`; then the filtered beamformer moving
#                     from the GPU blocks to the CPU's and back, its FIR's carry with it, every
#                     frame checked against the CPU run;
#  11. admit     100  `kplace admit`: how many all-gpu pipelines at 2048x256 and 150 CPI/s fit,
#                     proven with bisect-rate (N pipelines and N + 1) under MPS when MPS
#                     control is there, else as processes (a measurement);
#  12. cupy       60  the CuPy peer on the same frames as kplace's all-gpu, detections compared;
#  13. memcheck   45  compute-sanitizer memcheck on a subset of the GPU kernel tests; a run cut
#                     off by its limit is inconclusive, a refusal of the device skipped;
#  14. bisect    200  `kplace bisect-rate`: all-gpu and all-cpu at 1024x128 searched side by
#                     side for the robust goal (1 s trials): each one's rate, the ratio, or
#                     the stated reason none exists (a measurement).
#
# The `table` suite (KPLACE_GPU_CHECK_SUITE=table, what bench/gpu-table.sh runs): the preflight,
# then the headline table's three parts, 470 s each, so one part fits a call: `alone` and `hog`
# (all-cpu, all-gpu, hybrid and cfar-gpu searched side by side at 1024x128, 2048x256 and
# 4096x512 with bisect-rate, alone or beside `kplace hog gpu`), `mps` (four process-mode
# all-gpu pipelines at 2048x256, MPS off and on alternated, three rounds), each size's
# ingest-only bound measured in the same part. A part already measured on this device model
# (in docs/results/gpu-table/<device>/gpu-table.json) is skipped unless forced
# (KPLACE_GPU_TABLE_FORCE=1); what a part measured comes back in results.tar.gz under table/,
# merged with the parts before it (`bench/gpu-table.sh --collect` commits it here).
#
# The call ends within KPLACE_GPU_CHECK_LIMIT_S (default 540 s): a step starts only if its
# budget, the 5 s to kill it and 35 s to clean up after it and publish still fit; otherwise it
# is skipped, saying so.
# Each step runs in a process group of its own, ended whole when the step ends. The device's
# tools (nvidia-smi, nvidia-cuda-mps-control, compute-sanitizer) are looked for on PATH, then
# in /usr/local/nvidia/bin and /usr/local/cuda/bin.
#
# For a rerun or a dry run: KPLACE_GPU_CHECK_STEPS names the steps to run (the preflight always
# runs; the others are "skipped: not selected"), KPLACE_GPU_CHECK_BUDGETS overrides budgets
# ("tests=60,replay=90").
#
# $OUT (the device tool's; else $OUT_DIR, else target/gpu-check-out) receives exactly three
# files, rewritten after every step, so a call killed midway still returns what was measured:
# summary.json (schema kplace-gpu-check/4), table.md, and results.tar.gz (every log, run report
# with its overhead section, detections file, comparison and results file; not the recordings,
# which the commands that made them make again). Every measured row
# of the summary states its frames measured after the warm-up, the seconds measured and the
# device's UUID; the summary states the bundle's commit and the call's date. After every step
# the summary is a verdict on what ran:
# `failed` with the problems, else `incomplete` while steps have not run, else `passed`. Exit 0
# when every step passed, 1 when the preflight stopped the call or something failed, 2 without
# a bundle.
# The step_* functions run indirectly, as "step_$2", which shellcheck cannot follow.
# shellcheck disable=SC2317
set -uo pipefail
self="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
cd "$(dirname "$self")/.." || exit 2
summarizer=$PWD/bench/gpu-check-summary.py
# shellcheck source-path=SCRIPTDIR/..
. scripts/ready.sh

SUITE=${KPLACE_GPU_CHECK_SUITE:-check}
case $SUITE in
    check) STEPS=(preflight smoke pcie tests replay streams copies tune share adapt admit cupy memcheck bisect) ;;
    table) STEPS=(preflight alone hog mps) ;;
    *) echo "gpu-check: KPLACE_GPU_CHECK_SUITE is check or table, not $SUITE" >&2; exit 2 ;;
esac
# Seconds to end a step past its budget (timeout's -k), and after it to end what it left
# running (1 s), stop an MPS daemon it left (10 s) and publish (20 s), with 4 s to spare.
KILL_GRACE=5
CLEANUP_LIMIT=35

budget_of() {
    local kv
    for kv in ${KPLACE_GPU_CHECK_BUDGETS//,/ }; do
        [ "${kv%%=*}" = "$1" ] && { echo "${kv#*=}"; return; }
    done
    case $1 in
        preflight) echo 60 ;;
        smoke) echo 120 ;;
        pcie) echo 150 ;;
        tests) echo 120 ;;
        replay) echo 120 ;;
        streams) echo 35 ;;
        copies) echo 15 ;;
        tune) echo 25 ;;
        share) echo 45 ;;
        adapt) echo 40 ;;
        admit) echo 100 ;;
        cupy) echo 60 ;;
        memcheck) echo 45 ;;
        bisect) echo 200 ;;
        alone | hog | mps) echo 470 ;;
    esac
}

title_of() {
    case $1 in
        preflight) echo "preflight: driver, devices, CUDA libraries, tools" ;;
        smoke) echo "smoke: every GPU path once, each verified (PASS, FAIL or SKIP)" ;;
        pcie) echo "the GPU path with graphs against the PCIe bound: closed-loop rows, the copy rate, the CuPy peer" ;;
        tests) echo "GPU test executables (KPLACE_REQUIRE_GPU=1)" ;;
        replay) echo "replay runs of every placement, detections against all-cpu" ;;
        streams) echo "UDP streams of all-gpu and hybrid" ;;
        copies) echo "pinned copy rates against the PCIe link" ;;
        tune) echo "kplace tune's calibration and predictions, CPU and GPU" ;;
        share) echo "sharing: alone, beside the GPU hog, MPS off and on" ;;
        adapt) echo "kplace run --adapt: all-gpu with all-cpu-pinned to move to, the GPU hog mid-stream" ;;
        admit) echo "kplace admit: all-gpu at 2048x256, proven with MPS" ;;
        cupy) echo "the CuPy peer beside kplace's all-gpu" ;;
        memcheck) echo "compute-sanitizer memcheck of GPU kernel tests" ;;
        bisect) echo "bisect-rate: all-gpu and all-cpu side by side at 1024x128" ;;
        alone) echo "table, part alone: four placements x three sizes, sustained rate over UDP" ;;
        hog) echo "table, part hog: the same beside kplace hog gpu" ;;
        mps) echo "table, part mps: four all-gpu processes at 2048x256, MPS off and on alternated" ;;
    esac
}

# An inner time limit that stays in the step's process group, so that ending the group ends
# it with everything else the step started.
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
# A JSON string (quotes and backslashes escaped).
str() {
    local v=${1//\\/\\\\}
    printf '"%s"' "${v//\"/\\\"}"
}

# The path of the device tool NAME: on PATH, else in the driver's and the toolkit's folders
# (a container often mounts the driver's tools in /usr/local/nvidia/bin, off PATH).
find_tool() {
    local dir
    command -v "$1" 2> /dev/null && return 0
    for dir in /usr/local/nvidia/bin /usr/local/cuda/bin /usr/local/cuda/compute-sanitizer; do
        [ -x "$dir/$1" ] && { echo "$dir/$1"; return 0; }
    done
    return 1
}

# Seconds since the epoch, with fractions.
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

# ---------------------------------------------------------------------------------------------
# Steps. Each runs as `gpu-check.sh --step NAME` under `timeout` (a process group of its own,
# which the call ends whole afterwards), reads GC_* from the environment and appends to
# $GC_SCRATCH/results/NAME.jsonl.

step_preflight() {
    local d=$GC_SCRATCH/preflight t0 t1 t2 tool path
    mkdir -p "$d"
    # The first run pays for loading the CUDA libraries cold, cuInit and a primary context;
    # the second is what every later process pays.
    t0=$(now)
    bounded 40 "$GC_KPLACE" devices --json > "$d/devices.json" 2> "$d/devices.err"
    echo $? > "$d/devices.rc"
    t1=$(now)
    bounded 20 "$GC_KPLACE" devices --json > "$d/devices-warm.json" 2>> "$d/devices.err"
    t2=$(now)
    printf '{"devices_cold_s": %s, "devices_warm_s": %s}\n' "$(elapsed "$t0" "$t1")" \
        "$(elapsed "$t1" "$t2")" > "$d/timing.json"
    bounded 10 "$GC_KPLACE" devices --library-path > "$d/library_path.txt" 2> "$d/library_path.err"
    echo $? > "$d/library_path.rc"
    if path=$(find_tool nvidia-smi); then
        bounded 15 "$path" --query-gpu=name,driver_version,pcie.link.gen.max,pcie.link.width.max,pcie.link.gen.current,pcie.link.width.current,memory.total,persistence_mode \
            --format=csv,noheader > "$d/nvidia-smi.txt" 2>&1
    else
        echo "nvidia-smi: not found" > "$d/nvidia-smi.txt"
    fi
    cat /proc/sys/net/core/rmem_max > "$d/rmem_max.txt" 2>/dev/null
    : > "$d/tools.txt"
    for tool in nvidia-smi nvidia-cuda-mps-control nvidia-cuda-mps-server compute-sanitizer ncu nvcc python3; do
        find_tool "$tool" >> "$d/tools.txt" || echo "$tool: not found" >> "$d/tools.txt"
    done
    if path=$(find_tool compute-sanitizer); then
        bounded 10 "$path" --version > "$d/compute-sanitizer.txt" 2>&1
    fi
    return 0
}

# The bundle's GPU test executables; each binary under its own limit. The kernel and
# sharing tests run KPLACE_GPU_CHECK_TEST_RUNS times (default 3; a failure ends the binary's
# runs), so a test that fails once in a few runs shows: a race against the device does.
step_tests() {
    # GC_REQUIRE_GPU=0: the dry run here, without a GPU (bench/gpu-bundle-dry-run.sh).
    export KPLACE_REQUIRE_GPU=${GC_REQUIRE_GPU:-1}
    local t name rc start filter runs run
    for t in "$GC_BUNDLE"/tests/*; do
        name=$(basename "$t")
        filter=()
        runs=${KPLACE_GPU_CHECK_TEST_RUNS:-3}
        [ "$name" = kplace-devices ] && filter=(gpu_round_trip) && runs=1
        [ "$name" = kplace-hog ] && filter=(gpu_hog_reports_tflops_on_a_real_gpu) && runs=1
        log "test $name ($runs run(s))"
        start=$SECONDS
        # From a directory of its own: nothing may depend on where it runs.
        mkdir -p "$GC_SCRATCH/tests/$name"
        : > "$GC_SCRATCH/logs/test-$name.txt"
        rc=0
        for ((run = 1; run <= runs && rc == 0; run++)); do
            echo "== run $run of $runs" >> "$GC_SCRATCH/logs/test-$name.txt"
            (cd "$GC_SCRATCH/tests/$name" && bounded -k 5 60 "$t" --test-threads=1 --nocapture "${filter[@]}") \
                >> "$GC_SCRATCH/logs/test-$name.txt" 2>&1
            rc=$?
        done
        jsonl "$GC_SCRATCH/results/tests.jsonl" "test=$(str "$name")" "rc=$rc" "runs=$((run - 1))" \
            "seconds=$((SECONDS - start))" "log=$(str "logs/test-$name.txt")"
    done
}

# compute-sanitizer's memcheck on one test of each GPU kernel (range FFT tiles, Doppler FFT,
# CFAR on extreme values): the whole binary takes minutes under instrumentation.
MEMCHECK_TESTS=(a_range_tile_writes_only_its_columns doppler_fft_matches_an_f64_fft cfar_on_extreme_values_matches_the_cpu_library)

step_memcheck() {
    export KPLACE_REQUIRE_GPU=1
    local bin=$GC_BUNDLE/tests/kplace-gpu-gpu out=$GC_SCRATCH/logs/memcheck.txt rc sanitizer
    local limit=$(($(budget_of memcheck) - 8))
    if ! sanitizer=$(find_tool compute-sanitizer); then
        jsonl "$GC_SCRATCH/results/memcheck.jsonl" 'status="skipped"' 'reason="compute-sanitizer not found"'
        return 0
    fi
    if [ ! -x "$bin" ]; then
        jsonl "$GC_SCRATCH/results/memcheck.jsonl" 'status="failed"' "reason=$(str "no $bin in the bundle")"
        return 1
    fi
    (cd "$GC_SCRATCH" && bounded -k 3 "$limit" "$sanitizer" --tool memcheck --error-exitcode 86 \
        --print-limit 50 "$bin" --test-threads=1 "${MEMCHECK_TESTS[@]}") > "$out" 2>&1
    rc=$?
    jsonl "$GC_SCRATCH/results/memcheck.jsonl" 'status="ran"' "rc=$rc" "limit_s=$limit" \
        'log="logs/memcheck.txt"' "tests=$(str "${MEMCHECK_TESTS[*]}")"
}

# One replay run: PLACEMENT CPI SCENE FRAMES WARMUP SCENE_FRAMES; then, for a GPU placement,
# its detections against all-cpu's on the same frames.
replay_run() {
    local p=$1 cpi=$2 scene=$3 frames=$4 warmup=$5 scene_frames=$6 snr=() rc start
    local base=replay/$p-$cpi-$scene
    [ "$scene" = high-snr ] && snr=(--high-snr)
    start=$(now)
    bounded -k 5 40 "$GC_KPLACE" run --placement "workloads/radar/placements/$p.yaml" --cpi "$cpi" "${snr[@]}" \
        --frames "$frames" --warmup-frames "$warmup" --scene-frames "$scene_frames" \
        --profile-gpu --detections "$GC_SCRATCH/$base.txt" --report "$GC_SCRATCH/$base.json" \
        > "$GC_SCRATCH/$base.log" 2>&1
    rc=$?
    # The whole process, start-up (CUDA, NVRTC, plans) and warm-up included.
    local seconds crc=null rule=null
    seconds=$(elapsed "$start" "$(now)")
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
    blocks_run
}

# The spectrogram (workloads/spectrogram/graph.yaml) on its CUDA library, replaying a synthesized
# recording, every frame's spectrum checked against the C library's (a run that fails the check
# exits 1).
spectrogram_run() {
    local base=replay/spectrogram-gpu-1024x128 rc start
    start=$SECONDS
    bounded 30 "$GC_KPLACE" record --graph workloads/spectrogram/graph.yaml --frames 8 \
        --out "$GC_SCRATCH/replay/tones.sigmf-data" > "$GC_SCRATCH/$base.log" 2>&1
    bounded -k 5 40 "$GC_KPLACE" run --graph workloads/spectrogram/graph.yaml \
        --placement workloads/spectrogram/placements/gpu.yaml --recording "$GC_SCRATCH/replay/tones.sigmf-data" \
        --check reference:workloads/spectrogram/placements/cpu.yaml --frames 200 --warmup-frames 40 \
        --profile-gpu --report "$GC_SCRATCH/$base.json" >> "$GC_SCRATCH/$base.log" 2>&1
    rc=$?
    jsonl "$GC_SCRATCH/results/replay.jsonl" "placement=$(str spectrogram-gpu)" "cpi=$(str 1024x128)" \
        "scene=$(str recording)" "frames=200" "warmup=40" "scene_frames=8" "rc=$rc" \
        "seconds=$((SECONDS - start))" "base=$(str "$base")" "compare_rc=null" "rule=null"
    log "replay spectrogram-gpu 1024x128: rc $rc (checked against the C library) in $((SECONDS - start))s"
}

# The block library's CUDA variant (libkplace_blocks_gpu.so), each graph replaying a
# synthesized recording with every frame checked against the CPU blocks' placement: the
# filtered beamformer (the stateful FIR, beamformer, power and mean: equal bit for bit) and the
# spectrogram written with blocks (conversion, window, cuFFT, power, mean).
blocks_run() {
    local graph placement reference recording name rc start
    for name in beamformer-filtered spectrogram-blocks; do
        start=$SECONDS
        case $name in
            beamformer-filtered)
                graph=workloads/beamformer/filtered/graph.yaml
                placement=workloads/beamformer/filtered/gpu.yaml
                reference=workloads/beamformer/filtered/cpu.yaml
                recording="$GC_SCRATCH/replay/array.sigmf-data"
                bounded 30 "$GC_KPLACE" record --graph "$graph" --frames 8 --sample-rate 250e3 \
                    --tone 0.02:0.25:-30 --tone -0.05:0.1:14.4775 --noise 0.01 \
                    --out "$recording" > "$GC_SCRATCH/replay/blocks-$name.log" 2>&1 ;;
            *)
                graph=workloads/spectrogram/blocks/graph.yaml
                placement=workloads/spectrogram/blocks/gpu.yaml
                reference=workloads/spectrogram/blocks/cpu.yaml
                recording="$GC_SCRATCH/replay/tones.sigmf-data" ;;
        esac
        bounded -k 5 40 "$GC_KPLACE" run --graph "$graph" --placement "$placement" \
            --recording "$recording" --check "reference:$reference" --frames 400 \
            --warmup-frames 40 --report "$GC_SCRATCH/replay/blocks-$name.json" \
            >> "$GC_SCRATCH/replay/blocks-$name.log" 2>&1
        rc=$?
        jsonl "$GC_SCRATCH/results/replay.jsonl" "placement=$(str "$name-gpu")" "cpi=$(str recording)" \
            "scene=$(str recording)" "frames=400" "warmup=40" "scene_frames=8" "rc=$rc" \
            "seconds=$((SECONDS - start))" "base=$(str "replay/blocks-$name")" "compare_rc=null" \
            "rule=null"
        log "replay $name-gpu: rc $rc (checked against the CPU blocks) in $((SECONDS - start))s"
    done
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
# Prints the receiver's exit status.
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
            rc=$(stream_case "streams/$p-$cpi" "$cpi" "$rate" 2 --placement "workloads/radar/placements/$p.yaml")
            jsonl "$GC_SCRATCH/results/streams.jsonl" "placement=$(str "$p")" "cpi=$(str "$cpi")" \
                "rate=$rate" "rc=$rc" "base=$(str "streams/$p-$cpi")"
            log "stream $p $cpi at $rate CPI/s: rc $rc"
        done
    done
}

# Pinned copy rates: copy_rate within LIMIT seconds at SIZES (bytes, comma-separated), 0.3 s
# per size and direction, each line of JSON into OUT, its log into LOG; with the PCIe link's
# generation and width when nvidia-smi says them (nvidia-smi's own time within 5 s).
copy_rates() {
    local limit=$1 sizes=$2 out=$3 log_file=$4 link gen width pcie=() smi
    if smi=$(find_tool nvidia-smi); then
        link=$(bounded -k 1 4 "$smi" --query-gpu=pcie.link.gen.max,pcie.link.width.max --format=csv,noheader 2> /dev/null | head -n 1)
    fi
    gen=$(echo "${link:-}" | cut -d, -f1 | tr -d ' ')
    width=$(echo "${link:-}" | cut -d, -f2 | tr -d ' ')
    if [[ "$gen" =~ ^[0-9]+$ && "$width" =~ ^[0-9]+$ ]]; then
        pcie=(--pcie "$gen,$width")
    else
        log "no PCIe link from nvidia-smi (${link:-none}): rates without their nominal fraction"
    fi
    bounded -k 3 "$limit" "$GC_BUNDLE/bin/copy_rate" --sizes "$sizes" --seconds 0.3 \
        "${pcie[@]}" > "$out" 2> "$log_file"
}

step_copies() {
    copy_rates 10 1048576,8388608,67108864 "$GC_SCRATCH/results/copies.jsonl" "$GC_SCRATCH/logs/copies.txt"
}

# The tune model on both devices: calibrated here, every placement predicted, none proven
# (bisect-rate searches take minutes); tune.txt and calibration.json go into results.tar.gz.
step_tune() {
    mkdir -p "$GC_SCRATCH/tune"
    bounded -k 3 20 "$GC_KPLACE" tune --cpi 1024x128 --prove 0 --calibrate-s 0.5 \
        --calibrations "$GC_SCRATCH/tune/calibrations" --out "$GC_SCRATCH/tune" \
        > "$GC_SCRATCH/logs/tune.txt" 2>&1
}

# The sustained rate on the GPU: all-gpu and all-cpu searched side by side at 1024x128 for
# the robust goal (3 trials' time; 1 s trials, 0.25 s short ones), at most 40 trials each; the
# table and the results file go into results.tar.gz. A measurement: each search ends with a
# rate or says why none exists. Past its limit it gets SIGINT, and writes what it found.
step_bisect() {
    mkdir -p "$GC_SCRATCH/bisect"
    bounded -s INT -k 10 180 "$GC_KPLACE" bisect-rate --cpi 1024x128 \
        --placements workloads/radar/placements/all-gpu.yaml,workloads/radar/placements/all-cpu.yaml \
        --goals robust:0.01:0.5:3 --window-s 1 --initial-window-s 0.25 --max-trials 40 \
        --out "$GC_SCRATCH/bisect" > "$GC_SCRATCH/bisect/table.md" 2> "$GC_SCRATCH/logs/bisect.txt"
}

# Sharing. Beside the hog, a GPU time-sliced with a co-tenant may cost frames by design: that
# row is a measurement (frames, rate, latency), never a failure of the check.
step_share() {
    mkdir -p "$GC_SCRATCH/share"
    local rc hog mpsdir
    rc=$(stream_case share/alone 2048x256 150 2 --placement workloads/radar/placements/all-gpu.yaml)
    jsonl "$GC_SCRATCH/results/share.jsonl" 'case="alone"' 'pipelines=1' "rc=$rc" 'base="share/alone"'
    # timeout itself, not the `bounded` function, in the background: `$!` must be the process
    # that relays the TERM to the hog (a subshell running the function would die alone and
    # leave the hog loading the GPU through the MPS rows; both earlier leases did).
    timeout --foreground 30 "$GC_KPLACE" hog gpu --size 4096 --duty 1.0 --seconds 20 \
        > "$GC_SCRATCH/share/hog.jsonl" 2>&1 &
    hog=$!
    sleep 2
    rc=$(stream_case share/hog 2048x256 150 2 --placement workloads/radar/placements/all-gpu.yaml)
    kill -TERM "$hog" 2> /dev/null
    wait "$hog" 2> /dev/null
    if pgrep -f "hog gpu --size 4096" > /dev/null; then
        log "share: the GPU hog outlived its TERM; ending it before the MPS rows"
        pkill -KILL -f "hog gpu --size 4096"
    fi
    jsonl "$GC_SCRATCH/results/share.jsonl" 'case="beside the GPU hog"' 'pipelines=1' "rc=$rc" \
        'base="share/hog"' 'hog="share/hog.jsonl"' 'measurement=true'
    rc=$(stream_case share/mps-off 2048x256 150 2 --placement workloads/radar/placements/all-gpu.yaml \
        --pipelines 2 --pipeline-mode process)
    jsonl "$GC_SCRATCH/results/share.jsonl" 'case="MPS off"' 'pipelines=2' "rc=$rc" 'base="share/mps-off"'
    # The preflight put the driver's tools on PATH where it found them off it.
    if ! command -v nvidia-cuda-mps-control > /dev/null; then
        jsonl "$GC_SCRATCH/results/share.jsonl" 'case="MPS on"' 'pipelines=2' 'rc=null' \
            'skipped="no MPS control (nvidia-cuda-mps-control is not on PATH, in /usr/local/nvidia/bin or in /usr/local/cuda/bin)"'
        log "share MPS on: skipped: no MPS control"
        return 0
    fi
    mpsdir=$GC_SCRATCH/mps
    if bounded 15 "$GC_KPLACE" mps start --dir "$mpsdir" > "$GC_SCRATCH/share/mps.log" 2>&1; then
        export CUDA_MPS_PIPE_DIRECTORY="$mpsdir/pipe" CUDA_MPS_LOG_DIRECTORY="$mpsdir/log"
        rc=$(stream_case share/mps-on 2048x256 150 2 --placement workloads/radar/placements/all-gpu.yaml \
            --pipelines 2 --pipeline-mode process)
        unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
        bounded 10 "$GC_KPLACE" mps stop --dir "$mpsdir" >> "$GC_SCRATCH/share/mps.log" 2>&1
        jsonl "$GC_SCRATCH/results/share.jsonl" 'case="MPS on"' 'pipelines=2' "rc=$rc" 'base="share/mps-on"'
    else
        jsonl "$GC_SCRATCH/results/share.jsonl" 'case="MPS on"' 'pipelines=2' 'rc=null' \
            'error="kplace mps start failed (share/mps.log)"'
    fi
}

# Re-placement under a co-tenant: all-gpu preferred, all-cpu-pinned to move to, judged against
# a 2 ms budget; the GPU hog arrives 3 s into a 10 s stream at 400 CPI/s and stays 4 s. A
# measurement: the report's adaptation (switches, frames per placement) and the picture.
step_adapt() {
    mkdir -p "$GC_SCRATCH/adapt"
    local rc hog
    (
        sleep 3
        exec timeout --foreground 6 "$GC_KPLACE" hog gpu --size 4096 --duty 1.0 --seconds 4
    ) > "$GC_SCRATCH/adapt/hog.jsonl" 2>&1 &
    hog=$!
    rc=$(stream_case adapt/run 1024x128 400 10 --placement workloads/radar/placements/all-gpu.yaml \
        --adapt workloads/radar/placements/all-cpu-pinned.yaml --budget 2ms --adapt-hold 1s \
        --trace "$GC_SCRATCH/adapt/trace.json")
    kill -TERM "$hog" 2> /dev/null
    wait "$hog" 2> /dev/null
    pkill -KILL -f "hog gpu --size 4096 --duty 1.0 --seconds 4" 2> /dev/null
    bounded 20 "$GC_KPLACE" plot-trace "$GC_SCRATCH/adapt/trace.json" --switches --budget 2ms \
        --out "$GC_SCRATCH/adapt/switches.svg" >> "$GC_SCRATCH/adapt/run.log" 2>&1
    rm -f "$GC_SCRATCH/adapt/trace.json"
    jsonl "$GC_SCRATCH/results/adapt.jsonl" 'case="all-gpu, adapting to all-cpu-pinned, GPU hog mid-stream"' \
        'pipelines=1' "rc=$rc" 'base="adapt/run"' 'cpi="1024x128"' 'rate=400' 'hog="adapt/hog.jsonl"' \
        'measurement=true'
    adapt_stateful
}

# The filtered beamformer's FIR history moving with the stream between device memory (the
# block library's CUDA variant) and host memory (its CPU blocks), both ways: a budget no frame
# meets moves each run on once, and every frame is checked against the one-worker CPU run.
# A gate, not a measurement: a wrong carry changes the frame after the switch.
adapt_stateful() {
    local dir=workloads/beamformer/filtered pair from to rc
    bounded 30 "$GC_KPLACE" record --graph "$dir/graph.yaml" --frames 400 --sample-rate 250e3 \
        --tone 0.02:0.25:-30 --tone -0.05:0.1:14.4775 --noise 0.01 \
        --out "$GC_SCRATCH/adapt/array.sigmf-data" > "$GC_SCRATCH/adapt/fir.log" 2>&1
    for pair in gpu:cpu-2 cpu:gpu; do
        from=${pair%%:*} to=${pair#*:}
        bounded -k 5 30 "$GC_KPLACE" run --graph "$dir/graph.yaml" --placement "$dir/$from.yaml" \
            --adapt "$dir/$to.yaml" --budget 1us --adapt-window 8 \
            --recording "$GC_SCRATCH/adapt/array.sigmf-data" --frames 400 \
            --check "reference:$dir/cpu.yaml" --report "$GC_SCRATCH/adapt/fir-$from-$to.json" \
            >> "$GC_SCRATCH/adapt/fir.log" 2>&1
        rc=$?
        jsonl "$GC_SCRATCH/results/adapt.jsonl" \
            "case=$(str "filtered beamformer, $from adapting to $to: the FIR's carry moves")" \
            'pipelines=1' "rc=$rc" "base=$(str "adapt/fir-$from-$to")" 'cpi="4x64x8"' 'rate=null' 'carry=true'
        log "adapt filtered beamformer $from -> $to: rc $rc"
    done
}

# Admission: all-gpu at 2048x256, 150 CPI/s each, the answer proven by two short searches (N
# and N + 1 pipelines) as MPS clients when MPS control is there.
step_admit() {
    mkdir -p "$GC_SCRATCH/admit"
    local mps=(--pipeline-mode process) rc
    if command -v nvidia-cuda-mps-control > /dev/null; then
        mps+=(--mps on)
    fi
    bounded -s INT -k 10 90 "$GC_KPLACE" admit --placement workloads/radar/placements/all-gpu.yaml \
        --cpi 2048x256 --rate 150 --prove "${mps[@]}" --calibrate 500ms \
        --calibrations "$GC_SCRATCH/admit/calibrations" --goals robust:0.01:0.5:2 --window 1s \
        --initial-window 250ms --max-trials 16 --out "$GC_SCRATCH/admit" \
        > "$GC_SCRATCH/admit/admit.txt" 2> "$GC_SCRATCH/logs/admit.txt"
    rc=$?
    jsonl "$GC_SCRATCH/results/admit.jsonl" "rc=$rc" "mps=$(str "${mps[*]}")" 'measurement=true'
}

# The CuPy peer. Its probe (import, device count) is here, not in the preflight: a CuPy import
# is slow and the rest of the check does not need it.
step_cupy() {
    export KPLACE_REQUIRE_GPU=1
    local cpi rc frames warmup limit
    if ! bounded 30 python3 -c 'import cupy; print(cupy.__version__, cupy.cuda.runtime.getDeviceCount())' \
        > "$GC_SCRATCH/logs/cupy-probe.txt" 2>&1; then
        jsonl "$GC_SCRATCH/results/cupy.jsonl" 'cpi=null' 'rc=null' \
            "skipped=$(str "CuPy is not usable: $(tail -n 1 "$GC_SCRATCH/logs/cupy-probe.txt")")"
        log "cupy peer: skipped: $(tail -n 1 "$GC_SCRATCH/logs/cupy-probe.txt")"
        return 0
    fi
    for cpi in 1024x128 4096x512; do
        # The first CPI pays for CuPy's cold kernel cache.
        case $cpi in 1024x128) frames=200 warmup=40 limit=35 ;; *) frames=40 warmup=8 limit=22 ;; esac
        KEEP_DIR="$GC_SCRATCH/cupy/$cpi" KPLACE="$GC_KPLACE" FRAMES=$frames WARMUP=$warmup \
            bounded -k 3 "$limit" bench/peers/cupy/test.sh "$cpi" > "$GC_SCRATCH/logs/cupy-$cpi.txt" 2>&1
        rc=$?
        jsonl "$GC_SCRATCH/results/cupy.jsonl" "cpi=$(str "$cpi")" "rc=$rc" "limit_s=$limit" \
            "dir=$(str "cupy/$cpi")"
        log "cupy peer $cpi: rc $rc"
    done
}

# ---------------------------------------------------------------------------------------------
# The smoke step: every GPU path once, quickly, each with its own verification and verdict
# (PASS, FAIL or SKIP, with the reason, in results/smoke.jsonl), before anything is measured,
# so that a call that has time for nothing else still says what is broken. A failure never
# stops the paths after it. The judging is the summariser's (`gpu-check-summary.py smoke`).

# Judges path NAME with the summariser's rule KIND over ARGS, and records the verdict with the
# seconds since START.
smoke_judge() {
    local name=$1 start=$2 kind=$3 verdict reason line
    shift 3
    line=$(bounded 20 python3 "$GC_SUMMARIZER" smoke "$kind" "$GC_SCRATCH" "$@" 2>&1 | tail -n 1)
    verdict=${line%%$'\t'*}
    reason=${line#*$'\t'}
    case $verdict in PASS | FAIL | SKIP) ;; *) verdict=FAIL reason="the judge said: $line" ;; esac
    jsonl "$GC_SCRATCH/results/smoke.jsonl" "path=$(str "$name")" "verdict=$(str "$verdict")" \
        "reason=$(str "$reason")" "seconds=$((SECONDS - start))"
    log "smoke $name: $verdict: $reason"
}

# The radar's GPU library (kplace-cudakit's driver, cuFFT and NVRTC code) and the executor's GPU
# callback path (turnstile, collector): all-gpu replayed at 1024x128, its detections against
# all-cpu's on the same frames.
smoke_radar() {
    local start=$SECONDS p rcs=() d=smoke/radar
    mkdir -p "$GC_SCRATCH/$d"
    for p in all-cpu all-gpu; do
        bounded -k 5 20 "$GC_KPLACE" run --placement "workloads/radar/placements/$p.yaml" --cpi 1024x128 \
            --frames 64 --warmup-frames 16 --scene-frames 8 --profile-gpu \
            --detections "$GC_SCRATCH/$d/$p.txt" --report "$GC_SCRATCH/$d/$p.json" > "$GC_SCRATCH/$d/$p.log" 2>&1
        rcs+=($?)
    done
    bounded 10 "$GC_KPLACE" compare-detections "$GC_SCRATCH/$d/all-cpu.txt" "$GC_SCRATCH/$d/all-gpu.txt" \
        --rel-tol 1e-5 --frames 64 --json > "$GC_SCRATCH/$d/compare.json" 2> "$GC_SCRATCH/$d/compare.err"
    smoke_judge "radar all-gpu against all-cpu" "$start" radar "${rcs[0]}" "${rcs[1]}" "$d"
}

# A graph of the block library replayed on its CUDA variant, every frame checked against the
# CPU blocks: NAME is beamformer-filtered (the stateful FIR's carry in device memory) or
# spectrogram-blocks.
smoke_blocks() {
    local name=$1 start=$SECONDS graph dir d=smoke/$1 rc
    mkdir -p "$GC_SCRATCH/$d"
    case $name in
        beamformer-filtered) dir=workloads/beamformer/filtered ;;
        *) dir=workloads/spectrogram/blocks ;;
    esac
    graph=$dir/graph.yaml
    smoke_record "$graph" "$GC_SCRATCH/$d/input.sigmf-data" 8 > "$GC_SCRATCH/$d/run.log" 2>&1
    bounded -k 5 25 "$GC_KPLACE" run --graph "$graph" --placement "$dir/gpu.yaml" \
        --recording "$GC_SCRATCH/$d/input.sigmf-data" --check "reference:$dir/cpu.yaml" --frames 64 \
        --warmup-frames 8 --report "$GC_SCRATCH/$d/report.json" >> "$GC_SCRATCH/$d/run.log" 2>&1
    rc=$?
    smoke_judge "blocks on CUDA: $name against the CPU blocks" "$start" checked "$rc" "$d/report.json"
}

# A recording of GRAPH's source into FILE, FRAMES frames: tones across the array for the
# beamformers, the graph's own tones otherwise.
smoke_record() {
    local graph=$1 file=$2 frames=$3 tones=()
    case $graph in
        workloads/beamformer/*)
            tones=(--sample-rate 250e3 --tone 0.02:0.25:-30 --tone -0.05:0.1:14.4775 --noise 0.01) ;;
    esac
    bounded 15 "$GC_KPLACE" record --graph "$graph" --frames "$frames" "${tones[@]}" --out "$file"
}

# A constant tensor on the GPU: the weighted beamformer's weights (an .npy file) uploaded once
# before the first frame, every frame checked against the CPU blocks; the plan must say so.
smoke_constant() {
    local start=$SECONDS d=smoke/constant graph=workloads/beamformer/weighted/graph.yaml rc
    local placements=workloads/beamformer/placements
    mkdir -p "$GC_SCRATCH/$d"
    bounded 10 "$GC_KPLACE" plan --graph "$graph" --placement "$placements/gpu.yaml" > "$GC_SCRATCH/$d/plan.txt" 2>&1
    smoke_record "$graph" "$GC_SCRATCH/$d/input.sigmf-data" 8 > "$GC_SCRATCH/$d/run.log" 2>&1
    bounded -k 5 25 "$GC_KPLACE" run --graph "$graph" --placement "$placements/gpu.yaml" \
        --recording "$GC_SCRATCH/$d/input.sigmf-data" --check "reference:$placements/cpu.yaml" \
        --frames 64 --warmup-frames 8 --report "$GC_SCRATCH/$d/report.json" >> "$GC_SCRATCH/$d/run.log" 2>&1
    rc=$?
    smoke_judge "a constant tensor on the GPU (the weighted beamformer's weights)" "$start" constant \
        "$rc" "$d/report.json" "$d/plan.txt"
}

# The filtered beamformer's FIR moving with the stream under --adapt, device memory to host
# memory and back: a budget no frame meets moves each run once, every frame checked against the
# one-worker CPU run.
smoke_carry() {
    local start=$SECONDS d=smoke/carry dir=workloads/beamformer/filtered pair from to rcs=() reports=()
    mkdir -p "$GC_SCRATCH/$d"
    smoke_record "$dir/graph.yaml" "$GC_SCRATCH/$d/input.sigmf-data" 64 > "$GC_SCRATCH/$d/run.log" 2>&1
    for pair in gpu:cpu-2 cpu:gpu; do
        from=${pair%%:*} to=${pair#*:}
        bounded -k 5 25 "$GC_KPLACE" run --graph "$dir/graph.yaml" --placement "$dir/$from.yaml" \
            --adapt "$dir/$to.yaml" --budget 1us --adapt-window 8 \
            --recording "$GC_SCRATCH/$d/input.sigmf-data" --frames 128 \
            --check "reference:$dir/cpu.yaml" --report "$GC_SCRATCH/$d/$from-$to.json" \
            >> "$GC_SCRATCH/$d/run.log" 2>&1
        rcs+=($?)
        reports+=("$d/$from-$to.json")
    done
    smoke_judge "the FIR's carry moving GPU to CPU and back under --adapt" "$start" carry \
        "${rcs[0]}" "${reports[0]}" "${rcs[1]}" "${reports[1]}"
}

# NVML's gauges in --metrics: a paced stream of all-gpu at 1024x128 (200 CPI/s, 3 s) serving its
# metrics on a free port, scraped while it runs until a GPU gauge appears (at most 4 tries).
smoke_metrics() {
    local start=$SECONDS base=smoke/metrics receiver ports=() port="" rc=1 sender try
    mkdir -p "$GC_SCRATCH/smoke/metrics"
    : > "$GC_SCRATCH/$base.scrape.txt"
    if start_receiver "$base" --cpi 1024x128 --frames 600 --warmup-frames 50 --scene-frames 8 \
        --placement workloads/radar/placements/all-gpu.yaml --metrics 127.0.0.1:0; then
        bounded 20 "$GC_KPLACE" send --dest "127.0.0.1:${ports[0]}" --cpi 1024x128 --rate 200 \
            --frames 600 --scene-frames 8 > "$GC_SCRATCH/$base.send.log" 2>&1 &
        sender=$!
        for try in 1 2 3 4; do
            sleep 0.5
            [ -n "$port" ] || port=$(grep -o 'metrics at http://127.0.0.1:[0-9]*' "$GC_SCRATCH/$base.log" \
                | head -n 1 | grep -o '[0-9]*$')
            [ -n "$port" ] || continue
            bounded 5 python3 -c 'import sys, urllib.request
print(urllib.request.urlopen(sys.argv[1], timeout=3).read().decode())' "http://127.0.0.1:$port/metrics" \
                > "$GC_SCRATCH/$base.scrape.txt" 2>&1
            grep -q '^kplace_gpu_utilization_ratio{' "$GC_SCRATCH/$base.scrape.txt" && break
            log "smoke metrics: no GPU gauge in scrape $try"
        done
        wait "$sender"
        wait "$receiver"
        rc=$?
    else
        kill "$receiver" 2> /dev/null
        wait "$receiver" 2> /dev/null
    fi
    smoke_judge "NVML gauges in --metrics" "$start" metrics "$rc" "$base.json" "$base.scrape.txt" "${port:-none}"
}

# One bisect-rate trial of all-gpu at 1024x128 (0.5 s at the CPI's real-time rate, 156 CPI/s):
# the sweep, its GPU trial and its results file on a GPU. One trial answers no search, so its
# exit status is 1; the verdict is the trial's.
smoke_bisect() {
    local start=$SECONDS rc
    bounded -s INT -k 5 40 "$GC_KPLACE" bisect-rate --cpi 1024x128 \
        --placements workloads/radar/placements/all-gpu.yaml --goals robust:0.01:0.5:1 \
        --warmup 0.25s --initial-window 0.5s --window 0.5s --max-trials 1 \
        --out "$GC_SCRATCH/smoke/bisect" > "$GC_SCRATCH/smoke/bisect.txt" 2> "$GC_SCRATCH/smoke/bisect.log"
    rc=$?
    smoke_judge "one bisect-rate trial of all-gpu" "$start" bisect "$rc" smoke/bisect/bisect-rate.json
}

# `kplace admit --prove` on the GPU at a tiny size: all-gpu at 512x64, 3000 CPI/s each, a tenth
# of the cores (so that N stays small), in threads, each proof search at most 3 trials of 0.5 s
# from the rate itself. The verdict is that admit answered and ran its proof; whether the proof
# held is said with it (the admit step judges a real one).
smoke_admit() {
    local start=$SECONDS rc
    mkdir -p "$GC_SCRATCH/smoke/admit"
    bounded -s INT -k 5 45 "$GC_KPLACE" admit --placement workloads/radar/placements/all-gpu.yaml \
        --cpi 512x64 --rate 3000 --utilization 0.1 --prove --calibrate 300ms \
        --calibrations "$GC_SCRATCH/smoke/admit/calibrations" --goals robust:0.01:0.5:1 \
        --start-rate 3000 --warmup 0.25s --initial-window 0.5s --window 0.5s --max-trials 3 \
        --out "$GC_SCRATCH/smoke/admit" > "$GC_SCRATCH/smoke/admit.txt" 2> "$GC_SCRATCH/smoke/admit.log"
    rc=$?
    smoke_judge "kplace admit --prove" "$start" admit "$rc" smoke/admit.txt
}

step_smoke() {
    mkdir -p "$GC_SCRATCH/smoke"
    smoke_radar
    smoke_blocks beamformer-filtered
    smoke_blocks spectrogram-blocks
    smoke_constant
    smoke_carry
    smoke_metrics
    smoke_bisect
    smoke_admit
    return 0
}

# ---------------------------------------------------------------------------------------------
# The pcie step (issue 50, item 5): the GPU path as a closed-loop replay takes it, with its
# graphs (no --profile-gpu: that takes the path without them), against the PCIe bound, the
# pinned host-to-device copy rate at each frame's size measured in the same step. At 1024x128
# and 4096x512: all-cpu once, the detections' reference (frame i shows scene frame i mod 8, so
# its first 8 frames repeated are every frame's reference); each GPU placement probed, then
# three rounds of one row each, the placements alternating, each row sized by the rate its
# placement's last run measured to measure at least 1.2 s and 200 frames after its warm-up;
# then one --profile-gpu row each, for the GPU's time per frame. Before the rows: all-gpu
# streamed at 400 CPI/s (its post-frame p99) and the CuPy peer on the same scene frames. Every
# row's detections are compared with all-cpu's (bins exact, power within 1e-5 relative;
# cfar-gpu exact) and every run report is kept (their overhead sections say the source's and
# the host's time per frame); the summariser judges the rows (`gpu-check-summary.py`).
#
# Time: the copy rates, the stream and the peer come first, each under its own limit; the
# replay rows then share what is left until PCIE_MARGIN + PCIE_KILL seconds before the budget,
# each under min(what is left, three times its expected time plus 10 s), and start only when
# their expected time fits, so the step ends within its budget whatever any part does. The
# worst case before the rows (cli/tests/scripts.rs checks it from these numbers, docs/gpu.md
# states it): 5 (nvidia-smi) + 8 + 3 (copies) + 12 + 3 (stream) + 35 + 3 + 25 + 3 (the peer at
# both sizes) = 97 s, which leaves the rows at least 150 - 97 - 3 - 5 = 45 s of the 150 s budget.
PCIE_SIZES=(1024x128 4096x512)
PCIE_PLACEMENTS=(all-gpu hybrid gpu-fft cfar-gpu)
PCIE_ROUNDS=3
PCIE_SCENE_FRAMES=8
PCIE_COPY_LIMIT=8
PCIE_STREAM_LIMIT=12
PCIE_CUPY_SMALL_LIMIT=35
PCIE_CUPY_LARGE_LIMIT=25
PCIE_KILL=3
PCIE_MARGIN=5
# A row's measured part: at least this many seconds and frames, at the rate last measured, but
# at most PCIE_ROW_CAP_S seconds of frames; each process's start-up (CUDA, NVRTC, plans, the
# staging of the scene frames) is reckoned at PCIE_START_S seconds.
PCIE_ROW_TARGET_S=1.2
PCIE_ROW_MIN_FRAMES=200
PCIE_ROW_CAP_S=5
PCIE_START_S=2
# The bytes of a frame's samples (the radar's iq tensor: ci16, 4 bytes a sample).
pcie_frame_bytes() { echo $((${1%x*} * ${1#*x} * 4)); }
# The probe's measured frames at each size (a first guess, enough for a placement at 50 CPI/s).
pcie_probe_frames() { case $1 in 1024x128) echo 400 ;; *) echo 100 ;; esac; }

# Seconds left before the rows' deadline (PCIE_DEADLINE, on this step's $SECONDS).
pcie_left() { echo $((PCIE_DEADLINE - SECONDS)); }

# One line of results/pcie.jsonl.
pcie_jsonl() { jsonl "$GC_SCRATCH/results/pcie.jsonl" "$@"; }

# A row not run: KIND PLACEMENT CPI ROUND REASON.
pcie_skip() {
    pcie_jsonl "kind=$(str "$1")" "placement=$(str "$2")" "cpi=$(str "$3")" "round=$4" 'rc=null' \
        "skipped=$(str "$5")"
    log "pcie $2 $3 $1 $4: skipped: $5"
}

# The plan of a placement's next run from REPORT, its last run: prints `RATE MEASURED WARMUP
# EXPECTED_S`, measuring TARGET_S seconds and at least MIN frames, at most CAP_S seconds of them.
# Fails when no time is left (status 2) or REPORT gives no rate (1; logs/pcie-plan.txt says why).
pcie_plan() {
    local report=$1 target=$2 min=$3 cap=$4 left
    left=$(pcie_left)
    [ "$left" -gt 0 ] || return 2
    bounded $((left < 5 ? left : 5)) python3 "$GC_SUMMARIZER" pcie-plan "$report" "$target" "$min" "$cap" \
        "$PCIE_START_S" 2>> "$GC_SCRATCH/logs/pcie-plan.txt" || return 1
}

# A sized run: KIND PLACEMENT CPI ROUND TARGET_S, planned from the placement's last run
# (last[PLACEMENT-CPI]); the profiled run's expected time doubled (the path without graphs is
# slower). Returns 0 when it ran and passed.
pcie_sized() {
    local kind=$1 p=$2 cpi=$3 round=$4 target=$5 plan rate measured warmup expected status=0
    if [ -z "${last[$p-$cpi]:-}" ]; then
        pcie_skip "$kind" "$p" "$cpi" "$round" "no passing run of it to size it by (its probe failed or was skipped)"
        return 1
    fi
    plan=$(pcie_plan "${last[$p-$cpi]}" "$target" "$PCIE_ROW_MIN_FRAMES" "$PCIE_ROW_CAP_S") || status=$?
    case $status in
        0) ;;
        2) pcie_skip "$kind" "$p" "$cpi" "$round" "no time left of the step's budget"; return 1 ;;
        *) pcie_skip "$kind" "$p" "$cpi" "$round" "no rate in ${last[$p-$cpi]#"$GC_SCRATCH/"} (logs/pcie-plan.txt)"; return 1 ;;
    esac
    read -r rate measured warmup expected <<< "$plan"
    [ "$kind" = profiled ] && expected=$((2 * expected))
    log "pcie $p $cpi $kind $round: $measured frames after $warmup at the $rate CPI/s last measured"
    pcie_replay "$kind" "$p" "$cpi" "$round" "$measured" "$warmup" "$expected"
}

# One closed-loop replay: KIND (reference, probe, row or profiled) PLACEMENT CPI ROUND MEASURED
# WARMUP EXPECTED_S; then, but for the reference, its detections against all-cpu's on the same
# frames. Returns 0 when it ran and its report says it passed its verification.
pcie_replay() {
    local kind=$1 p=$2 cpi=$3 round=$4 measured=$5 warmup=$6 expected=$7
    local dir=$GC_SCRATCH/pcie/$cpi base name frames=$(($5 + $6)) profile=() limit left rc start
    local crc=null rule=null how seconds
    name=$p-$kind-$round
    base=pcie/$cpi/$name
    left=$(pcie_left)
    if [ "$left" -lt $((expected + PCIE_START_S)) ]; then
        pcie_skip "$kind" "$p" "$cpi" "$round" "$left s left of the step's budget; the run needs about $expected s"
        return 1
    fi
    limit=$((3 * expected + 10))
    [ "$limit" -le "$left" ] || limit=$left
    [ "$kind" = profiled ] && profile=(--profile-gpu)
    mkdir -p "$dir"
    start=$(now)
    bounded -k "$PCIE_KILL" "$limit" "$GC_KPLACE" run --placement "workloads/radar/placements/$p.yaml" \
        --cpi "$cpi" --frames "$frames" --warmup-frames "$warmup" --scene-frames "$PCIE_SCENE_FRAMES" \
        "${profile[@]}" --detections "$dir/$name.det" --report "$dir/$name.json" > "$dir/$name.log" 2>&1
    rc=$?
    seconds=$(elapsed "$start" "$(now)")
    if [ "$kind" != reference ] && [ "$rc" -eq 0 ]; then
        # all-cpu's first scene frames, repeated to this run's frames, against this run's.
        rule='"rel 1e-5"'
        how=(--rel-tol 1e-5)
        if [ "$p" = cfar-gpu ]; then how=(--exact); rule='"exact"'; fi
        left=$(pcie_left)
        crc=2
        if [ "$left" -gt 0 ] && bounded $((left < 20 ? left : 20)) python3 "$GC_SUMMARIZER" tile \
            "$dir/all-cpu-reference-0.det" "$PCIE_SCENE_FRAMES" "$frames" "$dir/$name.reference.det" \
            2> "$dir/$name.compare.err"; then
            left=$(pcie_left)
            bounded $((left < 20 ? (left > 1 ? left : 1) : 20)) "$GC_KPLACE" compare-detections \
                "$dir/$name.reference.det" "$dir/$name.det" "${how[@]}" --frames "$frames" --json \
                > "$dir/$name.compare.json" 2>> "$dir/$name.compare.err"
            crc=$?
        fi
        # The files are as large as the run was long: kept only where they differ.
        rm -f "$dir/$name.reference.det"
        [ "$crc" -eq 0 ] && rm -f "$dir/$name.det"
    fi
    pcie_jsonl "kind=$(str "$kind")" "placement=$(str "$p")" "cpi=$(str "$cpi")" "round=$round" \
        "frames=$frames" "warmup=$warmup" "expected_s=$expected" "limit_s=$limit" "rc=$rc" \
        "seconds=$seconds" "base=$(str "$base")" "compare_rc=$crc" "rule=$rule"
    log "pcie $p $cpi $kind $round: $frames frames ($warmup warm-up): rc $rc in ${seconds}s, compare rc $crc"
    [ "$rc" -eq 0 ]
}

# all-gpu at 1024x128 streamed over UDP at 400 CPI/s for 3 s, every frame verified: its
# post-frame p99, within PCIE_STREAM_LIMIT seconds in all.
pcie_stream() {
    local base=pcie/stream-all-gpu-1024x128 rate=400 frames=1200 receiver rc port start=$SECONDS
    rm -f "$GC_SCRATCH/$base.ready"
    bounded -k "$PCIE_KILL" "$PCIE_STREAM_LIMIT" "$GC_KPLACE" run --source udp://127.0.0.1:0 \
        --ready-file "$GC_SCRATCH/$base.ready" --idle-timeout-s 1 --start-timeout-s 5 \
        --placement workloads/radar/placements/all-gpu.yaml --cpi 1024x128 --frames "$frames" \
        --warmup-frames $((rate / 4)) --scene-frames "$PCIE_SCENE_FRAMES" \
        --report "$GC_SCRATCH/$base.json" > "$GC_SCRATCH/$base.log" 2>&1 &
    receiver=$!
    if wait_ready "$GC_SCRATCH/$base.ready" "$receiver" 2>> "$GC_SCRATCH/$base.log"; then
        port=$(grep -o 'udp://[0-9.]*:[0-9]*' "$GC_SCRATCH/$base.ready" | head -n 1)
        bounded -k 1 $((PCIE_STREAM_LIMIT - (SECONDS - start) > 1 ? PCIE_STREAM_LIMIT - (SECONDS - start) : 1)) \
            "$GC_KPLACE" send --dest "127.0.0.1:${port##*:}" --cpi 1024x128 --rate "$rate" \
            --frames "$frames" --scene-frames "$PCIE_SCENE_FRAMES" > "$GC_SCRATCH/$base.send.log" 2>&1
    fi
    wait "$receiver"
    rc=$?
    pcie_jsonl 'kind="stream"' 'placement="all-gpu"' 'cpi="1024x128"' 'round=0' "rate=$rate" \
        "frames=$frames" "rc=$rc" "seconds=$((SECONDS - start))" "base=$(str "$base")"
    log "pcie stream all-gpu 1024x128 at $rate CPI/s: rc $rc"
}

# The CuPy peer (bench/peers/cupy/test.sh) on the same scene frames at each size: its rate over
# at least a second of frames on the previous leases' H200 (about 400 to 800 CPI/s at either
# size), and kplace's all-gpu on the same frames; "skipped" without CuPy.
pcie_cupy() {
    local cpi frames warmup limit rc said
    for cpi in "${PCIE_SIZES[@]}"; do
        case $cpi in
            1024x128) frames=1300 warmup=100 limit=$PCIE_CUPY_SMALL_LIMIT ;;
            *) frames=840 warmup=40 limit=$PCIE_CUPY_LARGE_LIMIT ;;
        esac
        KEEP_DIR="$GC_SCRATCH/pcie/cupy-$cpi" KPLACE="$GC_KPLACE" FRAMES=$frames WARMUP=$warmup \
            SCENE_FRAMES=$PCIE_SCENE_FRAMES KPLACE_REQUIRE_GPU=0 \
            bounded -k "$PCIE_KILL" "$limit" bench/peers/cupy/test.sh "$cpi" > "$GC_SCRATCH/logs/pcie-cupy-$cpi.txt" 2>&1
        rc=$?
        said=$(grep -m 1 '^skipped: ' "$GC_SCRATCH/logs/pcie-cupy-$cpi.txt")
        if [ "$rc" -eq 0 ] && [ -n "$said" ]; then
            pcie_jsonl 'kind="cupy"' "cpi=$(str "$cpi")" 'rc=null' "skipped=$(str "${said#skipped: }")"
            log "pcie cupy peer: $said"
            return 0
        fi
        # The peer's detections are as large as its run: compare.json says how they compared.
        rm -f "$GC_SCRATCH/pcie/cupy-$cpi/peer.txt" "$GC_SCRATCH/pcie/cupy-$cpi/kplace.txt"
        pcie_jsonl 'kind="cupy"' "cpi=$(str "$cpi")" "rc=$rc" "frames=$frames" "warmup=$warmup" \
            "limit_s=$limit" "dir=$(str "pcie/cupy-$cpi")"
        log "pcie cupy peer $cpi: rc $rc"
    done
}

step_pcie() {
    local cpi p round sizes=() list probe plan rate measured warmup expected
    # The placements' last passing runs, which size their next ones (pcie_sized).
    local -A last=()
    PCIE_DEADLINE=$((SECONDS + $(budget_of pcie) - PCIE_MARGIN - PCIE_KILL))
    mkdir -p "$GC_SCRATCH/pcie"
    for cpi in "${PCIE_SIZES[@]}"; do sizes+=("$(pcie_frame_bytes "$cpi")"); done
    list=$(IFS=,; echo "${sizes[*]}")
    copy_rates "$PCIE_COPY_LIMIT" "$list" "$GC_SCRATCH/results/pcie-copies.jsonl" "$GC_SCRATCH/logs/pcie-copies.txt"
    pcie_jsonl 'kind="copies"' "rc=$?" "sizes=$(str "$list")"
    pcie_stream
    pcie_cupy
    # The reference and the probes, then the rounds, then the profiled runs; what the time
    # left cannot fit is skipped, saying so.
    for cpi in "${PCIE_SIZES[@]}"; do
        pcie_replay reference all-cpu "$cpi" 0 "$PCIE_SCENE_FRAMES" "$PCIE_SCENE_FRAMES" "$PCIE_START_S"
        for p in "${PCIE_PLACEMENTS[@]}"; do
            probe=$GC_SCRATCH/pcie/$cpi/$p-probe-0.json
            pcie_replay probe "$p" "$cpi" 0 "$(pcie_probe_frames "$cpi")" 16 $((PCIE_START_S + 8)) || continue
            last[$p-$cpi]=$probe
            # A probe too short to time well is followed by one of about 0.3 s.
            if plan=$(pcie_plan "$probe" 0.3 100 1); then
                read -r rate measured warmup expected <<< "$plan"
                if [ "$measured" -gt "$(pcie_probe_frames "$cpi")" ]; then
                    pcie_replay probe "$p" "$cpi" 1 "$measured" "$warmup" "$expected" \
                        && last[$p-$cpi]=$GC_SCRATCH/pcie/$cpi/$p-probe-1.json
                fi
            fi
        done
    done
    for ((round = 1; round <= PCIE_ROUNDS; round++)); do
        for cpi in "${PCIE_SIZES[@]}"; do
            for p in "${PCIE_PLACEMENTS[@]}"; do
                pcie_sized row "$p" "$cpi" "$round" "$PCIE_ROW_TARGET_S" \
                    && last[$p-$cpi]=$GC_SCRATCH/pcie/$cpi/$p-row-$round.json
            done
        done
    done
    # The GPU's time per frame needs no second of frames: the least a row measures.
    for cpi in "${PCIE_SIZES[@]}"; do
        for p in "${PCIE_PLACEMENTS[@]}"; do
            pcie_sized profiled "$p" "$cpi" 0 0
        done
    done
    return 0
}

# ---------------------------------------------------------------------------------------------
# The headline table (the `table` suite, bench/gpu-table.sh): the sustained input rate over a
# paced UDP stream, every frame verified, of all-cpu, all-gpu, hybrid and cfar-gpu at three
# sizes, alone (`alone`) and beside `kplace hog gpu` (`hog`), and of four process-mode all-gpu
# pipelines at 2048x256 with MPS off and on (`mps`), in parts of at most 470 s. Every search
# is short but honest: the robust goal as the check's bisect step states it (RFC 9971: a rate
# meets it when trials with more than 1% of their frames lost, unverified or past the deadline
# take at most half of 3 full-length trials' time), 0.5 s short trials and 1 s full-length
# ones (at least 30 frames) after 0.25 s of warm-up (at least 10 frames), a width of 5%, at
# most 24 trials; the latency budget is bisect-rate's default, the CPI's deadline. Each size's
# ingest-only bound (a burst into `kplace run --ingest-only`) is measured in the same part,
# so that each answer says which bound it met.
TABLE_PLACEMENTS=workloads/radar/placements/all-cpu.yaml,workloads/radar/placements/all-gpu.yaml,workloads/radar/placements/hybrid.yaml,workloads/radar/placements/cfar-gpu.yaml
TABLE_SIZES=(1024x128 2048x256 4096x512)
TABLE_SEARCH=(--goals robust:0.01:0.5:3 --width 0.05 --warmup 0.25s --initial-window 0.5s
    --window 1s --max-trials 24)
# Seconds: each size's side-by-side sweep (alone, hog) and each MPS sweep get SIGINT at their
# limit (they then write what they found) and are killed 10 s later; each ingest-only bound
# ends within its limit and 3 s to kill it; every other command of a part has its own limit.
# The worst case of a part is within its 470 s budget (docs/gpu.md; cli/tests/scripts.rs checks
# it from these numbers): alone and hog 4 x 5 + 3 x (15 + 3 + 110 + 10) + 10 + 10 + 5 = 459 s,
# mps 4 x 5 + 2 x (15 + 3) + 6 x (54 + 10) + 10 + 10 + 5 = 465 s.
TABLE_SWEEP_LIMIT=110
TABLE_MPS_LIMIT=54
TABLE_MPS_ROUNDS=3
TABLE_INGEST_LIMIT=15
# The first rate each search tries, per CPI/s: below every placement's answer, so that the
# short trials double up to it in a few steps (bisect-rate's default, the CPI's real-time rate,
# would spend 4 s of stream on a 30-frame trial at 4096x512).
table_start_rate() { case $1 in 1024x128) echo 300 ;; 2048x256) echo 80 ;; *) echo 20 ;; esac; }
# Frames of an ingest-only burst: a second or so of the receiver at each size.
table_burst_frames() { case $1 in 1024x128) echo 2000 ;; 2048x256) echo 1000 ;; *) echo 250 ;; esac; }
GC_TABLE=$PWD/bench/gpu-table.py

# The ingest-only bound of PIPELINES receivers at once at CPI, fed FRAMES frames each by a
# burst sender: each receiver's rate, into the part's ingest.jsonl.
table_ingest() {
    local dir=$1 cpi=$2 frames=$3 pipelines=$4 i base pids=() senders=() rc=0 port start t0=$SECONDS pid
    start=$(now)
    for ((i = 0; i < pipelines; i++)); do
        base=$dir/ingest-$cpi-x$pipelines-$i
        rm -f "$base.ready"
        bounded -k 3 "$TABLE_INGEST_LIMIT" "$GC_KPLACE" run --ingest-only --cpi "$cpi" --frames "$frames" \
            --source udp://127.0.0.1:0 --ready-file "$base.ready" --idle-timeout-s 2 \
            > "$base.txt" 2> "$base.log" &
        pids+=($!)
    done
    for ((i = 0; i < pipelines; i++)); do
        base=$dir/ingest-$cpi-x$pipelines-$i
        if ! wait_ready "$base.ready" "${pids[$i]}" 2>> "$base.log"; then
            rc=1
            continue
        fi
        port=$(grep -o 'udp://[0-9.]*:[0-9]*' "$base.ready" | head -n 1)
        port=${port##*:}
        # Within what is left of the bound's limit: the whole measurement ends by then.
        bounded -k 3 "$((TABLE_INGEST_LIMIT - (SECONDS - t0) > 1 ? TABLE_INGEST_LIMIT - (SECONDS - t0) : 1))" \
            "$GC_KPLACE" send --dest "127.0.0.1:$port" --cpi "$cpi" --burst \
            --frames "$frames" --scene-frames 8 > "$base.send.txt" 2>&1 &
        senders+=($!)
    done
    [ "${#senders[@]}" -gt 0 ] && wait "${senders[@]}"
    for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
    jsonl "$dir/ingest.jsonl" "cpi=$(str "$cpi")" "pipelines=$pipelines" "frames=$frames" "rc=$rc" \
        "seconds=$(elapsed "$start" "$(now)")" "files=$(str "ingest-$cpi-x$pipelines")"
    log "table: ingest-only bound at $cpi, $pipelines receiver(s): rc $rc"
}

# One sweep of a part: NAME CPI CONDITION REPEAT LIMIT BISECT_ARGS...; its results in DIR/NAME.
table_sweep() {
    local dir=$1 name=$2 cpi=$3 condition=$4 repeat=$5 limit=$6 rc start
    shift 6
    start=$(now)
    bounded -s INT -k 10 "$limit" "$GC_KPLACE" bisect-rate --cpi "$cpi" "${TABLE_SEARCH[@]}" \
        --start-rate "$(table_start_rate "$cpi")" --out "$dir/$name" "$@" \
        > "$dir/$name.table.md" 2> "$dir/$name.log"
    rc=$?
    jsonl "$dir/sweeps.jsonl" "name=$(str "$name")" "cpi=$(str "$cpi")" "condition=$(str "$condition")" \
        "repeat=$repeat" "rc=$rc" "seconds=$(elapsed "$start" "$(now)")" "limit_s=$limit" \
        "args=$(str "$*")"
    log "table: sweep $name ($condition, $cpi): rc $rc"
}

# Runs part PART (alone, hog or mps) unless this device model has it already; its files go to
# table/DEVICE/PART-DATE/ (the layout of docs/results/gpu-table/DEVICE/), merged with the
# parts before it into table/DEVICE/gpu-table.json, drawn by `kplace plot`.
table_part() {
    local part=$1 slug uuid name id dir base merged rc extra=() round order condition mps_args cpi
    IFS=$'\t' read -r slug uuid name < <(bounded 5 python3 "$GC_TABLE" device "$GC_SCRATCH/results/preflight.json")
    base=${KPLACE_GPU_TABLE_RESULTS:-docs/results/gpu-table}/$slug/gpu-table.json
    merged=$GC_SCRATCH/table/$slug/gpu-table.json
    mkdir -p "$GC_SCRATCH/table/$slug"
    # A part measured earlier in this call counts too (a forced run, or a dry run).
    [ -f "$merged" ] && base=$merged
    if [ "${KPLACE_GPU_TABLE_FORCE:-0}" != 1 ] \
        && bounded 5 python3 "$GC_TABLE" measured "$base" "$part" > "$GC_SCRATCH/logs/table-$part-measured.txt" 2>&1; then
        jsonl "$GC_SCRATCH/results/table.jsonl" "part=$(str "$part")" 'status="already measured"' \
            "device=$(str "$name")" "said=$(str "$(head -n 1 "$GC_SCRATCH/logs/table-$part-measured.txt")")"
        log "table part $part: already measured on $name: $(head -n 1 "$GC_SCRATCH/logs/table-$part-measured.txt")"
        return 0
    fi
    id=$part-$(date -u +%Y%m%dT%H%M%SZ)
    dir=$GC_SCRATCH/table/$slug/$id
    mkdir -p "$dir"
    bounded 5 python3 "$GC_TABLE" begin "$dir/part.json" "$part" "$id" "$GC_SCRATCH/results/preflight.json" \
        "$(cat "$GC_BUNDLE/commit.txt" 2> /dev/null || echo unknown)" "$TABLE_SWEEP_LIMIT" "$TABLE_MPS_LIMIT" \
        "${TABLE_SEARCH[*]}" "$TABLE_PLACEMENTS"
    case $part in
        alone | hog)
            [ "$part" = hog ] && extra=(--cotenant gpu-hog --cotenant-intensity 1)
            for cpi in "${TABLE_SIZES[@]}"; do
                table_ingest "$dir" "$cpi" "$(table_burst_frames "$cpi")" 1
                table_sweep "$dir" "$part-$cpi" "$cpi" "$part" 0 "$TABLE_SWEEP_LIMIT" \
                    --placements "$TABLE_PLACEMENTS" "${extra[@]}"
            done
            ;;
        mps)
            table_ingest "$dir" 2048x256 "$(table_burst_frames 2048x256)" 1
            table_ingest "$dir" 2048x256 "$(table_burst_frames 2048x256)" 4
            for ((round = 0; round < TABLE_MPS_ROUNDS; round++)); do
                for order in off on; do
                    condition=mps-$order
                    if [ "$order" = on ] && ! command -v nvidia-cuda-mps-control > /dev/null; then
                        jsonl "$dir/sweeps.jsonl" "name=$(str "$condition-$round")" 'cpi="2048x256"' \
                            "condition=$(str "$condition")" "repeat=$round" 'rc=null' \
                            'skipped="no MPS control (nvidia-cuda-mps-control is not on PATH, in /usr/local/nvidia/bin or in /usr/local/cuda/bin)"'
                        continue
                    fi
                    mps_args=(--mps "$order")
                    table_sweep "$dir" "$condition-$round" 2048x256 "$condition" "$round" "$TABLE_MPS_LIMIT" \
                        --placements workloads/radar/placements/all-gpu.yaml --pipelines 4 \
                        --pipeline-mode process "${mps_args[@]}"
                done
            done
            ;;
    esac
    bounded 5 python3 "$GC_TABLE" end "$dir/part.json"
    bounded 10 python3 "$GC_TABLE" merge "$base" "$dir" "$merged" > "$GC_SCRATCH/logs/table-merge-$part.txt" 2>&1
    rc=$?
    bounded 10 "$GC_KPLACE" plot "$merged" --out "$GC_SCRATCH/table/$slug" >> "$GC_SCRATCH/logs/table-merge-$part.txt" 2>&1
    bounded 5 python3 "$GC_TABLE" render "$merged" > "$GC_SCRATCH/table/$slug/table.md" 2>> "$GC_SCRATCH/logs/table-merge-$part.txt"
    jsonl "$GC_SCRATCH/results/table.jsonl" "part=$(str "$part")" 'status="measured"' "device=$(str "$name")" \
        "uuid=$(str "$uuid")" "id=$(str "$id")" "dir=$(str "table/$slug/$id")" "merge_rc=$rc" \
        "accumulated=$(str "table/$slug/gpu-table.json")"
    log "table part $part: measured into table/$slug/$id"
}

step_alone() { table_part alone; }
step_hog() { table_part hog; }
step_mps() { table_part mps; }

if [ "${1:-}" = --step ]; then
    "step_$2"
    exit $?
fi

# ---------------------------------------------------------------------------------------------
# The call.

bundle=${KPLACE_BUNDLE:-target/gpu-check}
out=${OUT:-${OUT_DIR:-target/gpu-check-out}}
limit_s=${KPLACE_GPU_CHECK_LIMIT_S:-540}
KPLACE_GPU_CHECK_STEPS=${KPLACE_GPU_CHECK_STEPS:-}
selected=" ${KPLACE_GPU_CHECK_STEPS//,/ } "
mkdir -p "$out" || exit 2
# The summary when nothing else can write one: STATUS REASON.
bare_summary() {
    printf '{"schema": "kplace-gpu-check/4", "status": "%s", "reason": "%s"}\n' "$1" "$2" > "$out/summary.json"
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
# What the summary says of the call: the suite, the bundle's commit (bench/gpu-bundle.sh
# writes it: the GPU machine has no git history) and when the call began.
printf '{"suite": "%s", "commit": "%s", "date": "%s", "limit_s": %s}\n' "$SUITE" \
    "$(head -n 1 "$abs_bundle/commit.txt" 2> /dev/null || echo unknown)" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    "$limit_s" > "$scratch/call.json"
export GC_SCRATCH=$scratch GC_SUMMARIZER=$summarizer GC_BUNDLE=$abs_bundle GC_KPLACE=$abs_bundle/bin/kplace
export KPLACE_LIB_DIR=$abs_bundle/lib KPLACE_BIN=$abs_bundle/bin/kplace KPLACE_WORKSPACE=$PWD
export KPLACE_GPU_CHECK_BUDGETS=${KPLACE_GPU_CHECK_BUDGETS:-}

# Rewrites the three files in $OUT from the scratch directory, within 20 seconds.
publish() {
    bounded 10 python3 "$summarizer" summary "$scratch" "$out" 2>> "$scratch/logs/summarize.txt" \
        || bare_summary error "the summary could not be written (logs/summarize.txt in results.tar.gz)"
    bounded 8 tar -czf "$scratch/results.tar.gz" -C "$scratch" --exclude results.tar.gz --exclude mps \
        --exclude "*.sigmf-data" . 2> /dev/null
    cp "$scratch/results.tar.gz" "$out/results.tar.gz"
}

# The processes in process group PGID, one line each: pid and command line (from /proc: no
# procps needed).
group_members() {
    local pgid=$1 f line fields
    for f in /proc/[0-9]*/stat; do
        line=$(cat "$f" 2> /dev/null) || continue
        read -r -a fields <<< "${line##*) }"
        [ "${fields[2]:-}" = "$pgid" ] || continue
        f=${f%/stat}
        echo "${f#/proc/} $(tr '\0' ' ' < "$f/cmdline" 2> /dev/null)"
    done
}

# Ends what is left of a step's process group PGID: TERM, then KILL a second later. Logs each
# process left (to LOG) and prints how many there were.
end_group() {
    local pgid=$1 log_file=$2 members line
    kill -0 -- "-$pgid" 2> /dev/null || { echo 0; return 0; }
    members=$(group_members "$pgid")
    [ -n "$members" ] || { echo 0; return 0; }
    log "ending $(wc -l <<< "$members") process(es) the step left running"
    while IFS= read -r line; do echo "gpu-check: left running: $line"; done <<< "$members" >> "$log_file"
    kill -TERM -- "-$pgid" 2> /dev/null
    sleep 1
    kill -KILL -- "-$pgid" 2> /dev/null
    wc -l <<< "$members"
}

started=$SECONDS
for i in "${!STEPS[@]}"; do
    name=${STEPS[$i]}
    budget=$(budget_of "$name")
    left=$((limit_s - (SECONDS - started)))
    skip=""
    if [ "$name" != preflight ] && [ -n "${KPLACE_GPU_CHECK_STEPS:-}" ] && [[ "$selected" != *" $name "* ]]; then
        skip="not selected (KPLACE_GPU_CHECK_STEPS)"
    elif [ $((budget + KILL_GRACE + CLEANUP_LIMIT)) -gt "$left" ]; then
        skip="its budget of $budget s, with $KILL_GRACE s to end it and $CLEANUP_LIMIT s to clean up and publish, exceeds the $left s left of the $limit_s s limit"
    fi
    if [ -n "$skip" ]; then
        log "== step $((i + 1))/${#STEPS[@]}: $(title_of "$name"): skipped: $skip"
        jsonl "$scratch/steps.jsonl" "step=$(str "$name")" "budget_s=$budget" 'rc=null' 'seconds=null' \
            "skipped=$(str "$skip")"
        [ "$name" = preflight ] && { publish; exit 1; }
        publish
        continue
    fi
    log "== step $((i + 1))/${#STEPS[@]}: $(title_of "$name") (budget $budget s)"
    t0=$SECONDS
    # `timeout` puts the step in a process group of its own (its pid), ended whole below.
    timeout -k "$KILL_GRACE" "$budget" "$self" --step "$name" > >(tee "$scratch/logs/step-$name.txt" >&2) 2>&1 &
    step=$!
    wait "$step"
    rc=$?
    leftover=$(end_group "$step" "$scratch/logs/step-$name.txt")
    jsonl "$scratch/steps.jsonl" "step=$(str "$name")" "budget_s=$budget" "rc=$rc" \
        "seconds=$((SECONDS - t0))" "leftover_processes=${leftover:-0}"
    if { [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; } && command -v nvidia-cuda-mps-control > /dev/null; then
        # A step killed with MPS on leaves its daemon, which is a session of its own: the share
        # step's in the scratch directory, bisect-rate's (admit, the table's mps part) in
        # kplace's default directory. One stop, within the 10 s the cleanup allows it.
        case $name in
            share) [ -d "$scratch/mps" ] && bounded 10 "$KPLACE_BIN" mps stop --dir "$scratch/mps" \
                >> "$scratch/logs/step-$name.txt" 2>&1 ;;
            admit | mps) bounded 10 "$KPLACE_BIN" mps stop >> "$scratch/logs/step-$name.txt" 2>&1 ;;
        esac
    fi
    if [ "$name" = preflight ]; then
        # The judgement, outside the step's budget.
        bounded 10 python3 "$summarizer" preflight "$scratch" 2>&1 | tee -a "$scratch/logs/step-preflight.txt" >&2
        judged=${PIPESTATUS[0]}
        if [ "$rc" -ne 0 ] || [ "$judged" -ne 0 ]; then
            publish
            log "stopped after the preflight: $(python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("reason"))' "$out/summary.json")"
            cat "$out/table.md" >&2
            exit 1
        fi
        # The CUDA user-space libraries kplace found, for programs that look on the loader path
        # (compute-sanitizer, the test executables' own dlopen of cuFFT and NVRTC).
        libpath=$(cat "$scratch/preflight/library_path.txt" 2> /dev/null)
        [ -n "$libpath" ] && export LD_LIBRARY_PATH="$libpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        # The driver's tools where a container mounts them off PATH (the MPS test looks on PATH).
        export PATH
        for tool in nvidia-smi nvidia-cuda-mps-control; do
            path=$(find_tool "$tool") && [[ ":$PATH:" != *":$(dirname "$path"):"* ]] \
                && PATH="$PATH:$(dirname "$path")"
        done
    fi
    publish
done
log "done in $((SECONDS - started)) s"
cat "$out/table.md" >&2
python3 -c 'import json, sys; sys.exit(0 if json.load(open(sys.argv[1]))["status"] == "passed" else 1)' "$out/summary.json"

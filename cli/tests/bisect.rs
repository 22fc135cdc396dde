//! A short real search: all-cpu at 1024x128 over loopback with small windows. It must pass
//! K/K at a positive rate and have failed above it; a placement that cannot run is skipped
//! with the planner's reason.

#[path = "../../runtime/tests/support/mod.rs"]
mod support;

use std::process::Command;

/// A search that ends in a few trials: small windows, a wide tolerance, 1/1 confirmation.
const QUICK_SEARCH: &[&str] = &[
    "--cpi",
    "1024x128",
    "--warmup-s",
    "0.1",
    "--window-s",
    "0.3",
    "--tolerance",
    "0.5",
    "--confirm",
    "1",
];

/// Searches run one at a time: each runs paced senders and receivers, and several at once on a
/// two-core machine fail each other's trials.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `kplace bisect-rate` with `args` into a fresh output directory, expecting it to have
/// run every search (exit 0, or 1 no rate found, 3 some skipped, 4 unsteady machine, 5 below
/// --require-rate); returns
/// its exit code, table, JSON results, and the directory (for the files beside them).
fn bisect(args: &[&str]) -> (String, serde_json::Value, tempfile::TempDir) {
    let (_, stdout, json, dir) = bisect_status(args);
    (stdout, json, dir)
}

fn bisect_status(args: &[&str]) -> (Option<i32>, String, serde_json::Value, tempfile::TempDir) {
    let _serial = serial();
    // A space and a quote in the directory's name: --sut-cmd's path placeholders must reach
    // the shell quoted.
    let out_dir = tempfile::Builder::new()
        .prefix("bisect out's ")
        .tempdir()
        .unwrap();
    let out = support::output(
        Command::new(env!("CARGO_BIN_EXE_kplace"))
            .current_dir(support::workspace())
            .arg("bisect-rate")
            .args(args)
            .arg("--out")
            .arg(out_dir.path()),
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Short searches on a loaded machine can end at their trial cap or unsteady; the tests
    // that need a rate assert it themselves.
    let code = out.status.code();
    assert!(
        matches!(code, Some(0 | 1 | 3 | 4 | 5)),
        "exit {code:?}\n{stdout}\n{stderr}"
    );
    if code == Some(1) {
        assert!(stderr.contains("bisect-rate: no rate found"), "{stderr}");
    }
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out_dir.path().join("bisect-rate.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(json["schema"], "kplace-bisect-rate/2");
    (code, stdout, json, out_dir)
}

/// Whether a trial of the results file passed.
fn passed(trial: &serde_json::Value) -> bool {
    trial["status"] == "passed"
}

#[test]
fn a_short_search_finds_a_confirmed_rate_with_a_tested_failure_above_it() {
    let (_gpu_dir, gpu) = support::write_temp(
        "gpu.yaml",
        "name: gpu\nstages: {range_fft: gpu, doppler_fft: gpu, cfar: gpu, cluster: gpu}\n",
    );
    let placements = format!("placements/all-cpu.yaml,{}", gpu.display());
    let (code, stdout, json, out_dir) = bisect_status(&[
        "--cpi",
        "1024x128",
        "--warmup-s",
        "0.1",
        "--window-s",
        "0.3",
        "--tolerance",
        "0.1",
        "--confirm",
        "2",
        "--max-trials",
        "30",
        "--placements",
        &placements,
    ]);
    assert!(stdout.contains("| all-cpu | 1024x128 |"), "{stdout}");
    assert!(
        stdout.contains("| gpu | 1024x128 | skipped: ") && stdout.contains("placed on gpu:0"),
        "{stdout}"
    );
    let result = &json["searches"][0];
    if result["outcome_kind"] == "unsteady" {
        // The machine, not kplace, decided (docs/bisect-rate.md): no rate to check.
        assert_eq!(code, Some(4), "{stdout}");
        println!("skipped the rate checks: {}", result["outcome"]);
        return;
    }
    let sustained = result["sustained_cpi_per_s"]
        .as_f64()
        .expect("a sustained rate");
    assert!(sustained > 0.0);
    assert_eq!(code, Some(3), "a rate found, one placement skipped");
    assert_eq!(
        result["latency_budget"],
        serde_json::json!({"rule": "deadline", "cpi_duration_ms": 6.4})
    );
    assert!(
        stdout.contains("deadline (max of 6.4 ms and 1/R)"),
        "{stdout}"
    );
    let (pass, fail) = (&result["highest_pass"], &result["lowest_fail"]);
    assert_eq!(pass.as_f64(), Some(sustained), "the bracket's low end");
    assert!(fail.as_f64().unwrap() > sustained, "{fail}");
    let trials = result["trials"].as_array().unwrap();
    let passes_at = |r: f64| {
        trials
            .iter()
            .filter(|t| t["rate"].as_f64() == Some(r) && passed(t))
            .count()
    };
    assert!(passes_at(sustained) >= 2, "confirmed K/K at {sustained}");
    assert!(
        trials
            .iter()
            .any(|t| t["status"] == "failed" && t["rate"].as_f64().unwrap() > sustained),
        "a failure above the result was tested: {trials:?}"
    );
    assert!(
        json["searches"][1]["skipped"]
            .as_str()
            .unwrap()
            .contains("gpu")
    );
    assert!(
        out_dir
            .path()
            .join("trials-all-cpu-1024x128-0.csv")
            .is_file()
    );
}

#[test]
fn another_receiver_is_measured_by_the_same_sender_verifier_and_search() {
    // kplace's own receiver, run as an outside command: it only has to listen, write
    // detections in the documented format, and exit.
    let kplace = env!("CARGO_BIN_EXE_kplace");
    let sut = format!(
        "{kplace} run --source udp://127.0.0.1:{{port}} --cpi {{cpi}} --frames {{frames}} \
         --scene-frames 16 --idle-timeout-s 1 --detections {{detections}}"
    );
    let (stdout, json, out_dir) = bisect(&[
        "--cpi",
        "1024x128",
        "--warmup-s",
        "0.1",
        "--window-s",
        "0.3",
        "--tolerance",
        "0.2",
        "--confirm",
        "2",
        "--max-trials",
        "30",
        "--bounds",
        "--sut-cmd",
        &sut,
        "--sut-name",
        "outside",
    ]);
    assert!(
        stdout.contains("| outside | 1024x128 |") && stdout.contains("sustained / min(bounds)"),
        "{stdout}"
    );
    let result = &json["searches"][0];
    // Each trial leaves a typed record beside the receiver's detections and log.
    let record = out_dir
        .path()
        .join("outside-1024x128-0")
        .join("trial-0.json");
    let text =
        std::fs::read_to_string(&record).unwrap_or_else(|e| panic!("{}: {e}", record.display()));
    let trial: kplace_lab::rate::sweep::SutTrialReport =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}: {text}", record.display()));
    assert_eq!(trial.schema, kplace_lab::rate::sweep::SUT_TRIAL_SCHEMA);
    assert!(trial.latency.is_none(), "no {{times}}: no latency");
    assert!(trial.cores_used >= 0.0);
    for plot in ["latency", "sustained", "cdf", "stages"] {
        let svg = std::fs::read_to_string(out_dir.path().join(format!("{plot}.svg"))).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.contains("outside"),
            "{plot}.svg names its system"
        );
    }
    if result["outcome_kind"] == "unsteady" {
        println!("skipped the rate checks: {}", result["outcome"]);
        return;
    }
    assert!(
        result["sustained_cpi_per_s"]
            .as_f64()
            .expect("a sustained rate")
            > 0.0,
        "{result}"
    );
    assert!(
        result["bounds"]["ingest_only_cpi_per_s"]
            .as_f64()
            .expect("ingest-only bound")
            > 0.0
    );
    assert!(
        result["trials"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["latency"].is_null())
    );
}

#[test]
fn ctrl_c_ends_the_trial_and_writes_what_was_found() {
    let _serial = serial();
    let out_dir = tempfile::tempdir().unwrap();
    let child = support::Guard::spawn(
        Command::new(env!("CARGO_BIN_EXE_kplace"))
            .current_dir(support::workspace())
            .args([
                "bisect-rate",
                "--cpi",
                "1024x128",
                "--warmup-s",
                "1",
                "--window-s",
                "600",
            ])
            .arg("--out")
            .arg(out_dir.path()),
    );
    // Mid-trial: sender and receiver are running a ten-minute stream, so only ending them
    // (not waiting them out) lets this test finish in seconds.
    std::thread::sleep(std::time::Duration::from_secs(3));
    child.signal("INT");
    let out = child.wait(support::PROCESS_LIMIT);
    assert_eq!(out.status.code(), Some(130), "{}", out.stderr);
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out_dir.path().join("bisect-rate.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(json["searches"][0]["outcome"], "interrupted", "{json}");
    assert!(
        json["searches"][0]["trials"].as_array().unwrap().is_empty(),
        "the trial cut short is not recorded as a failure: {json}"
    );
}

/// Two pipelines per trial, each fed by its own sender: every trial judges both, and the
/// result records the per-pipeline and aggregate rate.
#[test]
fn a_search_over_two_pipelines_judges_each_and_reports_the_aggregate() {
    let (stdout, json, out_dir) = bisect(&[
        "--cpi",
        "1024x128",
        "--pipelines",
        "2",
        "--warmup-s",
        "0.1",
        "--window-s",
        "0.3",
        "--start-rate",
        "40",
        "--tolerance",
        "0.5",
        "--confirm",
        "1",
        "--max-trials",
        "6",
    ]);
    assert!(
        stdout.contains("| all-cpu x2 thread | 1024x128 |"),
        "{stdout}"
    );
    assert_eq!(json["settings"]["pipelines"], 2);
    let result = &json["searches"][0];
    assert_eq!(result["pipelines"], 2);
    let trials = result["trials"].as_array().unwrap();
    assert!(!trials.is_empty());
    // The first judged trial, at 40 CPI/s per pipeline, is easy: both pipelines pass it. (A
    // trial whose sender a loaded machine stalled is invalid, not judged, and repeated.)
    let judged = trials
        .iter()
        .find(|t| t["status"] != "invalid")
        .unwrap_or_else(|| panic!("no trial was judged: {trials:?}"));
    assert_eq!(judged["rate"], 40.0, "{trials:?}");
    assert!(passed(judged), "{trials:?}");
    if let Some(rate) = result["sustained_cpi_per_s"].as_f64() {
        assert_eq!(
            result["aggregate_sustained_cpi_per_s"].as_f64(),
            Some(2.0 * rate)
        );
    }
    // Failures, if any, name their pipeline, or the sender (two senders on a loaded machine
    // may not reach a high rate: that bounds the search, and is no pipeline's failure).
    for t in trials {
        for f in t["failures"].as_array().unwrap() {
            let f = f.as_str().unwrap();
            assert!(
                f.starts_with("pipeline ")
                    || f.contains("trial failed")
                    || f.starts_with("the sender could not offer"),
                "{f}"
            );
        }
    }
    assert!(
        out_dir
            .path()
            .join("trials-all-cpu-x2-thread-1024x128-0.csv")
            .is_file()
    );
}

/// A CPU co-tenant beside the search: started before, stopped after, and its kind, intensity
/// and own report recorded with the result (its effect on the rate belongs in bench/).
#[test]
fn a_cpu_hog_beside_the_search_is_recorded_with_its_intensity() {
    let (stdout, json, _out_dir) = bisect(&[
        "--cpi",
        "1024x128",
        "--cotenant",
        "cpu-hog",
        "--cotenant-intensity",
        "0.5",
        "--warmup-s",
        "0.1",
        "--window-s",
        "0.3",
        "--start-rate",
        "40",
        "--tolerance",
        "0.5",
        "--confirm",
        "1",
        "--max-trials",
        "3",
    ]);
    assert!(
        stdout.contains("| all-cpu +cpu-hog | 1024x128 |"),
        "{stdout}"
    );
    assert_eq!(json["settings"]["cotenant"], "cpu-hog");
    assert_eq!(json["settings"]["cotenant_intensity"], 0.5);
    let hog = &json["searches"][0]["cotenant"];
    assert_eq!(hog["kind"], "cpu-hog", "{hog}");
    assert_eq!(hog["intensity"]["kind"], "cpu-hog", "{hog}");
    let cores = std::thread::available_parallelism().unwrap().get();
    assert_eq!(
        hog["intensity"]["threads"].as_u64().unwrap() as usize,
        ((cores as f64 * 0.5).round() as usize).max(1),
        "half the cores: {hog}"
    );
    assert_eq!(hog["clean"], true, "stopped cleanly: {hog}");
}

/// Runs `kplace bisect-rate` with `args` that it should refuse: its exit code and stderr.
fn bisect_refusing(args: &[&str]) -> (Option<i32>, String) {
    let out = support::output(
        Command::new(env!("CARGO_BIN_EXE_kplace"))
            .current_dir(support::workspace())
            .arg("bisect-rate")
            .args(args),
    );
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A placement path that names nothing is a bad option (exit 2, naming it), not a system
/// skipped (exit 1).
#[test]
fn a_placement_that_does_not_exist_is_an_input_error() {
    let (code, stderr) = bisect_refusing(&["--placements", "/nonexistent/p.yaml"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--placements /nonexistent/p.yaml: no such file or directory"),
        "{stderr}"
    );
}

#[test]
fn mps_and_cotenant_options_fail_clearly_where_they_cannot_work() {
    let (code, stderr) = bisect_refusing(&["--cotenant", "gpu-hug"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--cotenant"), "{stderr}");
    let (code, stderr) = bisect_refusing(&["--mps-threads", "50"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--mps-threads needs --mps on"), "{stderr}");
    let has_mps = std::process::Command::new("sh")
        .args(["-c", "command -v nvidia-cuda-mps-control"])
        .output()
        .is_ok_and(|o| o.status.success());
    if has_mps {
        println!("skipped: nvidia-cuda-mps-control exists here (bench/gpu-share.sh runs MPS)");
        return;
    }
    let (code, stderr) = bisect_refusing(&["--mps", "on"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--mps on") && stderr.contains("nvidia-cuda-mps-control"),
        "{stderr}"
    );
}

/// A system under test that writes when it finished each frame (`{times}`) is judged on its
/// post-CPI latency like kplace: here kplace's own receiver with `--done-times`.
#[test]
fn a_receiver_that_reports_completion_times_is_judged_on_latency() {
    let kplace = env!("CARGO_BIN_EXE_kplace");
    let sut = format!(
        "{kplace} run --source udp://127.0.0.1:{{port}} --cpi {{cpi}} --frames {{frames}} \
         --scene-frames 16 --idle-timeout-s 1 --detections {{detections}} --done-times {{times}}"
    );
    let (stdout, json, _out_dir) = bisect(
        &[
            QUICK_SEARCH,
            &["--start-rate", "50", "--max-trials", "4", "--sut-cmd", &sut],
        ]
        .concat(),
    );
    let trials = json["searches"][0]["trials"].as_array().unwrap();
    let first = &trials[0];
    assert!(passed(first), "50 CPI/s is easy: {first}");
    assert!(first["latency"]["p99_ms"].as_f64().is_some(), "{first}");
    let p99 = first["measurement"]["post_cpi_p99"].clone();
    assert!(!p99.is_null(), "{first}");
    // The table shows the SUT's latency, not n/a.
    let row = stdout.lines().find(|l| l.starts_with("| sut |")).unwrap();
    assert!(!row.contains("| n/a | n/a |"), "{row}");
}

/// `--sender-cpus` and `--sut-cpus` confine the two processes of every trial: the receiver's
/// report says where it could run, and the settings record both lists.
#[test]
fn sender_and_receiver_run_on_the_cpus_asked() {
    let allowed = kplace::os::CpuSet::allowed().unwrap();
    let sut = allowed.cpus()[0].to_string();
    let sender = allowed.cpus().last().unwrap().to_string();
    let (_stdout, json, out_dir) = bisect(
        &[
            QUICK_SEARCH,
            &["--max-trials", "12", "--sender-tick-us", "50"],
            &["--sender-cpus", &sender, "--sut-cpus", &sut],
        ]
        .concat(),
    );
    assert_eq!(json["settings"]["sender_cpus"], sender.as_str());
    assert_eq!(json["settings"]["sut_cpus"], sut.as_str());
    let trial = out_dir
        .path()
        .join("all-cpu-1024x128-0")
        .join("trial-0.json");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trial).unwrap()).unwrap();
    assert_eq!(report["cpus_allowed"], sut.as_str(), "{}", trial.display());
}

#[test]
fn cpu_lists_that_cannot_be_used_are_refused_naming_the_option() {
    let (code, stderr) = bisect_refusing(&["--sut-cpus", "1000"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--sut-cpus 1000: CPU list 1000 is outside the CPUs this process may use"),
        "{stderr}"
    );
    let (code, stderr) = bisect_refusing(&["--sender-cpus", "0-x"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--sender-cpus") && stderr.contains("\"x\" is not a CPU number"),
        "{stderr}"
    );
}

/// Runs `kplace bisect-rate` with `args` into a fresh output directory, killed (and the test
/// failed) past `limit`: its exit code, stderr and JSON results.
fn bisect_within(
    args: &[&str],
    limit: std::time::Duration,
) -> (Option<i32>, String, serde_json::Value) {
    let _serial = serial();
    let out_dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kplace"));
    cmd.current_dir(support::workspace())
        .arg("bisect-rate")
        .args(args)
        .arg("--out")
        .arg(out_dir.path());
    let out = support::output_within(&mut cmd, limit, None);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let json = std::fs::read_to_string(out_dir.path().join("bisect-rate.json"))
        .map(|text| serde_json::from_str(&text).expect("JSON results"))
        .unwrap_or_else(|e| panic!("no results ({e}): {stderr}"));
    (out.status.code(), stderr, json)
}

#[test]
fn a_sweep_whose_every_placement_is_skipped_exits_1_saying_why() {
    use kplace::cuda::probe::{DriverStatus, probe};
    if let DriverStatus::Ready { device_count, .. } = probe().driver
        && device_count > 0
    {
        println!("skipped: this machine has a usable GPU, so all-gpu is searched");
        return;
    }
    let (code, stderr, json) = bisect_within(
        &[
            "--cpi",
            "1024x128",
            "--placements",
            "placements/all-gpu.yaml",
        ],
        std::time::Duration::from_secs(60),
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("all-gpu at 1024x128: skipped")
            && stderr.contains("bisect-rate: no rate found: every system was skipped (1 skipped"),
        "{stderr}"
    );
    // What was found is still written.
    assert!(json["searches"][0]["skipped"].is_string(), "{json:#}");
}

#[test]
fn a_search_that_finds_no_rate_exits_1_saying_why() {
    // A receiver that never listens fails every trial.
    let mut args = QUICK_SEARCH.to_vec();
    args.extend(["--max-trials", "2", "--sut-cmd", "true"]);
    let (code, stderr, json) = bisect_within(&args, std::time::Duration::from_secs(120));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("bisect-rate: no rate found by 1 of 1 searches: sut at 1024x128"),
        "{stderr}"
    );
    let result = &json["searches"][0];
    assert!(result["sustained_cpi_per_s"].is_null(), "{result}");
}

#[test]
fn a_rate_below_the_required_one_exits_5_and_one_above_it_0() {
    // A rate found at 40 CPI/s or more (the first trial, 1/1): 1e6 CPI/s is not met, 1 is.
    let quick = [QUICK_SEARCH, &["--start-rate", "40", "--max-trials", "8"]].concat();
    let (code, _, json, _dir) =
        bisect_status(&[quick.as_slice(), &["--require-rate", "1e6"]].concat());
    let Some(rate) = json["searches"][0]["sustained_cpi_per_s"].as_f64() else {
        println!("skipped: the loaded machine found no rate (exit {code:?})");
        return;
    };
    assert_eq!(code, Some(5), "{rate} is below 1e6");
    assert_eq!(json["settings"]["require_rate"], 1e6);
    let (code, _, json, _dir) =
        bisect_status(&[quick.as_slice(), &["--require-rate", "1"]].concat());
    if json["searches"][0]["sustained_cpi_per_s"]
        .as_f64()
        .is_some()
    {
        assert_eq!(code, Some(0));
    }
}

#[test]
fn latency_budgets_are_refused_naming_the_option() {
    let (code, stderr) = bisect_refusing(&["--latency-budget", "soon"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--latency-budget") && stderr.contains("expected `deadline`, `1/R`"),
        "{stderr}"
    );
    for (option, value) in [
        ("--max-sender-lag-ms", "0"),
        ("--contradiction", "0"),
        ("--require-rate", "0"),
    ] {
        let (code, stderr) = bisect_refusing(&[option, value]);
        assert_eq!(code, Some(2), "{option}: {stderr}");
        assert!(stderr.contains(option), "{option}: {stderr}");
    }
}

/// A recording of the spectrogram's source at 256x32, 16 frames, in `dir`.
fn spectrogram_recording(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("tones.sigmf-data");
    let out = support::output(
        Command::new(env!("CARGO_BIN_EXE_kplace"))
            .current_dir(support::workspace())
            .args([
                "record",
                "--graph",
                "graphs/spectrogram.yaml",
                "--cpi",
                "256x32",
            ])
            .args(["--frames", "16", "--out"])
            .arg(&path),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    path
}

/// Any graph is measured on a recording, every trial gated on its check: the spectrogram's
/// trials pass with every frame matched to the reference placement, and a wrong kernel's fail
/// verification at every rate, so no rate is found.
#[test]
fn a_recording_search_gates_every_trial_on_its_check() {
    let dir = tempfile::tempdir().unwrap();
    let recording = spectrogram_recording(dir.path());
    let fault = support::build_c_library(
        "graphs/spectrogram/kernels/spectrogram.c",
        "spectrogram_fault",
        &["SPECTROGRAM_FAULT_BIN=3"],
    );
    let wrong = dir.path().join("wrong.yaml");
    std::fs::write(
        &wrong,
        format!(
            "name: wrong\nlibraries: {{cpu: {}}}\nstages: {{fft: cpu, power: cpu, average: cpu}}\n",
            fault.display()
        ),
    )
    .unwrap();
    let placements = format!("graphs/spectrogram/placements/cpu.yaml,{}", wrong.display());
    let (_, stdout, json, _out) = bisect_status(&[
        "--graph",
        "graphs/spectrogram.yaml",
        "--recording",
        recording.to_str().unwrap(),
        "--check",
        "reference:graphs/spectrogram/placements/cpu.yaml",
        "--cpi",
        "256x32",
        "--start-rate",
        "200",
        "--warmup-s",
        "0.1",
        "--window-s",
        "0.3",
        "--tolerance",
        "0.5",
        "--confirm",
        "1",
        "--max-trials",
        "6",
        "--placements",
        &placements,
    ]);
    assert!(stdout.contains("| cpu | 256x32 |"), "{stdout}");
    assert_eq!(
        json["settings"]["check"],
        "reference:graphs/spectrogram/placements/cpu.yaml"
    );
    // The right kernels' frames all match the reference in every trial that measured them,
    // whatever else (a loaded machine's latency) decided the trial; a passed trial is a rate.
    let right = &json["searches"][0];
    let right_trials = right["trials"].as_array().unwrap();
    if right_trials.iter().any(passed) {
        assert!(right["highest_pass"].as_f64() > Some(0.0), "{right}");
    }
    for t in right_trials {
        let failed = t["measurement"]["frames_failed_verification"].as_u64();
        assert!(matches!(failed, None | Some(0)), "{t}");
    }
    let wrong = &json["searches"][1];
    assert!(wrong["sustained_cpi_per_s"].is_null(), "{wrong}");
    let trials = wrong["trials"].as_array().unwrap();
    assert!(
        trials
            .iter()
            .any(|t| t["measurement"]["frames_failed_verification"].as_u64() > Some(0)),
        "the wrong kernel's frames were measured failing: {trials:?}"
    );
    // Failed, or invalid (a sender or a machine too unsteady to judge by): either way every
    // frame of every trial was measured as failing its check, and none passed.
    for t in trials {
        assert!(!passed(t), "{t}");
        let m = &t["measurement"];
        if !m.is_null() {
            assert_eq!(
                m["frames_failed_verification"], m["frames_completed"],
                "{t}"
            );
        }
        if t["status"] == "failed" {
            assert!(
                t["failures"].to_string().contains("failed verification"),
                "{t}"
            );
        }
    }
}

#[test]
fn a_recording_search_needs_a_check_that_checks() {
    let (code, stderr) = bisect_refusing(&[
        "--graph",
        "graphs/spectrogram.yaml",
        "--recording",
        "x.sigmf-data",
        "--check",
        "none",
    ]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--check none gates nothing"), "{stderr}");
    let (code, stderr) = bisect_refusing(&["--recording", "x.sigmf-data"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--check"), "{stderr}");
}

//! Short real searches: all-cpu at 1024x128 over loopback with small windows. Every goal is
//! answered with a rate its own trials decided, below a rate they showed failing; a placement
//! that cannot run is skipped with the planner's reason.

use std::process::Command;

/// A search that ends in a few trials: small windows, a wide width, one goal decided by one
/// trial.
const QUICK_SEARCH: &[&str] = &[
    "--cpi",
    "1024x128",
    "--warmup-s",
    "0.1",
    "--window-s",
    "0.3",
    "--initial-window-s",
    "0.1",
    "--width",
    "0.5",
    "--goals",
    "quick:0.01:0:1",
];

/// Searches run one at a time: each runs paced senders and receivers, and several at once on a
/// two-core machine fail each other's trials.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `kplace bisect-rate` with `args` into a fresh output directory, expecting it to have
/// run every search (exit 0, or 1 no rate found, 3 some skipped, 5 below --require-rate);
/// returns
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
    let out = kplace_testkit::output(
        Command::new(env!("CARGO_BIN_EXE_kplace"))
            .current_dir(kplace_testkit::workspace())
            .arg("bisect-rate")
            .args(args)
            .arg("--out")
            .arg(out_dir.path()),
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Short searches can end at their trial cap; the tests that need a rate assert it
    // themselves.
    let code = out.status.code();
    assert!(
        matches!(code, Some(0 | 1 | 3 | 5)),
        "exit {code:?}\n{stdout}\n{stderr}"
    );
    if code == Some(1) {
        assert!(stderr.contains("bisect-rate: no rate found"), "{stderr}");
    }
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out_dir.path().join("bisect-rate.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(json["schema"], "kplace-bisect-rate/4");
    (code, stdout, json, out_dir)
}

/// Whether a trial of the results file passed.
fn passed(trial: &serde_json::Value) -> bool {
    trial["status"] == "passed"
}

#[test]
fn a_short_search_answers_every_goal_with_rates_its_trials_decided() {
    let (_gpu_dir, gpu) = kplace_testkit::write_temp(
        "gpu.yaml",
        "name: gpu\nstages: {range_fft: gpu, doppler_fft: gpu, cfar: gpu, cluster: gpu}\n",
    );
    let placements = format!("workloads/radar/placements/all-cpu.yaml,{}", gpu.display());
    let (code, stdout, json, out_dir) = bisect_status(&[
        "--cpi",
        "1024x128",
        "--warmup-s",
        "0.1",
        "--window-s",
        "0.3",
        "--initial-window-s",
        "0.1",
        "--width",
        "0.1",
        "--goals",
        "robust:0.01:0.5:3,strict:0:0:1",
        "--placements",
        &placements,
    ]);
    assert!(stdout.contains("| all-cpu | 1024x128 |"), "{stdout}");
    assert!(
        stdout.contains("| gpu | 1024x128 | skipped: ") && stdout.contains("placed on gpu:0"),
        "{stdout}"
    );
    assert!(
        stdout.contains("| robust goal, CPI/s | other goals, CPI/s |"),
        "{stdout}"
    );
    let result = &json["searches"][0];
    // Noise costs trials, never the answer: a number for every goal.
    let sustained = result["sustained_rate"]
        .as_f64()
        .unwrap_or_else(|| panic!("a rate: {result:#}"));
    assert!(sustained > 0.0);
    assert_eq!(code, Some(3), "a rate found, one placement skipped");
    assert_eq!(
        result["latency_budget"],
        serde_json::json!({"rule": "deadline", "frame_period_ms": 6.4})
    );
    assert!(
        stdout.contains("deadline (max of 6.4 ms and 1/R)"),
        "{stdout}"
    );
    let goals = result["goals"].as_array().unwrap();
    assert_eq!(goals.len(), 2);
    assert_eq!(goals[0]["lower"].as_f64(), Some(sustained));
    let loads = result["loads"].as_array().unwrap();
    let trials = result["trials"].as_array().unwrap();
    for (g, goal) in goals.iter().enumerate() {
        let name = goal["goal"]["name"].as_str().unwrap();
        let lower = goal["lower"].as_f64().unwrap_or_else(|| panic!("{goal:#}"));
        let class = |load: f64| {
            loads
                .iter()
                .find(|l| l["load"].as_f64() == Some(load))
                .map(|l| l["classes"][g].clone())
        };
        // The answer is a load its own full-length trials decided meets the goal.
        assert_eq!(class(lower), Some("lower".into()), "{name}: {goal:#}");
        let full_at_lower = trials
            .iter()
            .filter(|t| t["rate"].as_f64() == Some(lower) && t["stage"] == "final")
            .count();
        assert!(full_at_lower >= 1, "{name}");
        // Above it, a load was shown to fail the goal (or the sender could not offer it).
        match goal["ending"]["kind"].as_str().unwrap() {
            "regular" => {
                let upper = goal["upper"].as_f64().unwrap();
                assert!(upper > lower);
                assert_eq!(class(upper), Some("upper".into()), "{name}");
                assert!((upper - lower) / upper <= 0.1 + 1e-9, "{name}: {goal:#}");
            }
            "sender_limit" => assert!(result["sender_ceiling"].as_f64() > Some(lower)),
            other => panic!("{name} ended {other}: {goal:#}"),
        }
    }
    // Every measured trial carries its loss ratio and duration.
    for t in trials.iter().filter(|t| t["status"] != "invalid") {
        let loss = t["loss_ratio"].as_f64().unwrap_or_else(|| panic!("{t}"));
        assert!((0.0..=1.0).contains(&loss), "{t}");
        assert!(t["duration_s"].as_f64() >= Some(0.1 - 1e-9), "{t}");
    }
    assert!(result["trial_seconds"].as_f64() > Some(0.0));
    assert!(
        json["searches"][1]["skipped"]
            .as_str()
            .unwrap()
            .contains("gpu")
    );
    let csv =
        std::fs::read_to_string(out_dir.path().join("trials-all-cpu-1024x128-0.csv")).unwrap();
    assert!(
        csv.starts_with("trial,rate,goal,stage,phase,duration_s,loss_ratio,"),
        "{csv}"
    );
}

/// Two placements searched side by side, their trials alternating: each has its own answer,
/// and the sweep reports the ratio between them with the interval their bounds allow.
#[test]
fn two_placements_searched_side_by_side_report_their_ratio() {
    let (_dir, two) = kplace_testkit::write_temp(
        "two-workers.yaml",
        "name: two-workers\nstages: {range_fft: cpu, doppler_fft: cpu, cfar: cpu, cluster: cpu}\nruntime: {workers: 2}\n",
    );
    let placements = format!("workloads/radar/placements/all-cpu.yaml,{}", two.display());
    let (stdout, json, _out_dir) = bisect(
        &[
            QUICK_SEARCH,
            &["--placements", &placements, "--start-rate", "100"],
        ]
        .concat(),
    );
    let searches = json["searches"].as_array().unwrap();
    assert_eq!(searches.len(), 2);
    // Alternating: the second search's first trial ran before the first search's last.
    let first = searches[0]["trials"].as_array().unwrap();
    let second = searches[1]["trials"].as_array().unwrap();
    assert!(first.len() >= 2 && !second.is_empty(), "{json:#}");
    let comparison = &json["comparisons"][0];
    assert_eq!(comparison["baseline"], "all-cpu");
    assert_eq!(comparison["system"], "two-workers");
    let (a, b) = (
        searches[0]["sustained_rate"].as_f64().unwrap(),
        searches[1]["sustained_rate"].as_f64().unwrap(),
    );
    let ratio = comparison["ratio"].as_f64().unwrap();
    assert!((ratio - b / a).abs() < 1e-9, "{comparison}");
    if let (Some(low), Some(high)) = (
        comparison["ratio_low"].as_f64(),
        comparison["ratio_high"].as_f64(),
    ) {
        assert!(low <= ratio && ratio <= high, "{comparison}");
    }
    assert!(
        stdout.contains("ratio 1024x128 #0 (quick goal): two-workers / all-cpu = "),
        "{stdout}"
    );
}

#[test]
fn another_receiver_is_measured_by_the_same_sender_verifier_and_search() {
    // kplace's own receiver, run as an outside command: it only has to listen, write
    // detections in the documented format, and exit.
    let kplace = env!("CARGO_BIN_EXE_kplace");
    // The frame's shape by the generic placeholders, innermost extent first.
    let sut = format!(
        "{kplace} run --source udp://127.0.0.1:{{port}} --shape {{extent0}}x{{extent1}} \
         --frames {{frames}} --scene-frames 16 --idle-timeout-s 1 --detections {{detections}}"
    );
    let (stdout, json, out_dir) = bisect(&[
        "--cpi",
        "1024x128",
        "--warmup-s",
        "0.1",
        "--window-s",
        "0.3",
        "--initial-window-s",
        "0.1",
        "--width",
        "0.2",
        "--goals",
        "robust:0.01:0.5:3",
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
    assert!(
        result["sustained_rate"].as_f64().expect("a sustained rate") > 0.0,
        "{result}"
    );
    assert!(
        result["bounds"]["ingest_only_per_s"]
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
    let child = kplace_testkit::Guard::spawn(
        Command::new(env!("CARGO_BIN_EXE_kplace"))
            .current_dir(kplace_testkit::workspace())
            .args([
                "bisect-rate",
                "--cpi",
                "1024x128",
                "--warmup-s",
                "1",
                "--window-s",
                "600",
                "--initial-window-s",
                "600",
            ])
            .arg("--out")
            .arg(out_dir.path()),
    );
    // Mid-trial: sender and receiver are running a ten-minute stream, so only ending them
    // (not waiting them out) lets this test finish in seconds.
    std::thread::sleep(std::time::Duration::from_secs(3));
    child.signal("INT");
    let out = child.wait(kplace_testkit::PROCESS_LIMIT);
    assert_eq!(out.status.code(), Some(130), "{}", out.stderr);
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out_dir.path().join("bisect-rate.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(json["searches"][0]["outcome_kind"], "interrupted", "{json}");
    assert_eq!(
        json["searches"][0]["outcome"], "none yet: interrupted",
        "{json}"
    );
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
        "--initial-window-s",
        "0.1",
        "--width",
        "0.5",
        "--goals",
        "quick:0.01:0:1",
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
    if let Some(rate) = result["sustained_rate"].as_f64() {
        assert_eq!(
            result["aggregate_sustained_rate"].as_f64(),
            Some(2.0 * rate)
        );
    }
    // Failures, if any, name their pipeline (two senders on a loaded machine that cannot
    // reach a rate make the trial invalid, no pipeline's failure).
    for t in trials {
        for f in t["failures"].as_array().unwrap() {
            let f = f.as_str().unwrap();
            assert!(
                f.starts_with("pipeline ") || f.contains("trial failed"),
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
        "--initial-window-s",
        "0.1",
        "--width",
        "0.5",
        "--goals",
        "quick:0.01:0:1",
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
    let out = kplace_testkit::output(
        Command::new(env!("CARGO_BIN_EXE_kplace"))
            .current_dir(kplace_testkit::workspace())
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
/// post-frame latency like kplace: here kplace's own receiver with `--done-times`.
#[test]
fn a_receiver_that_reports_completion_times_is_judged_on_latency() {
    let kplace = env!("CARGO_BIN_EXE_kplace");
    // The frame's shape by the radar's own word for it, which its workload gives.
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
    // The first trial the sender offered: on a loaded machine it may fall behind its schedule
    // once, and that trial is not offered, not judged.
    let first = trials
        .iter()
        .find(|t| t["status"] != "invalid")
        .unwrap_or_else(|| panic!("no trial was offered: {trials:?}"));
    assert!(passed(first), "50 CPI/s is easy: {first}");
    assert!(first["latency"]["p99_ms"].as_f64().is_some(), "{first}");
    let p99 = first["measurement"]["post_frame_p99"].clone();
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
    cmd.current_dir(kplace_testkit::workspace())
        .arg("bisect-rate")
        .args(args)
        .arg("--out")
        .arg(out_dir.path());
    let out = kplace_testkit::output_within(&mut cmd, limit, None);
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
            "workloads/radar/placements/all-gpu.yaml",
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

/// A placement's name is the graph's placement, even where a folder of that name is in the
/// current directory (as `python/` is in a checkout, beside the filtered beamformer's
/// `python` placement): found, then skipped here for want of a GPU, never "no placement files".
#[test]
fn a_placement_name_is_the_graphs_even_beside_a_folder_of_that_name() {
    use kplace::cuda::probe::{DriverStatus, probe};
    if let DriverStatus::Ready { device_count, .. } = probe().driver
        && device_count > 0
    {
        println!("skipped: this machine has a usable GPU, so all-gpu is searched");
        return;
    }
    let _serial = serial();
    let cwd = tempfile::tempdir().unwrap();
    std::fs::create_dir(cwd.path().join("all-gpu")).unwrap();
    let out_dir = tempfile::tempdir().unwrap();
    let graph = kplace_testkit::workspace().join("workloads/radar/graph.yaml");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kplace"));
    cmd.current_dir(cwd.path())
        .arg("bisect-rate")
        .arg("--graph")
        .arg(&graph)
        .args(["--cpi", "1024x128", "--placements", "all-gpu", "--out"])
        .arg(out_dir.path());
    let out = kplace_testkit::output_within(&mut cmd, std::time::Duration::from_secs(60), None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("all-gpu at 1024x128: skipped") && !stderr.contains("no placement files"),
        "{stderr}"
    );
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
    assert!(result["sustained_rate"].is_null(), "{result}");
}

#[test]
fn a_rate_below_the_required_one_exits_5_and_one_above_it_0() {
    // A rate found at 40 CPI/s or more (the first trial, 1/1): 1e6 CPI/s is not met, 1 is.
    let quick = [QUICK_SEARCH, &["--start-rate", "40", "--max-trials", "8"]].concat();
    let (code, _, json, _dir) =
        bisect_status(&[quick.as_slice(), &["--require-rate", "1e6"]].concat());
    let Some(rate) = json["searches"][0]["sustained_rate"].as_f64() else {
        println!("skipped: the loaded machine found no rate (exit {code:?})");
        return;
    };
    assert_eq!(code, Some(5), "{rate} is below 1e6");
    assert_eq!(json["settings"]["require_rate"], 1e6);
    let (code, _, json, _dir) =
        bisect_status(&[quick.as_slice(), &["--require-rate", "1"]].concat());
    if json["searches"][0]["sustained_rate"].as_f64().is_some() {
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
        ("--require-rate", "0"),
        ("--width", "0"),
        ("--initial-window-s", "5"),
        ("--goals", "robust:2:0.5:5"),
        ("--goals", "robust:0.001:0.5"),
    ] {
        let (code, stderr) = bisect_refusing(&[option, value]);
        assert_eq!(code, Some(2), "{option}: {stderr}");
        assert!(stderr.contains(option), "{option}: {stderr}");
    }
}

/// A recording of the spectrogram's source at 256x32, 16 frames, in `dir`.
fn spectrogram_recording(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("tones.sigmf-data");
    let out = kplace_testkit::output(
        Command::new(env!("CARGO_BIN_EXE_kplace"))
            .current_dir(kplace_testkit::workspace())
            .args([
                "record",
                "--graph",
                "workloads/spectrogram/graph.yaml",
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
    let fault = kplace_testkit::build_c_library(
        "workloads/spectrogram/kernels/spectrogram.c",
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
    let placements = format!(
        "workloads/spectrogram/placements/cpu.yaml,{}",
        wrong.display()
    );
    let (_, stdout, json, _out) = bisect_status(&[
        "--graph",
        "workloads/spectrogram/graph.yaml",
        "--recording",
        recording.to_str().unwrap(),
        "--check",
        "reference:workloads/spectrogram/placements/cpu.yaml",
        "--cpi",
        "256x32",
        "--start-rate",
        "200",
        "--warmup-s",
        "0.1",
        "--window-s",
        "0.3",
        "--initial-window-s",
        "0.1",
        "--width",
        "0.5",
        "--goals",
        "quick:0.01:0:1",
        "--max-trials",
        "6",
        "--placements",
        &placements,
    ]);
    assert!(stdout.contains("| cpu | 256x32 |"), "{stdout}");
    assert_eq!(
        json["settings"]["check"],
        "reference:workloads/spectrogram/placements/cpu.yaml"
    );
    // The right kernels' frames all match the reference in every trial that measured them,
    // whatever else (a loaded machine's latency) decided the trial; a passed trial is a rate.
    let right = &json["searches"][0];
    let right_trials = right["trials"].as_array().unwrap();
    // Rates of a recording are frames/s, its frame its source tensor's shape (innermost axis
    // first, as --shape takes it), its deadline its own frame period: 8192 samples at the
    // recording's 20 MHz.
    assert_eq!(right["unit"], "frames/s", "{right}");
    assert_eq!(right["shape"], "256x32", "{right}");
    assert_eq!(right["latency_budget"]["rule"], "deadline");
    let deadline = right["latency_budget"]["frame_period_ms"].as_f64().unwrap();
    assert!((deadline - 0.4096).abs() < 1e-9, "{right}");
    assert!(
        (right["real_time_rate"].as_f64().unwrap() - 2441.40625).abs() < 1e-6,
        "{right}"
    );
    assert!(stdout.contains("| quick goal, frames/s |"), "{stdout}");
    for t in right_trials {
        let failed = t["measurement"]["frames_failed_verification"].as_u64();
        assert!(matches!(failed, None | Some(0)), "{t}");
    }
    let wrong = &json["searches"][1];
    assert!(wrong["sustained_rate"].is_null(), "{wrong}");
    let trials = wrong["trials"].as_array().unwrap();
    assert!(
        trials
            .iter()
            .any(|t| t["measurement"]["frames_failed_verification"].as_u64() > Some(0)),
        "the wrong kernel's frames were measured failing: {trials:?}"
    );
    // Failed, or invalid (a sender too late to offer the rate): either way every frame of
    // every trial measured failed its check, and none passed.
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
fn goals_are_refused_naming_the_part_that_is_wrong() {
    let (code, stderr) = bisect_refusing(&["--goals", "robust:2:0.5:5"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("\"robust:2:0.5:5\": LOSS \"2\" must be a fraction in [0, 1)"),
        "{stderr}"
    );
    let (code, stderr) = bisect_refusing(&["--goals", "a:0:0:1,a:0.1:0.5:3"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("the goal \"a\" is given twice"), "{stderr}");
}

#[test]
fn a_recording_without_a_sample_rate_needs_a_start_rate() {
    let dir = tempfile::tempdir().unwrap();
    let recording = spectrogram_recording(dir.path());
    // The metadata without its sample rate.
    let meta = recording.with_extension("sigmf-meta");
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&meta).unwrap()).unwrap();
    json["global"]
        .as_object_mut()
        .unwrap()
        .remove("core:sample_rate")
        .expect("a sample rate to remove");
    std::fs::write(&meta, json.to_string()).unwrap();
    let (code, stderr) = bisect_refusing(&[
        "--graph",
        "workloads/spectrogram/graph.yaml",
        "--cpi",
        "256x32",
        "--recording",
        recording.to_str().unwrap(),
        "--check",
        "reference:workloads/spectrogram/placements/cpu.yaml",
    ]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("it states no sample rate") && stderr.contains("--start-rate"),
        "{stderr}"
    );
}

#[test]
fn a_recording_search_needs_a_check_that_checks() {
    let (code, stderr) = bisect_refusing(&[
        "--graph",
        "workloads/spectrogram/graph.yaml",
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

/// The case: the default `--out target/bisect-rate` was relative to the current
/// directory, so an installed kplace run from `$HOME` wrote `./target/...`. Without `--out`
/// the results go to the user's data directory, `$XDG_DATA_HOME/kplace/bisect-rate` (else
/// `~/.local/share/kplace/bisect-rate`: an `XDG_DATA_HOME` that is not absolute is ignored, as
/// the XDG rules say), whatever the current directory, and the log says where.
#[test]
fn results_without_out_go_to_the_users_data_directory_and_say_where() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let (cwd, home, data) = (
        dir.path().join("cwd"),
        dir.path().join("home"),
        dir.path().join("data"),
    );
    for d in [&cwd, &home] {
        std::fs::create_dir(d).unwrap();
    }
    let sweep = |xdg: &str| {
        let out = kplace_testkit::output(
            Command::new(env!("CARGO_BIN_EXE_kplace"))
                .current_dir(&cwd)
                .env("HOME", &home)
                .env("XDG_DATA_HOME", xdg)
                .arg("bisect-rate")
                .args(QUICK_SEARCH)
                .args(["--max-trials", "1"]),
        );
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "{:?}: {stderr}",
            out.status
        );
        stderr
    };
    let said = sweep(data.to_str().unwrap());
    let results = data.join("kplace/bisect-rate/bisect-rate.json");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&results).unwrap()).unwrap();
    assert_eq!(json["schema"], "kplace-bisect-rate/4");
    assert!(
        said.contains(&format!("bisect-rate: results in {}", results.display())),
        "{said}"
    );
    let said = sweep("relative/data");
    let results = home.join(".local/share/kplace/bisect-rate/bisect-rate.json");
    assert!(results.is_file(), "{said}");
    assert!(
        said.contains(&format!("bisect-rate: results in {}", results.display())),
        "{said}"
    );
    let left: Vec<_> = std::fs::read_dir(&cwd).unwrap().flatten().collect();
    assert!(
        left.is_empty(),
        "nothing in the current directory: {left:?}"
    );
}

/// Not on a terminal (stderr a pipe, as in CI), the sweep is never silent: a plain line when
/// the searches begin and one per trial judged, no cursor codes, each naming the system, the
/// offered rate, the share lost, the p99 and the verdict of the trial the results file
/// records in the same place.
#[test]
fn off_a_terminal_every_trial_is_a_plain_line_on_stderr() {
    let _serial = serial();
    let out_dir = tempfile::tempdir().unwrap();
    let out = kplace_testkit::output(
        Command::new(env!("CARGO_BIN_EXE_kplace"))
            .current_dir(kplace_testkit::workspace())
            .arg("bisect-rate")
            .args(QUICK_SEARCH)
            .args(["--start-rate", "100", "--max-trials", "4", "--out"])
            .arg(out_dir.path()),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{:?}\n{stderr}",
        out.status
    );
    assert!(
        !stderr.contains('\x1b') && !stderr.contains('\r'),
        "{stderr:?}"
    );
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out_dir.path().join("bisect-rate.json")).unwrap(),
    )
    .unwrap();
    let trials = json["searches"][0]["trials"].as_array().unwrap();
    assert!(!trials.is_empty() && trials.len() <= 4, "{trials:?}");
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("bisect-rate: [") && l.contains(" trial "))
        .collect();
    assert_eq!(lines.len(), trials.len(), "{stderr}");
    let began = stderr.lines().position(|l| {
        l.starts_with("bisect-rate: [")
            && l.ends_with("] searching all-cpu at 1024x128, trials alternating")
    });
    let first = stderr.lines().position(|l| l == lines[0]);
    assert!(began.is_some() && began < first, "{stderr}");
    let mut elapsed = 0.0;
    for (i, (line, t)) in lines.iter().zip(trials).enumerate() {
        // `bisect-rate: [   1.4 s] all-cpu 1024x128 trial 0: 100.0 CPI/s for 0.10 s (...)`
        let (stamp, rest) = line["bisect-rate: [".len()..].split_once(" s] ").unwrap();
        let at: f64 = stamp.trim().parse().unwrap();
        assert!(at >= elapsed, "{line}");
        elapsed = at;
        let rate = t["rate"].as_f64().unwrap();
        assert!(
            rest.starts_with(&format!("all-cpu 1024x128 trial {i}: {rate:.1} CPI/s for ")),
            "{line}\n{t}"
        );
        let verdict = match t["status"].as_str().unwrap() {
            "passed" => ": pass".to_string(),
            "failed" => ": fail: ".to_string(),
            _ => ": invalid: ".to_string(),
        };
        assert!(rest.contains(&verdict), "{line}\n{t}");
        if let Some(loss) = t["loss_ratio"].as_f64() {
            assert!(
                rest.contains(&format!(", {:.3}% lost", loss * 100.0)),
                "{line}\n{t}"
            );
        }
        if let Some(p99) = t["latency"]["p99_ms"].as_f64() {
            assert!(rest.contains(&format!(", p99 {p99:.3} ms")), "{line}\n{t}");
        }
    }
}

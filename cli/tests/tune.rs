//! `kplace tune` end to end on this machine's CPU: a calibration is stored, reused, refreshed on
//! --recalibrate and invalidated by a rebuilt library or another CPI; the winner is a placement
//! file `kplace run --placement` takes as is, saying what was predicted and measured; and a
//! proving search measures the best prediction with bisect-rate.

use std::path::Path;
use std::process::Command;

/// Tuning runs one at a time: each calibrates with paced senders and receivers, and two at
/// once on a two-core machine disturb each other.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// `kplace tune` at `cpi` (predicting only unless `extra` says `--prove`), storing
/// calibrations in `store`, its results in `out`; exit status, stdout and stderr.
fn tune(cpi: &str, store: &Path, out: &Path, extra: &[&str]) -> (Option<i32>, String, String) {
    let prove: &[&str] = if extra.contains(&"--prove") {
        &[]
    } else {
        &["--prove", "0"]
    };
    let output = kplace_testkit::output(
        Command::new(env!("CARGO_BIN_EXE_kplace"))
            .current_dir(kplace_testkit::workspace())
            .args(["tune", "--cpi", cpi, "--calibrate-s", "0.2"])
            .args(prove)
            .arg("--calibrations")
            .arg(store)
            .arg("--out")
            .arg(out)
            .args(extra),
    );
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn a_calibration_is_reused_refreshed_and_invalidated_and_the_winner_runs_as_written() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let store = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let (code, stdout, stderr) = tune("256x64", store.path(), out.path(), &[]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(stderr.contains("calibrating (none stored)"), "{stderr}");
    assert!(
        stdout.contains("| placement | predicted CPI/s |"),
        "{stdout}"
    );
    for knobs in ["-w1-s4", "-w1-s16", "-w2-s4", "-w2-s16"] {
        assert!(
            stdout.contains(&format!("cccc{knobs}")),
            "{knobs}:\n{stdout}"
        );
    }
    let tuned = out.path().join("tune-256x64/tuned.yaml");
    let text = std::fs::read_to_string(&tuned).unwrap();
    assert!(text.starts_with("# Chosen by `"), "{text}");
    assert!(text.contains("# Predicted: "), "{text}");
    assert!(
        text.contains("# Not measured: the prediction only."),
        "{text}"
    );
    // The winner runs as written, and its frames verify.
    let run = kplace_testkit::output(
        Command::new(env!("CARGO_BIN_EXE_kplace"))
            .current_dir(kplace_testkit::workspace())
            .args(["run", "--cpi", "256x64", "--frames", "40", "--placement"])
            .arg(&tuned),
    );
    assert!(
        run.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );

    let (_, _, stderr) = tune("256x64", store.path(), out.path(), &[]);
    assert!(stderr.contains("reusing the calibration in"), "{stderr}");
    // A rate no placement is predicted to sustain: no winner written, exit 1, saying so.
    std::fs::remove_file(&tuned).unwrap();
    let (code, stdout, stderr) = tune("256x64", store.path(), out.path(), &["--rate", "1e9"]);
    assert_eq!(code, Some(1), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("no placement is predicted to meet the request (1000000000 CPI/s")
            && stdout.contains("the fastest, "),
        "{stdout}"
    );
    assert!(!tuned.exists(), "nothing written");
    let (_, _, stderr) = tune("256x64", store.path(), out.path(), &["--recalibrate"]);
    assert!(stderr.contains("calibrating (--recalibrate)"), "{stderr}");
    let (_, _, stderr) = tune("256x32", store.path(), out.path(), &[]);
    assert!(
        stderr.contains("calibrating (none stored)"),
        "another CPI: {stderr}"
    );
    // The same library rebuilt: a copy with other bytes at its end still loads.
    let rebuilt = out.path().join("libkplace_cpu.so");
    let mut bytes = std::fs::read(kplace_testkit::cpu_library()).unwrap();
    bytes.extend_from_slice(b"another build");
    std::fs::write(&rebuilt, bytes).unwrap();
    let (code, _, stderr) = tune(
        "256x64",
        store.path(),
        out.path(),
        &["--cpu-library", rebuilt.to_str().unwrap()],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("calibrating (none stored)"),
        "another build: {stderr}"
    );
    let stored = std::fs::read_dir(store.path()).unwrap().count();
    assert_eq!(stored, 3, "one calibration per CPI and library build");
}

#[test]
fn a_proving_search_measures_the_best_prediction_beside_it() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let store = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let (code, stdout, stderr) = tune(
        "256x64",
        store.path(),
        out.path(),
        &[
            "--prove",
            "1",
            "--workers",
            "1",
            "--slots",
            "4",
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
            "10",
        ],
    );
    // The search may end at its trial cap without a rate on a loaded machine; either way it
    // is reported.
    assert!(matches!(code, Some(0 | 1)), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("| placement | predicted CPI/s | measured CPI/s | error |"),
        "{stdout}"
    );
    assert!(stdout.contains("| cccc-w1-s4 |"), "{stdout}");
    let results = out.path().join("tune-256x64/proofs/bisect-rate.json");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&results).unwrap()).unwrap();
    let search = &json["searches"][0];
    assert!(
        search["trials"].as_array().is_some_and(|t| !t.is_empty()),
        "{search}"
    );
    if code == Some(0) {
        let text = std::fs::read_to_string(out.path().join("tune-256x64/tuned.yaml")).unwrap();
        assert!(text.contains("# Measured by bisect-rate: "), "{text}");
    }
}

#[test]
fn beside_a_cotenant_the_calibration_is_its_own_and_the_choice_is_compared_with_alone() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let store = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let (code, stdout, stderr) = tune(
        "256x64",
        store.path(),
        out.path(),
        &["--cotenant", "cpu-hog", "--cotenant-intensity", "0.5"],
    );
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("at 256x64 beside a cpu-hog co-tenant: calibrating (none stored)"),
        "{stderr}"
    );
    assert!(
        stdout.contains("kplace tune: beside the cpu-hog co-tenant the choice is"),
        "{stdout}"
    );
    assert_eq!(
        std::fs::read_dir(store.path()).unwrap().count(),
        2,
        "a calibration alone and one beside the co-tenant"
    );
    let text = std::fs::read_to_string(out.path().join("tune-256x64/tuned.yaml")).unwrap();
    assert!(text.contains("# Under a co-tenant: cpu-hog."), "{text}");
}

/// A recording of the block-library spectrogram's source at 256x32, 16 frames, in `dir`.
fn blocks_recording(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("tones.sigmf-data");
    let out = kplace_testkit::output(
        Command::new(env!("CARGO_BIN_EXE_kplace"))
            .current_dir(kplace_testkit::workspace())
            .args(["record", "--graph", BLOCKS, "--cpi", "256x32"])
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

/// The spectrogram written with the block library.
const BLOCKS: &str = "workloads/spectrogram/blocks/graph.yaml";

/// A graph of the block library is tuned with every default: its libraries are the ones its
/// placement names (`--placement`), or its own placements beside it; a library named by its
/// bare file name is found where a placement finds it; and the winner runs as written.
#[test]
fn a_block_library_graph_is_tuned_from_its_placement_with_every_default() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let store = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let recording = blocks_recording(out.path());
    let feed = [
        "--graph",
        BLOCKS,
        "--recording",
        recording.to_str().unwrap(),
        "--check",
        "reference:workloads/spectrogram/blocks/cpu.yaml",
    ];
    let placement: &[&str] = &[&feed[..], &["--placement", "cpu"]].concat();
    let (code, stdout, stderr) = tune("256x32", store.path(), out.path(), placement);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(stderr.contains("libkplace_blocks.so"), "{stderr}");
    assert!(stdout.contains("| ccccc-w1-s4 |"), "{stdout}");
    let tuned = out.path().join("tune-256x32/tuned.yaml");
    let text = std::fs::read_to_string(&tuned).unwrap();
    assert!(
        text.contains("libraries: {cpu: \"libkplace_blocks.so\""),
        "{text}"
    );
    // Without --placement, the placements beside the graph name the same library: the same
    // calibration, reused.
    let (code, _, stderr) = tune("256x32", store.path(), out.path(), &feed);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("reusing the calibration in"), "{stderr}");
    // The library by its bare file name, found beside kplace as a placement finds it: again
    // the same build.
    let named: &[&str] = &[&feed[..], &["--cpu-library", "libkplace_blocks.so"]].concat();
    let (code, _, stderr) = tune("256x32", store.path(), out.path(), named);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("reusing the calibration in"), "{stderr}");
    // A name found nowhere is refused, saying where it was looked for.
    let missing: &[&str] = &[&feed[..], &["--cpu-library", "libkplace_nowhere.so"]].concat();
    let (code, _, stderr) = tune("256x32", store.path(), out.path(), missing);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--cpu-library libkplace_nowhere.so: no such kernel library (looked for libkplace_nowhere.so, ")
            && stderr.contains("/libkplace_nowhere.so"),
        "{stderr}"
    );
    // The winner runs as written, every frame checked against the reference.
    let run = kplace_testkit::output(
        Command::new(env!("CARGO_BIN_EXE_kplace"))
            .current_dir(kplace_testkit::workspace())
            .args(["run", "--graph", BLOCKS, "--recording"])
            .arg(&recording)
            .args([
                "--check",
                "reference:workloads/spectrogram/blocks/cpu.yaml",
                "--placement",
            ])
            .arg(&tuned),
    );
    assert!(
        run.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
}

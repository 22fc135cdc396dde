//! Every output kplace writes, as a user names it: never written onto anything but a regular
//! file (a device node is written into or refused, never replaced), checked before the work
//! starts, and `-` refused where only a file or directory can go.
//!
//! Device nodes are made in a temporary directory with `mknod` (as root, as CI runs); where
//! that cannot be done the device cases are skipped, saying why.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kplace_testkit::devices::{is_char_device, null_device_in};

fn kplace(args: &[&str]) -> Output {
    kplace_testkit::output(
        Command::new(env!("CARGO_BIN_EXE_kplace"))
            .args(args)
            .current_dir(kplace_testkit::workspace()),
    )
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs kplace expecting an input error (exit 2) that says each of `wants`.
fn refused(args: &[&str], wants: &[&str]) -> String {
    let out = kplace(args);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(2), "kplace {args:?}:\n{said}");
    for want in wants {
        assert!(
            said.contains(want),
            "kplace {args:?} should say {want:?}:\n{said}"
        );
    }
    said
}

/// A device node in `dir`, or `None` (the reason printed) where none can be made.
fn device(dir: &Path, name: &str) -> Option<PathBuf> {
    match null_device_in(dir, name) {
        Ok(path) => Some(path),
        Err(why) => {
            eprintln!("skipped the device cases: {why}");
            None
        }
    }
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// The case: `kplace run --source udp://127.0.0.1:0 --frames 5 --ready-file /dev/full`
/// renamed its temporary file onto the device. A ready file is refused before the run starts
/// wherever it could not be written (a device, a directory, a directory that cannot be made),
/// so that no sender waits for it forever, and the device is left as it was.
#[test]
fn a_ready_file_that_cannot_be_written_fails_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let run = |ready: &str, wants: &[&str]| {
        let args = [
            "run",
            "--cpi",
            "64x32",
            "--source",
            "udp://127.0.0.1:0",
            "--frames",
            "5",
            "--idle-timeout",
            "2s",
            "--ready-file",
            ready,
        ];
        refused(&args, wants)
    };
    if let Some(full) = device(dir.path(), "full") {
        let said = run(
            s(&full),
            &["--ready-file", "is a character device, not a regular file"],
        );
        assert!(
            !said.contains("listening on"),
            "refused before it listened:\n{said}"
        );
        assert!(is_char_device(&full), "the device is still a device");
    }
    run(s(dir.path()), &["is a directory, not a regular file"]);
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, "").unwrap();
    run(
        s(&blocker.join("sub/ready.json")),
        &["is a regular file, not a directory"],
    );
    run("-", &["--ready-file -: this output goes to a file"]);
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n != "full" && n != "file")
        .collect();
    assert!(left.is_empty(), "nothing written beside: {left:?}");
}

/// Streams (a report, detections, progress) are written into a device in place, and the
/// device stays one; files (a recording, sink files) are refused there before any work.
#[test]
fn a_device_takes_a_stream_and_refuses_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let Some(null) = device(dir.path(), "null") else {
        return;
    };
    let out = kplace(&[
        "run",
        "--cpi",
        "64x32",
        "--target",
        "10,0,20",
        "--frames",
        "5",
        "--report",
        s(&null),
        "--detections",
        s(&null),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(is_char_device(&null));
    refused(
        &[
            "record",
            "--graph",
            "spectrogram",
            "--frames",
            "2",
            "--out",
            s(&null),
        ],
        &["is a character device, not a regular file"],
    );
    assert!(is_char_device(&null));
    // A sink file whose name is a device: refused when the files are created, before the run.
    let sinks = dir.path().join("sinks");
    std::fs::create_dir(&sinks).unwrap();
    let Some(node) = device(&sinks, "clusters.npy") else {
        return;
    };
    let out = kplace(&[
        "run",
        "--cpi",
        "64x32",
        "--target",
        "10,0,20",
        "--frames",
        "5",
        "--write-sinks",
        s(&sinks),
    ]);
    assert_ne!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("is a character device, not a regular file"),
        "{}",
        text(&out)
    );
    assert!(is_char_device(&node));
}

/// `-` where only a file or a directory can go is refused naming the option, never created
/// as a file or directory named `-`.
#[test]
fn a_dash_where_only_a_file_can_go_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cwd_dash = kplace_testkit::workspace().join("-");
    assert!(
        !cwd_dash.exists(),
        "a file named - is already in the workspace"
    );
    refused(
        &[
            "run",
            "--cpi",
            "64x32",
            "--frames",
            "2",
            "--write-sinks",
            "-",
        ],
        &["--write-sinks -: this output goes to a file"],
    );
    let results = dir.path().join("r.json");
    std::fs::write(&results, "{}").unwrap();
    refused(
        &["plot", s(&results), "--out", "-"],
        &["--out -: this output goes to a file"],
    );
    refused(
        &["bisect-rate", "--cpi", "64x32", "--out", "-"],
        &["--out -: this output goes to a file"],
    );
    assert!(!cwd_dash.exists(), "no file named - was made");
}

/// The case: `kplace tune --write /dev/full` (or under a directory that cannot be made)
/// calibrated and proved for minutes before saying it could not write. The winner's file is
/// checked before anything is calibrated: the store stays empty.
#[test]
fn tune_checks_its_winner_file_before_it_calibrates() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let tune = |write: &str| {
        let out = kplace_testkit::output(
            Command::new(env!("CARGO_BIN_EXE_kplace"))
                .current_dir(kplace_testkit::workspace())
                .args([
                    "tune",
                    "--cpi",
                    "64x32",
                    "--calibrate-s",
                    "0.2",
                    "--prove",
                    "0",
                ])
                .arg("--calibrations")
                .arg(&store)
                .arg("--out")
                .arg(dir.path().join("out"))
                .args(["--write", write]),
        );
        assert_eq!(
            out.status.code(),
            Some(2),
            "--write {write}:\n{}",
            text(&out)
        );
        assert!(!text(&out).contains("calibrating"), "{}", text(&out));
        text(&out)
    };
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, "").unwrap();
    let said = tune(s(&blocker.join("tuned.yaml")));
    assert!(
        said.contains("is a regular file, not a directory"),
        "{said}"
    );
    let said = tune("-");
    assert!(
        said.contains("--write -: this output goes to a file"),
        "{said}"
    );
    if let Some(node) = device(dir.path(), "full") {
        let said = tune(s(&node));
        assert!(
            said.contains("is a character device, not a regular file"),
            "{said}"
        );
        assert!(is_char_device(&node));
    }
    assert!(!store.exists(), "nothing was calibrated");
}

/// The case: `--report out/x.json` failed where `out/` was missing, while
/// `--write-sinks` made its directory. Every output makes the directories it needs, as `mkdir
/// -p` would (docs/report.md, "Where outputs go"): a run's report, detections, completion
/// times, progress lines, trace and sink files, and a recording, each in a directory of its
/// own that is not there yet; each is then complete (the report parses and counts the frames).
#[test]
fn every_output_makes_the_directories_it_needs() {
    let dir = tempfile::tempdir().unwrap();
    let at = |name: &str| dir.path().join(name);
    let out = kplace(&[
        "run",
        "--cpi",
        "64x32",
        "--target",
        "10,0,20",
        "--frames",
        "4",
        "--report",
        s(&at("a/report.json")),
        "--detections",
        s(&at("b/c/detections.txt")),
        "--done-times",
        s(&at("d/times.csv")),
        "--report-every",
        "1s",
        "--progress-out",
        s(&at("e/progress.jsonl")),
        "--trace",
        s(&at("f/trace.json")),
        "--write-sinks",
        s(&at("g/h/sinks")),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(at("a/report.json")).unwrap()).unwrap();
    assert_eq!(report["frames"], 4, "{report}");
    let times = std::fs::read_to_string(at("d/times.csv")).unwrap();
    assert_eq!(times.lines().count(), 4, "{times}");
    for file in [
        "b/c/detections.txt",
        "e/progress.jsonl",
        "f/trace.json",
        "g/h/sinks/clusters.npy",
    ] {
        let len = std::fs::metadata(at(file)).map(|m| m.len()).unwrap_or(0);
        assert!(len > 0, "{file} was not written");
    }
    let recording = at("i/j/tones.sigmf-data");
    let out = kplace(&[
        "record",
        "--graph",
        "spectrogram",
        "--frames",
        "2",
        "--out",
        s(&recording),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(recording.is_file() && at("i/j/tones.sigmf-meta").is_file());
}

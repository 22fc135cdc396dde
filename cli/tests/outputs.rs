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
/// wherever it could not be written (a device, a directory, a directory that is not there),
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
    let missing = dir.path().join("no/such/dir/ready.json");
    run(s(&missing), &["no/such/dir"]);
    run("-", &["--ready-file -: this output goes to a file"]);
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
    assert!(left.len() <= 1, "nothing written beside: {left:?}");
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

/// The case: `kplace tune --write /dev/full` (or into a directory that is not there)
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
    let said = tune(s(&dir.path().join("missing/tuned.yaml")));
    assert!(said.contains("missing"), "{said}");
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

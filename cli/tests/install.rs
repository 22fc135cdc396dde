//! `scripts/install.sh PREFIX` installs what kplace needs to run from anywhere: the command,
//! its kernel libraries beside it, the workloads' graphs and placements by name, man pages and
//! completions. The radar and the spectrogram then run, and verify, from a directory that is
//! not the repository, with no environment pointing at it; a library missing from the prefix
//! is named with every place looked. Every process is guarded and every wait has a limit.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use kplace_testkit::{Ended, Guard};

const LIMIT: Duration = Duration::from_secs(120);

/// A command run in `dir`, with nothing in its environment pointing at the repository.
fn command(program: &Path, dir: &Path) -> Command {
    let mut c = Command::new(program);
    c.current_dir(dir)
        .env_remove("KPLACE_LIB_DIR")
        .env_remove("KPLACE_DATA_DIR")
        .env_remove("KPLACE_BIN");
    c
}

fn run(program: &Path, dir: &Path, args: &[&str]) -> Ended {
    let ended = Guard::spawn(command(program, dir).args(args)).wait(LIMIT);
    assert!(
        ended.status.success(),
        "{} {args:?}:\n{}\n{}",
        program.display(),
        ended.stdout,
        ended.stderr
    );
    ended
}

/// Installs the binaries this test was built with into a fresh prefix.
fn install() -> (tempfile::TempDir, PathBuf) {
    let prefix = tempfile::tempdir().unwrap();
    let built = kplace_testkit::kplace_bin!();
    let build_dir = built.parent().expect("the binary's directory");
    let script = kplace_testkit::workspace().join("scripts/install.sh");
    let mut c = command(&script, &kplace_testkit::workspace());
    c.arg(prefix.path()).env("KPLACE_BUILD_DIR", build_dir);
    let ended = Guard::spawn(&mut c).wait(LIMIT);
    assert!(ended.status.success(), "{}\n{}", ended.stdout, ended.stderr);
    let bin = prefix.path().join("bin/kplace");
    (prefix, bin)
}

#[test]
fn an_installed_kplace_runs_the_radar_and_the_spectrogram_from_anywhere() {
    let (prefix, kplace) = install();
    let p = prefix.path();
    for file in [
        "lib/kplace/libkplace_cpu.so",
        "lib/kplace/libkplace_blocks.so",
        "lib/kplace/libkplace_python.so",
        "share/kplace/workloads/beamformer/filtered/fir.py",
        "share/kplace/workloads/radar/graph.yaml",
        "share/kplace/workloads/radar/placements/all-cpu.yaml",
        "share/kplace/workloads/beamformer/weighted/weights.npy",
        "share/man/man1/kplace.1",
        "share/man/man1/kplace-run.1",
        "share/man/man1/kplace-mps-start.1",
        "share/bash-completion/completions/kplace",
        "share/zsh/site-functions/_kplace",
    ] {
        assert!(p.join(file).is_file(), "{file} is not installed");
    }
    assert!(!p.join("share/kplace/workloads/radar/src").exists());
    // The NAME line says what kplace is once, and no page names one that is not installed.
    let page = std::fs::read_to_string(p.join("share/man/man1/kplace.1")).unwrap();
    assert!(
        page.contains("kplace \\- a streaming signal") && !page.contains("kplace\\-help"),
        "{page}"
    );
    assert!(!p.join("share/man/man1/kplace-help.1").exists());

    let elsewhere = tempfile::tempdir().unwrap();
    let dir = elsewhere.path();
    // The defaults are the radar on all-cpu, found by name in the prefix.
    let radar = run(&kplace, dir, &["run", "--frames", "20"]);
    assert!(
        radar
            .stdout
            .contains("verification PASSED: 20/20 frames reported, 20 passed"),
        "{}",
        radar.stdout
    );
    let plan = run(
        &kplace,
        dir,
        &["plan", "--graph", "radar", "--placement", "all-cpu"],
    );
    let share = p.join("share/kplace/workloads/radar/graph.yaml");
    let lib = p.join("lib/kplace/libkplace_cpu.so");
    for path in [share, lib] {
        assert!(
            plan.stdout.contains(&path.display().to_string()),
            "{}",
            plan.stdout
        );
    }

    run(
        &kplace,
        dir,
        &[
            "record",
            "--graph",
            "spectrogram",
            "--frames",
            "3",
            "--out",
            "tones.sigmf-data",
        ],
    );
    let spectrogram = run(
        &kplace,
        dir,
        &[
            "run",
            "--graph",
            "spectrogram",
            "--placement",
            "cpu-2",
            "--recording",
            "tones.sigmf-data",
            "--frames",
            "6",
            "--check",
            "reference:cpu",
        ],
    );
    assert!(
        spectrogram
            .stdout
            .contains("verification PASSED: 6/6 frames reported, 6 passed"),
        "{}",
        spectrogram.stdout
    );
    let names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(
        names.len(),
        2,
        "the runs wrote only the recording: {names:?}"
    );

    // Without its CPU library the prefix cannot run, and says every place it looked.
    std::fs::remove_file(p.join("lib/kplace/libkplace_cpu.so")).unwrap();
    let ended = Guard::spawn(command(&kplace, dir).args(["plan"])).wait(LIMIT);
    assert!(!ended.status.success());
    assert!(
        ended.stderr.contains("libkplace_cpu.so was not found in: ")
            && ended
                .stderr
                .contains(&p.join("lib/kplace").display().to_string())
            && ended.stderr.contains(&p.join("bin").display().to_string()),
        "{}",
        ended.stderr
    );
    let ended = Guard::spawn(command(&kplace, dir).args(["plan", "--graph", "sonar"])).wait(LIMIT);
    assert!(
        ended
            .stderr
            .contains("graph sonar: no such file, and not found by name in: sonar, ")
            && ended
                .stderr
                .contains("share/kplace/workloads/sonar/graph.yaml"),
        "{}",
        ended.stderr
    );
}

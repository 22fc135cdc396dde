//! Two processes on one machine, as a user runs them: `kplace run --source udp://...` and
//! `kplace send`, every frame verified, with the latency report and the JSON report.

mod support;

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};

fn kplace() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kplace"));
    c.current_dir(support::workspace());
    c
}

/// Starts `kplace run` on an OS-chosen port; returns the child, the port, and a thread
/// collecting the rest of its stderr.
fn start_receiver(args: &[&str]) -> (std::process::Child, u16, std::thread::JoinHandle<String>) {
    let mut child = kplace()
        .args([
            "run",
            "--source",
            "udp://127.0.0.1:0",
            "--idle-timeout-s",
            "1",
        ])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start kplace run");
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
    let mut seen = String::new();
    let port = loop {
        let mut line = String::new();
        if stderr.read_line(&mut line).expect("read stderr") == 0 {
            panic!("kplace run exited before listening:\n{seen}");
        }
        seen.push_str(&line);
        if let Some(rest) = line.split("listening on udp://").nth(1) {
            let addr = rest.split_whitespace().next().expect("address");
            break addr
                .rsplit(':')
                .next()
                .and_then(|p| p.parse().ok())
                .expect("port");
        }
    };
    let rest = std::thread::spawn(move || {
        let mut tail = String::new();
        let _ = stderr.read_to_string(&mut tail);
        seen + &tail
    });
    (child, port, rest)
}

#[test]
fn send_and_run_as_two_processes_verify_every_frame() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let (child, port, stderr) =
        start_receiver(&["--frames", "24", "--report", report.to_str().unwrap()]);
    let dest = format!("127.0.0.1:{port}");
    let sent = kplace()
        .args(["send", "--dest", &dest, "--frames", "24", "--rate", "100"])
        .output()
        .unwrap();
    assert!(
        sent.status.success(),
        "{}",
        String::from_utf8_lossy(&sent.stderr)
    );
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = stderr.join().unwrap();
    assert!(
        out.status.success(),
        "kplace run failed:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("verification PASSED: 24/24 frames reported, 24 passed"),
        "{stdout}"
    );
    assert!(
        stdout.contains("frames complete 24, partial 0, dropped 0"),
        "{stdout}"
    );
    assert!(
        stdout.contains("post-CPI latency") && stdout.contains("p99.9"),
        "{stdout}"
    );

    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(json["schema"], "kplace-run-report/1");
    assert_eq!(json["frames"], 24);
    assert_eq!(json["ingest"]["accepted"], 24 * 128);
    assert_eq!(json["verification"]["passed"], true);
    assert!(json["latency"]["post_cpi"]["p50_ms"].as_f64().unwrap() > 0.0);
}

#[test]
fn a_lossy_stream_reports_partial_frames_and_fails_coverage() {
    let (child, port, stderr) = start_receiver(&["--frames", "10"]);
    let dest = format!("127.0.0.1:{port}");
    let sent = kplace()
        .args([
            "send",
            "--dest",
            &dest,
            "--frames",
            "10",
            "--rate",
            "100",
            "--drop",
            "4:7",
            "--duplicate",
            "2:3",
        ])
        .args(["--malformed", "6:0:wrong_samples"])
        .output()
        .unwrap();
    assert!(
        sent.status.success(),
        "{}",
        String::from_utf8_lossy(&sent.stderr)
    );
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let _ = stderr.join();
    assert_eq!(out.status.code(), Some(1), "coverage fails: {stdout}");
    assert!(
        stdout.contains("frames complete 8, partial 2, dropped 0"),
        "{stdout}"
    );
    assert!(
        stdout.contains("duplicates 1") && stdout.contains("wrong_samples 1"),
        "{stdout}"
    );
    assert!(
        stdout.contains("8 passed") && stdout.contains("2 of 10 frames were never reported"),
        "{stdout}"
    );
}

/// Two pipelines in one receiver process, each on its own port with its own sender; in the
/// process mode each child listens on its own port too. Every frame of both is verified.
#[test]
fn two_pipelines_each_take_their_own_stream() {
    for mode in ["thread", "process"] {
        let mut child = kplace()
            .args([
                "run",
                "--source",
                "udp://127.0.0.1:0",
                "--idle-timeout-s",
                "1",
            ])
            .args([
                "--frames",
                "16",
                "--pipelines",
                "2",
                "--pipeline-mode",
                mode,
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start kplace run");
        let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
        let mut ports = Vec::new();
        let mut seen = String::new();
        while ports.len() < 2 {
            let mut line = String::new();
            if stderr.read_line(&mut line).expect("read stderr") == 0 {
                panic!("kplace run exited before listening:\n{seen}");
            }
            seen.push_str(&line);
            if let Some(rest) = line.split("listening on udp://").nth(1) {
                let addr = rest.split_whitespace().next().expect("address");
                ports.push(addr.rsplit(':').next().unwrap().parse::<u16>().unwrap());
            }
        }
        assert_ne!(ports[0], ports[1], "each pipeline has its own port");
        let drain = std::thread::spawn(move || {
            let mut tail = String::new();
            let _ = stderr.read_to_string(&mut tail);
        });
        let senders: Vec<_> = ports
            .iter()
            .map(|port| {
                kplace()
                    .args(["send", "--dest", &format!("127.0.0.1:{port}")])
                    .args(["--frames", "16", "--rate", "100"])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for mut s in senders {
            assert!(s.wait().unwrap().success());
        }
        let out = child.wait_with_output().unwrap();
        let _ = drain.join();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{mode}: {stdout}");
        assert_eq!(
            stdout
                .matches("verification PASSED: 16/16 frames reported, 16 passed")
                .count(),
            2,
            "{mode}: {stdout}"
        );
        assert!(
            stdout.contains("verification PASSED: 2/2 pipelines passed"),
            "{stdout}"
        );
    }
}

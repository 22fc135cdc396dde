//! The several-pipeline session's aggregate and child pipelines, from outside the crate: the
//! run reports they read are the testkit's well-formed fixtures (`kplace_testkit::run_report`).

use std::process::Command;
use std::time::Duration;

use kplace::report::run::PipelineEntry;
use kplace::session::several::{ChildPipeline, PipelineMode, aggregate, failed, in_processes};

#[test]
fn the_aggregate_sums_rates_and_takes_the_worst_latency() {
    let r = |rate: f64, p99: f64, passed: bool| {
        let mut r = kplace_testkit::run_report(10, rate, p99);
        r.dropped_frames = 1;
        r.input_gbit_per_s = 0.5;
        r.cores_used = 1.0;
        r.verification.passed = passed;
        PipelineEntry::Ran(Box::new(r))
    };
    let a = aggregate(
        &[r(100.0, 1.0, true), r(90.0, 3.0, true)],
        PipelineMode::Process,
    );
    assert_eq!(a.frames, 20);
    assert_eq!(a.dropped_frames, 2);
    assert_eq!(a.frames_per_s, 190.0);
    assert_eq!(a.min_pipeline_frames_per_s, Some(90.0));
    assert_eq!(a.worst_post_frame_p99_ms, Some(3.0));
    assert_eq!(a.cores_used, 2.0);
    assert!(a.all_passed);
    let text = a.to_string();
    assert!(
        text.contains("2 pipelines (process): 20 frames")
            && text.contains("aggregate 190.0 frames/s")
            && text.ends_with("verification PASSED: 2/2 pipelines passed\n"),
        "{text}"
    );
    let a = aggregate(
        &[r(100.0, 1.0, true), failed("no GPU".into())],
        PipelineMode::Thread,
    );
    assert!(!a.all_passed, "a pipeline that did not run fails the run");
    assert_eq!(a.pipelines_passed, 1);
    assert_eq!(a.cores_used, 1.0, "threads share the process's CPU time");
}

#[test]
fn child_pipelines_report_and_a_child_that_never_gets_ready_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    let text = serde_json::to_string(&kplace_testkit::run_report(5, 50.0, 1.0)).unwrap();
    std::fs::write(dir.path().join("r.src"), text).unwrap();
    let mut writes = Command::new("sh");
    writes.arg("-c").arg(format!(
        "echo hello; echo to-stderr >&2; cp {} {}",
        dir.path().join("r.src").display(),
        report.display()
    ));
    let mut silent = Command::new("true");
    silent.arg("ignored");
    let outcomes = in_processes(
        vec![
            ChildPipeline {
                command: writes,
                report: report.clone(),
                ready: None,
                outputs: Vec::new(),
            },
            ChildPipeline {
                command: silent,
                report: dir.path().join("none.json"),
                ready: None,
                outputs: Vec::new(),
            },
        ],
        None,
        Duration::from_secs(30),
    )
    .unwrap();
    assert_eq!(outcomes[0].stdout, "hello\n");
    assert_eq!(outcomes[0].report.as_ref().unwrap().frames, 5);
    let why = outcomes[1].report.as_ref().unwrap_err().to_string();
    assert!(why.ends_with("without a report"), "{why}");

    let never = ChildPipeline {
        command: Command::new("true"),
        report: dir.path().join("x.json"),
        ready: Some(dir.path().join("x.ready")),
        outputs: Vec::new(),
    };
    let e = in_processes(vec![never], None, Duration::from_secs(30)).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("pipeline 0 did not start: it exited"),
        "{e}"
    );
}

/// The case: a process-mode child killed with SIGKILL left its `.NAME.PID.XXXXXX.tmp`
/// files beside its outputs. Once it is reaped, the parent removes them (its own only: another
/// process's temporary file beside the same output stays).
#[test]
fn a_killed_childs_temporary_files_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let sinks = dir.path().join("p0");
    std::fs::create_dir(&sinks).unwrap();
    let detections = dir.path().join("det.p0.txt");
    let others = dir.path().join(".det.p0.txt.1.abcdef.tmp");
    std::fs::write(&others, "another process's").unwrap();
    let mut killed = Command::new("sh");
    killed.arg("-c").arg(format!(
        "touch {dir}/.det.p0.txt.$$.abcdef.tmp {sinks}/.beams.npy.$$.qwerty.tmp; kill -9 $$",
        dir = dir.path().display(),
        sinks = sinks.display()
    ));
    let outcomes = in_processes(
        vec![ChildPipeline {
            command: killed,
            report: dir.path().join("r.json"),
            ready: None,
            outputs: vec![detections, sinks.clone()],
        }],
        None,
        Duration::from_secs(30),
    )
    .unwrap();
    assert!(!outcomes[0].status.success());
    let mut left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .chain(std::fs::read_dir(&sinks).unwrap())
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, [".det.p0.txt.1.abcdef.tmp", "p0"], "{left:?}");
}

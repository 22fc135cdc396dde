//! `kplace run --adapt`: the radar moving between a one-worker placement and one with two
//! pinned workers while the stream runs. A budget no frame can meet makes the switch certain,
//! so the report, the progress lines, the trace and its picture are checked with every frame
//! verified; a CPU hog arriving mid-stream checks that whatever the switching does under a
//! real co-tenant, nothing is lost and every switch carries the evidence its rule demands;
//! the filtered beamformer's FIR history moves with the stream; and what cannot adapt is
//! refused, naming why. Every process is guarded and every wait has a limit; no test asserts
//! a time.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use kplace::adapt::{Adaptation, Reason};
use kplace::report::run::RunReport;
use kplace_testkit::Guard;

const LIMIT: Duration = Duration::from_secs(120);

fn kplace() -> Command {
    let mut c = Command::new(kplace_testkit::kplace_bin!());
    c.current_dir(kplace_testkit::workspace());
    c
}

fn run(args: &[&str]) -> Output {
    kplace_testkit::output_within(kplace().args(args), LIMIT, None)
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `kplace run` of 100 frames with `extra` against a budget no frame meets (windows of 8),
/// which must succeed, reporting to `report`; returns what it printed.
fn run_forced(extra: &[&str], report: &Path) -> String {
    let mut args = vec![
        "run",
        "--frames",
        "100",
        "--budget",
        "1us",
        "--adapt-window",
        "8",
    ];
    args.extend_from_slice(extra);
    args.extend(["--report", report.to_str().unwrap()]);
    let out = run(&args);
    let log = text(&out);
    assert!(out.status.success(), "{args:?}: {log}");
    log
}

/// Runs `args`, which must fail saying `why`.
fn assert_refused(args: &[&str], why: &str) {
    let out = run(args);
    let log = text(&out);
    assert!(!out.status.success(), "{args:?} ran:\n{log}");
    assert!(log.contains(why), "{args:?}: {why} not in:\n{log}");
}

fn report(path: &Path) -> RunReport {
    let text = std::fs::read_to_string(path).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// Every switch follows from its evidence as the rule says, switches alternate between
/// neighbouring placements, and the frames per placement add up to the run's.
fn assert_consistent(a: &Adaptation, frames: u64, budget_ms: f64) {
    assert_eq!(a.placements, ["all-cpu", "all-cpu-pinned"]);
    assert_eq!(a.frames.iter().sum::<u64>(), frames, "{a}");
    assert_eq!(a.budget_ms, budget_ms);
    assert_eq!(a.trigger_ms, budget_ms / 2.0);
    let (mut on, mut probing) = (0, false);
    for s in &a.switches {
        let e = &s.evidence;
        assert_eq!(s.from, on, "{a}");
        assert!(e.frames >= 1 && e.frames <= a.window, "{a}");
        // At most a quarter of a window may be late; none only in a probe's first window.
        let strict = probing && s.reason == Reason::Pressure && e.late_allowed == 0;
        assert!(strict || e.late_allowed == a.window / 4, "{a}");
        let pressure = e.late > e.late_allowed || e.occupancy >= 0.75 || e.slot_misses > 0;
        match s.reason {
            Reason::Pressure => assert!(pressure && s.to == s.from + 1, "{a}"),
            Reason::Relief => assert!(!pressure && s.to + 1 == s.from, "{a}"),
        }
        on = s.to;
        probing = s.reason == Reason::Relief;
    }
}

#[test]
fn a_budget_no_frame_meets_moves_the_stream_on_with_every_frame_verified() {
    let dir = tempfile::tempdir().unwrap();
    let (report_path, trace, progress) = (
        dir.path().join("run.json"),
        dir.path().join("trace.json"),
        dir.path().join("progress.jsonl"),
    );
    let out = run(&[
        "run",
        "--frames",
        "300",
        "--adapt",
        "all-cpu-pinned",
        "--budget",
        "1us",
        "--adapt-window",
        "8",
        "--report",
        report_path.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
        "--report-every",
        "50ms",
        "--progress-out",
        progress.to_str().unwrap(),
    ]);
    let log = text(&out);
    assert!(out.status.success(), "{log}");
    assert!(log.contains("verification PASSED: 300/300"), "{log}");
    assert!(
        log.contains("on placement all-cpu (adapting to all-cpu-pinned)"),
        "{log}"
    );
    assert!(
        log.contains("switching from all-cpu to all-cpu-pinned"),
        "{log}"
    );
    let r = report(&report_path);
    let a = r.adaptation.expect("the report says how the run adapted");
    assert_consistent(&a, 300, 0.001);
    // Every window is over the budget: one switch, after the first, and the last placement
    // keeps the rest of the stream.
    assert_eq!(a.switches.len(), 1, "{a}");
    let s = &a.switches[0];
    assert_eq!((s.from, s.to, s.reason), (0, 1, Reason::Pressure));
    // Decided as soon as more than a quarter of a window of 8 was late: the third frame.
    assert_eq!((s.evidence.frames, s.evidence.late), (3, 3));
    assert!(a.frames[1] >= 300 - 3 - 64, "{a}");
    assert_eq!(r.stages[0].device, "cpu");

    // The progress lines name the placement running and count the switches.
    let lines = std::fs::read_to_string(&progress).unwrap();
    let last: serde_json::Value = serde_json::from_str(lines.lines().last().unwrap()).unwrap();
    assert_eq!(last["schema"], "kplace-progress/3");
    assert_eq!(last["placement"], "all-cpu-pinned", "{lines}");
    assert_eq!(last["switches"], 1, "{lines}");

    // The trace marks the switch and names the placement of every frame; its picture draws
    // them.
    let json = std::fs::read_to_string(&trace).unwrap();
    assert!(
        json.contains("\"switch to all-cpu-pinned\""),
        "no switch mark"
    );
    let picture = dir.path().join("switches.svg");
    let out = run(&[
        "plot-trace",
        trace.to_str().unwrap(),
        "--switches",
        "--budget",
        "1us",
        "--out",
        picture.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let svg = std::fs::read_to_string(&picture).unwrap();
    for word in ["a frame run on all-cpu-pinned", "1 switch"] {
        assert!(svg.contains(word), "{word} not in the picture");
    }
}

#[test]
fn a_cpu_hog_mid_stream_loses_nothing_and_every_switch_has_its_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let (ready, report_path) = (dir.path().join("ready.json"), dir.path().join("run.json"));
    let frames = 600;
    let mut receiver = Guard::spawn(kplace().args([
        "run",
        "--frames",
        &frames.to_string(),
        "--source",
        "udp://127.0.0.1:0",
        "--adapt",
        "all-cpu-pinned",
        "--budget",
        "5ms",
        "--adapt-hold",
        "500ms",
        "--ready-file",
        ready.to_str().unwrap(),
        "--report",
        report_path.to_str().unwrap(),
        "--idle-timeout",
        "5s",
    ]));
    let port = receiver.wait_ready(&ready, LIMIT)[0];
    // 600 frames at 200 per second: 3 s of stream; two spinning threads for 1 s of it.
    let sender = Guard::spawn(kplace().args([
        "send",
        "--dest",
        &format!("127.0.0.1:{port}"),
        "--frames",
        &frames.to_string(),
        "--rate",
        "200",
    ]));
    std::thread::sleep(Duration::from_millis(1000));
    let hog = Guard::spawn(kplace().args(["hog", "cpu", "--threads", "2", "--duration", "1s"]));
    let hog = hog.wait(LIMIT);
    assert!(hog.status.success(), "{}", hog.stderr);
    let sent = sender.wait(LIMIT);
    assert!(sent.status.success(), "{}", sent.stderr);
    let ended = receiver.wait(LIMIT);
    assert!(ended.status.success(), "{}", ended.stderr);
    let r = report(&report_path);
    assert_eq!(
        (r.frames, r.partial_frames, r.dropped_frames),
        (frames, 0, 0)
    );
    assert!(r.verification.passed, "{:?}", r.verification);
    let a = r.adaptation.expect("the report says how the run adapted");
    assert_consistent(&a, frames, 5.0);
}

#[test]
fn what_cannot_adapt_is_refused_naming_why() {
    assert_refused(&["run", "--adapt", "all-cpu-pinned"], "--budget <DURATION>");
    assert_refused(
        &[
            "run",
            "--adapt",
            "all-cpu-pinned",
            "--budget",
            "5ms",
            "--workers",
            "2",
        ],
        "--adapt with --workers",
    );
    assert_refused(
        &["run", "--adapt", "no-such-placement", "--budget", "5ms"],
        "no-such-placement",
    );
    assert_refused(
        &["run", "--adapt", "all-cpu-pinned", "--budget", "0ms"],
        "longer than zero",
    );
}

/// The case: `--adapt` naming the run's own placement was accepted, and the run
/// printed `switching from all-cpu to all-cpu`, where an `alternatives:` list naming its own
/// placement is refused. Now --adapt is refused as that list is: the run's own placement, by
/// name, path or placement name, and a placement given twice.
#[test]
fn adapt_to_the_runs_own_placement_or_one_twice_is_refused() {
    let own = "is this run's placement itself (all-cpu, as --placement); give the others";
    for (placement, adapt) in [
        ("all-cpu", "all-cpu"),
        ("all-cpu", "workloads/radar/placements/all-cpu.yaml"),
        ("workloads/radar/placements/all-cpu.yaml", "all-cpu"),
    ] {
        assert_refused(
            &[
                "run",
                "--frames",
                "8",
                "--placement",
                placement,
                "--adapt",
                adapt,
                "--budget",
                "5ms",
            ],
            &format!("--adapt {adapt} {own}"),
        );
    }
    // Another file of the same placement name is the same placement to switch to.
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("copy.yaml");
    std::fs::copy(
        kplace_testkit::workspace().join("workloads/radar/placements/all-cpu.yaml"),
        &copy,
    )
    .unwrap();
    let copy = copy.to_str().unwrap();
    assert_refused(
        &["run", "--frames", "8", "--adapt", copy, "--budget", "5ms"],
        &format!("--adapt {copy} {own}"),
    );
    assert_refused(
        &[
            "run",
            "--frames",
            "8",
            "--adapt",
            "all-cpu-pinned",
            "--adapt",
            "workloads/radar/placements/all-cpu-pinned.yaml",
            "--budget",
            "5ms",
        ],
        "--adapt workloads/radar/placements/all-cpu-pinned.yaml is given twice (placement all-cpu-pinned)",
    );
}

/// The filtered beamformer's FIR carries each channel's history from frame to frame: the
/// switch moves it with the stream, and every frame equals the one-worker placement's run of
/// the whole recording.
#[test]
fn a_stateful_stage_carries_its_history_across_the_switch() {
    let dir = tempfile::tempdir().unwrap();
    let (recording, report_path) = (
        dir.path().join("array.sigmf-data"),
        dir.path().join("run.json"),
    );
    let out = run(&[
        "record",
        "--graph",
        "beamformer/filtered",
        "--frames",
        "200",
        "--tone",
        "0.02:0.25:-30",
        "--noise",
        "0.01",
        "--out",
        recording.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let out = run(&[
        "run",
        "--graph",
        "beamformer/filtered",
        "--placement",
        "cpu",
        "--adapt",
        "cpu-2",
        "--budget",
        "1us",
        "--adapt-window",
        "8",
        "--recording",
        recording.to_str().unwrap(),
        "--frames",
        "200",
        "--check",
        "reference:cpu",
        "--report",
        report_path.to_str().unwrap(),
    ]);
    let log = text(&out);
    assert!(out.status.success(), "{log}");
    assert!(log.contains("verification PASSED: 200/200"), "{log}");
    assert!(
        log.contains("lowpass: stateful, 0 frames lost between its launches")
            && log.contains("its carry moved to another placement once"),
        "{log}"
    );
    let r = report(&report_path);
    let a = r.adaptation.expect("adapted");
    assert_eq!(a.switches.len(), 1, "{a}");
    let carry = r.stages[0].carry.as_ref().expect("the FIR is stateful");
    assert_eq!((carry.launches, carry.moves, carry.resets), (200, 1, 0));
}

/// A placement's `alternatives:` list is what `--budget` alone adapts between; without a
/// budget the placement runs as written, saying how to adapt; a budget with nothing to adapt
/// to, or an alternative that does not exist, is refused.
#[test]
fn a_placement_listing_alternatives_adapts_given_a_budget() {
    let dir = tempfile::tempdir().unwrap();
    let (placement, report_path) = (dir.path().join("adaptive.yaml"), dir.path().join("r.json"));
    let written = |alternatives: &str| {
        let text = format!(
            "name: adaptive\nstages: {{range_fft: cpu, doppler_fft: cpu, cfar: cpu, cluster: cpu}}\nalternatives: {alternatives}\n"
        );
        std::fs::write(&placement, text).unwrap();
    };
    written("[all-cpu-pinned]");
    let placement = placement.to_str().unwrap();
    let log = run_forced(&["--placement", placement], &report_path);
    assert!(log.contains("verification PASSED: 100/100"), "{log}");
    let a = report(&report_path).adaptation.expect("adapted");
    assert_eq!(a.placements, ["adaptive", "all-cpu-pinned"]);
    assert_eq!(a.switches.len(), 1, "{a}");

    let out = run(&["plan", "--placement", placement]);
    assert!(
        text(&out).contains("adapts to  all-cpu-pinned (kplace run --budget"),
        "{}",
        text(&out)
    );
    let out = run(&["run", "--frames", "20", "--placement", placement]);
    let log = text(&out);
    assert!(out.status.success(), "{log}");
    assert!(
        log.contains("lists alternatives; give --budget to move the stream between them")
            && !log.contains("adapting to"),
        "{log}"
    );

    assert_refused(
        &["run", "--placement", "all-cpu", "--budget", "5ms"],
        "--budget judges a run that adapts: give --adapt PLACEMENT, or list alternatives:",
    );
    written("[no-such-placement]");
    assert_refused(
        &["run", "--placement", placement, "--budget", "5ms"],
        "no-such-placement",
    );
    written("[adaptive.yaml]");
    assert_refused(
        &["run", "--placement", placement, "--budget", "5ms"],
        "alternatives: adaptive.yaml is this placement itself",
    );
}

/// With several pipelines, in threads or in processes, each adapts on its own: every frame of
/// each verified, each report with its own switches.
#[test]
fn several_pipelines_each_adapt_on_their_own() {
    let dir = tempfile::tempdir().unwrap();
    for mode in ["thread", "process"] {
        let report_path = dir.path().join(format!("{mode}.json"));
        let args = [
            "--pipelines",
            "2",
            "--pipeline-mode",
            mode,
            "--adapt",
            "all-cpu-pinned",
        ];
        let log = run_forced(&args, &report_path);
        assert!(
            log.contains("verification PASSED: 2/2 pipelines passed"),
            "{log}"
        );
        let json = std::fs::read_to_string(&report_path).unwrap();
        let multi: kplace::report::run::MultiRunReport = serde_json::from_str(&json).unwrap();
        assert_eq!(multi.pipelines.len(), 2);
        for entry in &multi.pipelines {
            let r = entry.report().expect("the pipeline ran");
            assert_eq!((r.frames, r.dropped_frames), (100, 0), "{mode}");
            let a = r.adaptation.as_ref().expect("each pipeline adapts");
            assert_consistent(a, 100, 0.001);
            assert_eq!(a.switches.len(), 1, "{mode}: {a}");
        }
    }
}

use kplace::session::child::ChildFrames;

use super::super::{BisectConfig, Stop};
use super::*;

fn report(frames: u64, rate: f64, p99_ms: f64) -> RunReport {
    kplace_testkit::run_report(frames, rate, p99_ms)
}

fn several(pipelines: Vec<PipelineEntry>) -> TrialReport {
    let aggregate = kplace::session::several::aggregate(
        &pipelines,
        kplace::session::several::PipelineMode::Thread,
    );
    TrialReport::Several(Box::new(MultiRunReport {
        schema: MULTI_SCHEMA.to_string(),
        aggregate,
        pipelines,
        interrupted: None,
        metrics_endpoint: None,
    }))
}

fn ran(report: RunReport) -> PipelineEntry {
    PipelineEntry::Ran(Box::new(report))
}

#[test]
fn every_pipeline_is_judged_and_failures_name_it() {
    let gates = Gates::new(LatencyBudget::OneFramePeriod);
    let one = TrialReport::One(Box::new(report(100, 100.0, 1.0)));
    let (_, verdict, _) = judge_pipelines(&one, 100.0, 100, &gates);
    assert!(verdict.passed, "{verdict}");
    let two = several(vec![
        ran(report(100, 100.0, 1.0)),
        ran(report(90, 90.0, 1.0)),
    ]);
    let (slowest, verdict, _) = judge_pipelines(&two, 100.0, 100, &gates);
    assert!(!verdict.passed);
    assert_eq!(slowest.processed_rate, 90.0, "the slowest pipeline is kept");
    assert!(
        verdict
            .failures
            .iter()
            .all(|f| f.to_string().starts_with("pipeline 1: ")),
        "{verdict}"
    );
    let broken = several(vec![
        ran(report(100, 100.0, 1.0)),
        PipelineEntry::Failed(kplace::report::run::PipelineFailure {
            error: "no GPU".into(),
        }),
    ]);
    let (_, verdict, loss) = judge_pipelines(&broken, 100.0, 100, &gates);
    assert_eq!(
        verdict
            .failures
            .iter()
            .map(Failure::to_string)
            .collect::<Vec<_>>(),
        ["pipeline 1: the trial failed to run: no GPU"]
    );
    // A pipeline that did not run lost every frame.
    assert_eq!(loss, 1.0);
}

#[test]
fn under_mps_a_gpu_pipeline_that_is_not_a_client_fails() {
    let with_mps = |is_client: bool, checked: &str| {
        let mut r = report(100, 100.0, 1.0);
        r.mps = Some(crate::mps::RunMps {
            requested: true,
            pipe_dir: "/tmp/nvidia-mps".into(),
            active_thread_percentage: None,
            is_client,
            checked: checked.into(),
        });
        r
    };
    let client = with_mps(true, "daemon lists pid 7");
    let fallback = with_mps(false, "not in the client list");
    let cpu_only = report(100, 100.0, 1.0);
    let one = |r: &RunReport| TrialReport::One(Box::new(r.clone()));
    assert!(mps_failures(&one(&client)).is_empty());
    assert!(
        mps_failures(&one(&cpu_only)).is_empty(),
        "no context, no MPS to check"
    );
    assert_eq!(
        mps_failures(&one(&fallback))
            .iter()
            .map(Failure::to_string)
            .collect::<Vec<_>>(),
        ["the trial failed to run: not an MPS client (not in the client list)"]
    );
    let three = several(vec![ran(client), ran(fallback), ran(cpu_only)]);
    assert_eq!(
        mps_failures(&three)
            .iter()
            .map(Failure::to_string)
            .collect::<Vec<_>>(),
        ["pipeline 1: the trial failed to run: not an MPS client (not in the client list)"]
    );
}

#[test]
fn a_report_with_a_field_missing_or_renamed_is_unreadable_not_zero() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trial-0.json");
    let good = serde_json::to_value(report(100, 100.0, 1.0)).unwrap();
    fs::write(&path, good.to_string()).unwrap();
    assert!(matches!(TrialReport::read(&path), Ok(TrialReport::One(_))));

    let mut renamed = good.clone();
    let frames = renamed.as_object_mut().unwrap().remove("frames").unwrap();
    renamed["frames_done"] = frames;
    fs::write(&path, renamed.to_string()).unwrap();
    let why = TrialReport::read(&path).unwrap_err().to_string();
    assert!(why.contains("frames_done"), "{why}");

    let mut missing = good.clone();
    missing["latency"]["post_frame"]
        .as_object_mut()
        .unwrap()
        .remove("histogram");
    fs::write(&path, missing.to_string()).unwrap();
    let why = TrialReport::read(&path).unwrap_err().to_string();
    assert!(
        why.contains("latency.post_frame: missing field histogram"),
        "a nullable field must be present: {why}"
    );

    let multi = serde_json::to_value(match several(vec![ran(report(10, 9.0, 1.0))]) {
        TrialReport::Several(m) => *m,
        TrialReport::One(_) => unreachable!(),
    })
    .unwrap();
    let mut broken = multi.clone();
    broken["pipelines"][0]["latency"]["post_frame"]
        .as_object_mut()
        .unwrap()
        .remove("p99_ms");
    fs::write(&path, broken.to_string()).unwrap();
    let why = TrialReport::read(&path).unwrap_err().to_string();
    assert!(
        why.contains("pipelines[0]") && why.contains("p99_ms"),
        "{why}"
    );
    fs::write(&path, multi.to_string()).unwrap();
    assert!(matches!(
        TrialReport::read(&path),
        Ok(TrialReport::Several(_))
    ));
}

#[test]
fn a_sender_that_fell_behind_makes_the_trial_invalid() {
    let on_time = SenderEntry {
        max_lag_ms: 0.4,
        max_stall_ms: 0.3,
        involuntary_switches: 2,
        sent_per_s: Some(99.0),
    };
    let late = SenderEntry {
        max_lag_ms: 7.5,
        max_stall_ms: 7.4,
        involuntary_switches: 9,
        sent_per_s: Some(99.0),
    };
    let failing = Verdict::from_failures(vec![Failure::DroppedFrames(3)]);
    assert_eq!(
        judge_sender(failing.clone(), Some(&on_time), 100.0, 5.0),
        Judgement::Verdict(failing.clone())
    );
    assert_eq!(
        judge_sender(failing.clone(), None, 100.0, 5.0),
        Judgement::Verdict(failing.clone())
    );
    let Judgement::Invalid(why) = judge_sender(failing, Some(&late), 100.0, 5.0) else {
        panic!("a late sender's trial is invalid");
    };
    assert!(why.starts_with("the sender fell 7.500 ms behind"), "{why}");
    // Descheduled longer than the limit, though no packet was late yet: invalid too.
    let descheduled = SenderEntry {
        max_stall_ms: 6.0,
        ..on_time.clone()
    };
    let Judgement::Invalid(why) = judge_sender(Verdict::pass(), Some(&descheduled), 100.0, 5.0)
    else {
        panic!("a descheduled sender's trial is invalid");
    };
    assert!(
        why.starts_with("the sender was kept off the CPU for 6.000 ms"),
        "{why}"
    );
    // A pass is invalid too: the stream it passed on was not the one offered.
    assert!(matches!(
        judge_sender(Verdict::pass(), Some(&late), 100.0, 5.0),
        Judgement::Invalid(_)
    ));
    let nan = SenderEntry {
        max_lag_ms: f64::NAN,
        ..on_time.clone()
    };
    assert!(matches!(
        judge_sender(Verdict::pass(), Some(&nan), 100.0, 5.0),
        Judgement::Invalid(_)
    ));
    // A sender that reached only 80 of 100 frames/s did not offer the rate, and says so: the
    // search retries it, then takes it for the sender's limit here.
    let slow = SenderEntry {
        sent_per_s: Some(80.0),
        ..on_time.clone()
    };
    let Judgement::Invalid(why) = judge_sender(Verdict::pass(), Some(&slow), 100.0, 5.0) else {
        panic!("a sender-limited trial is not judged");
    };
    assert_eq!(
        why,
        "the sender could not offer 100.000 frames/s here (it reached 80.000)"
    );
    let worst = worst_sender(&[on_time, late]).unwrap();
    assert_eq!((worst.max_lag_ms, worst.involuntary_switches), (7.5, 9));
    assert_eq!(worst_sender(&[]), None);
}

#[test]
fn a_slow_stream_is_not_cut_by_its_own_gaps() {
    assert_eq!(frame_timeout_ms(600.0), 20);
    assert_eq!(frame_timeout_ms(50.0), 20);
    assert_eq!(frame_timeout_ms(10.0), 100);
    assert_eq!(frame_timeout_ms(1.7), 589);
    assert_eq!(frame_timeout_ms(0.0), 3_600_000);
}

#[test]
fn the_sender_gets_the_sweeps_frames_tick_and_nice() {
    let mut config = super::super::options::tests::config("g.yaml".into());
    config.sender_tick_us = 100;
    config.sender_nice = -5;
    config.seed = 7;
    config.workload_options = vec![("pfa".into(), "1e-6".into())];
    let stop = Stop::default();
    let shape = SearchShape {
        shape: "8x4".parse().unwrap(),
        frame_period: None,
        frame_bytes: 128,
    };
    let workload = ChildFrames::Workload {
        seed: 7,
        options: vec![("pfa".into(), "1e-6".into())],
    };
    assert_eq!(
        sender_spec(&ctx_of(&config, &stop), 9000, &shape, 250.5, 40),
        SendChild {
            dest: "127.0.0.1:9000".parse().unwrap(),
            graph: Some("g.yaml".into()),
            shape: Some(shape.shape.clone()),
            frames_of: Some(workload.clone()),
            pace: Pace::Rate {
                frames_per_s: 250.5,
                tick: Some(Duration::from_micros(100)),
            },
            frames: 40,
            nice: Some(-5),
            times: None,
            report: None,
        }
    );
    assert_eq!(config.receiver_frames(), workload);
    // A recording's frames: the sender sends the recording alone, the receiver checks them.
    config.recording = Some(super::super::config::RecordingFeed {
        path: "r.cf32".into(),
        check: "golden:g".into(),
    });
    let spec = sender_spec(&ctx_of(&config, &stop), 9000, &shape, 250.5, 40);
    assert_eq!((&spec.graph, &spec.shape), (&None, &None));
    assert_eq!(
        spec.frames_of,
        Some(ChildFrames::Recording {
            path: "r.cf32".into(),
            check: None
        })
    );
    assert_eq!(
        config.receiver_frames(),
        ChildFrames::Recording {
            path: "r.cf32".into(),
            check: Some("golden:g".into())
        }
    );
}

fn ctx_of<'a>(config: &'a BisectConfig, stop: &'a Stop) -> Trials<'a> {
    Trials {
        mps: None,
        exe: Path::new("kplace"),
        config,
        stop,
    }
}

#[test]
fn a_budget_goes_in_whole_microseconds() {
    assert_eq!(
        whole_us(Duration::from_nanos(1_500_700)),
        Duration::from_micros(1500)
    );
    assert_eq!(whole_us(Duration::ZERO), Duration::from_micros(1));
}

use std::path::PathBuf;

use kplace::os::CpuSet;
use kplace::session::several::PipelineMode;
use kplace::workload::kind::Registry;

use super::super::config::{BisectConfig, RecordingFeed, Systems};
use super::super::shapes::tests::{Ticks, graph_file, recording};
use super::{OptionError, sweep_defaults};
use crate::rate::{BudgetRule, Goal, SearchConfig};

/// A sweep as `kplace bisect-rate` asks for one by default, of `graph`.
pub(in crate::bisect) fn config(graph: PathBuf) -> BisectConfig {
    BisectConfig {
        graph,
        systems: Systems::Placements(vec!["p.yaml".into()]),
        shapes: Vec::new(),
        workload: None,
        workload_options: Vec::new(),
        start_rate: None,
        start_rates: Default::default(),
        goals: vec![
            Goal::robust(2.0, SearchConfig::DEFAULT_WIDTH),
            Goal::strict(2.0, SearchConfig::DEFAULT_WIDTH),
        ],
        repeat: 1,
        warmup_s: 0.5,
        latency_budget: BudgetRule::Deadline,
        max_trials: SearchConfig::DEFAULT_MAX_TRIALS,
        out: "out".into(),
        seed: 1,
        recording: None,
        sender_tick_us: 0,
        sender_nice: 0,
        max_sender_lag_ms: 10.0,
        unoffered_retries: SearchConfig::DEFAULT_UNOFFERED_RETRIES,
        require_rate: None,
        sender_cpus: None,
        sut_cpus: None,
        bounds: false,
        pipelines: 1,
        pipeline_mode: PipelineMode::Thread,
        cotenant: None,
        cotenant_intensity: None,
        adapt: false,
        mps: None,
    }
}

/// The message `config` changed by `change` is refused with.
fn refused(change: impl FnOnce(&mut BisectConfig)) -> String {
    let mut config = config("g.yaml".into());
    change(&mut config);
    config.check().unwrap_err().to_string()
}

#[test]
fn the_default_sweep_passes_its_checks() {
    config("g.yaml".into()).check().unwrap();
}

#[test]
fn every_trial_rate_is_one_a_run_takes() {
    use kplace::model::rate::{MAX_FRAME_RATE, MIN_FRAME_RATE};
    let shape = super::super::SearchShape {
        shape: "8x4".parse().unwrap(),
        frame_period: Some(std::time::Duration::from_millis(1)),
        frame_bytes: 128,
    };
    // At the edges of the range, the search neither halves below a frame a day nor doubles
    // past a frame a nanosecond: each trial runs `kplace run --stream-rate R`.
    for (start, min, max) in [
        (
            MIN_FRAME_RATE,
            MIN_FRAME_RATE,
            SearchConfig::DEFAULT_MAX_LOAD,
        ),
        (MAX_FRAME_RATE, MAX_FRAME_RATE / 1024.0, MAX_FRAME_RATE),
        (1000.0, 1000.0 / 1024.0, SearchConfig::DEFAULT_MAX_LOAD),
    ] {
        let mut c = config("g.yaml".into());
        c.start_rate = Some(start);
        c.check().unwrap();
        let search = c.search_config(&shape, None);
        assert_eq!(
            (search.start_load, search.min_load, search.max_load),
            (start, min, max)
        );
        search.validate().unwrap();
    }
    // The workload's own period when no rate is given.
    let search = config("g.yaml".into()).search_config(&shape, None);
    assert_eq!(search.start_load, 1000.0);
}

#[test]
fn each_option_that_cannot_work_is_refused_naming_it() {
    let nowhere: CpuSet = "1000".parse().unwrap();
    assert!(
        refused(|c| c.sut_cpus = Some(nowhere))
            .starts_with("--sut-cpus 1000: CPU list 1000 is outside the CPUs"),
    );
    let feed = |check: &str| {
        Some(RecordingFeed {
            path: "r.sigmf-data".into(),
            check: check.into(),
        })
    };
    assert!(refused(|c| c.recording = feed("nothing")).starts_with("--check: "));
    assert_eq!(
        refused(|c| c.recording = feed("none")),
        "--check none gates nothing: a trial passes only on checked frames (reference:PLACEMENT or golden:DIR)"
    );
    assert_eq!(
        refused(|c| {
            c.systems = Systems::Command {
                command: "true".into(),
                name: "sut".into(),
            };
            c.pipelines = 2;
        }),
        "--pipelines measures kplace's own pipelines; it cannot be combined with --sut-cmd"
    );
    assert_eq!(
        refused(|c| c.max_sender_lag_ms = 0.0),
        "--max-sender-lag-ms must be a positive number of ms, not 0"
    );
    assert_eq!(
        refused(|c| c.goals = vec![Goal::robust(4000.0, 0.02)]),
        "--window-s must be 0 to 3600 seconds, not 4000"
    );
    assert_eq!(
        refused(|c| c.warmup_s = f64::NAN),
        "--warmup-s must be 0 to 3600 seconds, not NaN"
    );
    for initial in [0.0, 5.0] {
        assert_eq!(
            refused(|c| c.goals.iter_mut().for_each(|g| g.initial_trial_s = initial)),
            format!(
                "--initial-window-s must be positive and at most --window-s (2), not {initial}"
            )
        );
    }
    for (rate, said) in [(-1.0, "-1.0"), (1e-300, "1e-300"), (1e30, "1e30")] {
        assert!(refused(|c| c.start_rate = Some(rate)).starts_with(&format!(
            "--start-rate {said} is out of range: a frame rate must be from"
        )),);
    }
    assert!(
        refused(|c| c.require_rate = Some(0.0))
            .starts_with("--require-rate 0.0 is out of range: a frame rate must be from")
    );
    assert!(
        refused(|c| c.goals[1].name = "robust".into()).starts_with("--goals/--width/--window-s: "),
    );
    assert!(refused(|c| c.goals.clear()).starts_with("--goals/--width/--window-s: "));
}

#[test]
fn mps_threads_need_mps_on() {
    assert_eq!(BisectConfig::mps_setting(false, None).unwrap(), None);
    assert_eq!(BisectConfig::mps_setting(true, None).unwrap(), Some(None));
    assert_eq!(
        BisectConfig::mps_setting(true, Some(50.0)).unwrap(),
        Some(Some(50.0))
    );
    let error = BisectConfig::mps_setting(false, Some(50.0)).unwrap_err();
    assert!(matches!(error, OptionError::MpsThreads));
    assert_eq!(error.to_string(), "--mps-threads needs --mps on");
}

#[test]
fn a_workload_sweep_takes_the_kinds_sweep_defaults_and_its_checked_options() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::new().register(Ticks);
    let mut sweep = config(graph_file(dir.path(), Some("ticks")));
    sweep.resolve_workload(&registry, &[]).unwrap();
    assert_eq!(sweep.workload.as_ref().map(|k| k.name()), Some("ticks"));
    assert_eq!(sweep.workload_options, [("frames".into(), "8".into())]);
    assert_eq!(sweep.shapes.len(), 1);
    let mut sweep = config(sweep.graph);
    sweep.workload_options = vec![("frames".into(), "2".into())];
    sweep.resolve_workload(&registry, &[]).unwrap();
    assert_eq!(sweep.workload_options, [("frames".into(), "2".into())]);
    sweep.workload_options = vec![("speed".into(), "2".into())];
    let error = sweep.resolve_workload(&registry, &[]).unwrap_err();
    assert!(matches!(error, OptionError::Workload(_)), "{error:?}");
    assert!(
        error
            .to_string()
            .starts_with("workload option speed is not an option of workload ticks")
    );
}

#[test]
fn a_recording_sweep_has_no_workload_and_refuses_its_options() {
    let dir = tempfile::tempdir().unwrap();
    let graph = graph_file(dir.path(), None);
    let mut sweep = config(graph.clone());
    sweep.recording = Some(RecordingFeed {
        path: recording(dir.path(), &graph, Some(64e3)),
        check: "reference:p.yaml".into(),
    });
    sweep.check().unwrap();
    sweep.resolve_workload(&Registry::new(), &[]).unwrap();
    assert!(sweep.workload.is_none());
    assert_eq!(sweep.shapes[0].to_string(), "16x4");
    sweep.workload_options = vec![("frames".into(), "2".into())];
    assert_eq!(
        sweep
            .resolve_workload(&Registry::new(), &[])
            .unwrap_err()
            .to_string(),
        "--opt sets an option of the graph's workload; a sweep on a recording has none"
    );
}

#[test]
fn sweep_defaults_add_only_what_is_not_given() {
    let mut options = vec![("other".into(), "1".into())];
    sweep_defaults(&Ticks, &mut options);
    sweep_defaults(&Ticks, &mut options);
    assert_eq!(
        options,
        [("other".into(), "1".into()), ("frames".into(), "8".into())]
    );
}

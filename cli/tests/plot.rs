//! `kplace plot` as a user runs it: results files written by the test (with a histogram as a
//! run report carries it), five SVGs out, and a clear error naming a bad file.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use kplace::report::metrics::Latency;
use kplace_lab::rate::sweep::{
    SCHEMA, SearchEntry, SweepFile, TrialEntry, TrialLatency, TrialStatus,
};
use kplace_lab::rate::{Class, Ending, Goal, GoalResult, LatencyBudget, LoadEntry, Stage};

fn kplace(args: &[&Path]) -> Output {
    kplace_testkit::output(
        Command::new(env!("CARGO_BIN_EXE_kplace"))
            .arg("plot")
            .args(args),
    )
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn trial(rate: f64, status: TrialStatus, p99_ms: f64, histogram: Option<String>) -> TrialEntry {
    TrialEntry {
        rate,
        phase: "start".into(),
        goal: "robust".into(),
        stage: Stage::Final,
        duration_s: 2.0,
        loss_ratio: Some(if status == TrialStatus::Failed {
            1.0
        } else {
            0.0
        }),
        status,
        failures: Vec::new(),
        invalid: None,
        budget_ms: 6.4,
        measurement: None,
        latency: Some(TrialLatency {
            p50_ms: p99_ms / 2.0,
            p99_ms,
            p999_ms: p99_ms,
            histogram,
        }),
        stages: Vec::new(),
        cores_used: None,
        sender: None,
        report: None,
    }
}

/// One search of `system` at 1024x128, its start-rate trial carrying a run's histogram.
fn results(system: &str) -> SweepFile {
    let mut latency = Latency::new();
    for us in [900u64, 1_100, 1_300, 2_000] {
        latency.record(us * 1_000);
    }
    let histogram = latency.summary().histogram;
    assert!(histogram.is_some());
    let search = SearchEntry {
        system: system.into(),
        placement: None,
        sut_cmd: None,
        shape: "1024x128".parse().unwrap(),
        repeat: 0,
        skipped: None,
        unit: "CPI/s".into(),
        real_time_rate: 156.25,
        latency_budget: LatencyBudget::Deadline {
            frame_period: Duration::from_micros(6_400),
        },
        start_rate: 100.0,
        pipelines: 1,
        pipeline_mode: "thread".into(),
        sustained_rate: Some(400.0),
        aggregate_sustained_rate: Some(400.0),
        outcome: "400.0 CPI/s, fails at 800.0, width 50.0%".into(),
        outcome_kind: "regular".into(),
        goals: vec![GoalResult {
            goal: Goal::robust(2.0, 0.02),
            lower: Some(400.0),
            upper: Some(800.0),
            conditional_throughput: Some(400.0),
            trials_at_lower: 1,
            seconds_at_lower: 2.0,
            ending: Ending::Regular,
        }],
        loads: [
            (100.0, Class::Lower),
            (400.0, Class::Lower),
            (800.0, Class::Upper),
        ]
        .into_iter()
        .map(|(load, class)| LoadEntry {
            load,
            trials: 1,
            seconds: 2.0,
            unoffered: 0,
            classes: vec![class],
        })
        .collect(),
        trial_seconds: 6.0,
        wall_seconds: 12.0,
        sender_ceiling: None,
        probes: Vec::new(),
        bounds: None,
        cotenant: None,
        trials: vec![
            trial(100.0, TrialStatus::Passed, 2.0, histogram),
            trial(400.0, TrialStatus::Passed, 4.0, None),
            trial(800.0, TrialStatus::Failed, 90.0, None),
        ],
    };
    SweepFile {
        schema: SCHEMA.into(),
        machine: serde_json::json!({}),
        settings: serde_json::json!({}),
        searches: vec![search],
        spreads: Vec::new(),
        comparisons: Vec::new(),
    }
}

fn write(path: &Path, file: &SweepFile) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, serde_json::to_string_pretty(file).unwrap()).unwrap();
}

#[test]
fn plots_merge_files_into_the_first_files_directory() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (
        dir.path().join("a/bisect-rate.json"),
        dir.path().join("b/bisect-rate.json"),
    );
    write(&a, &results("all-cpu"));
    write(&b, &results("numpy"));
    let out = kplace(&[&a, &b]);
    assert!(out.status.success(), "{}", text(&out));
    let printed: Vec<&str> = std::str::from_utf8(&out.stdout).unwrap().lines().collect();
    let expected: Vec<String> = [
        "latency.svg",
        "sustained.svg",
        "cdf.svg",
        "stages.svg",
        "loads.svg",
    ]
    .iter()
    .map(|f| dir.path().join("a").join(f).display().to_string())
    .collect();
    assert_eq!(printed, expected);
    for path in &expected {
        let svg = std::fs::read_to_string(path).unwrap();
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let words: Vec<&str> = doc
            .descendants()
            .filter(|n| n.has_tag_name("text"))
            .filter_map(|n| n.text())
            .collect();
        let words = words.join(" ");
        for system in ["all-cpu", "numpy"] {
            assert!(words.contains(system), "{path} lacks {system}: {words}");
        }
    }
    let cdf = std::fs::read_to_string(&expected[2]).unwrap();
    assert!(
        cdf.contains("at 100 CPI/s") && !cdf.contains("left out"),
        "{cdf}"
    );

    let elsewhere = dir.path().join("plots");
    let out = kplace_testkit::output(
        Command::new(env!("CARGO_BIN_EXE_kplace"))
            .arg("plot")
            .arg(&a)
            .arg("--out")
            .arg(&elsewhere),
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(elsewhere.join("stages.svg").is_file());
}

#[test]
fn a_bad_file_is_refused_by_name_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.json");
    write(&good, &results("all-cpu"));
    let bad = dir.path().join("bad.json");
    std::fs::write(
        &bad,
        "{\"schema\": \"kplace-bisect-rate/2\",\n \"searches\": [}",
    )
    .unwrap();
    let out = kplace(&[&good, &bad]);
    assert!(!out.status.success());
    let said = text(&out);
    assert!(
        said.contains("bad.json") && said.contains("line 2"),
        "{said}"
    );
    assert!(
        !dir.path().join("latency.svg").exists(),
        "nothing is written on an error"
    );
    // An endless input is read up to the bound, never whole.
    let out = kplace(&[Path::new("/dev/zero")]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("/dev/zero holds more than 256 MiB"),
        "{}",
        text(&out)
    );
}

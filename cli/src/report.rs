//! A typed run report for the readers' tests: what `kplace run --report FILE` writes is built
//! by [`kplace::session::report`].

use kplace::report::run::{Latencies, LatencyEntry, RUN_SCHEMA, RunReport, Verification};
use kplace::report::telemetry::Telemetry;

/// A report of a replay run with `frames` frames at `rate` CPI/s and a post-CPI p99 of
/// `p99_ms`, that verified: for the readers' tests.
pub(crate) fn fixture(frames: u64, rate: f64, p99_ms: f64) -> RunReport {
    let latency = LatencyEntry {
        count: frames,
        p50_ms: p99_ms / 2.0,
        p99_ms,
        p999_ms: p99_ms * 2.0,
        max_ms: p99_ms * 2.0,
        histogram: None,
    };
    RunReport {
        schema: RUN_SCHEMA.to_string(),
        graph: "radar".into(),
        placement: "all-cpu".into(),
        cpi: "1024x128".into(),
        source: "replay".into(),
        frames_expected: frames,
        frames,
        measured_frames: frames,
        partial_frames: 0,
        dropped_frames: 0,
        wall_s: frames as f64 / rate,
        throughput_cpi_per_s: rate,
        input_gbit_per_s: 0.0,
        cores_used: 1.0,
        cpus_allowed: Some("0".into()),
        slot_waits: 0,
        stages: Vec::new(),
        latency: Latencies {
            post_cpi: latency.clone(),
            end_to_end: latency,
            post_cpi_trend_ms_per_s: 0.0,
        },
        ingest: None,
        clusters_per_frame: 1.0,
        verification: Verification {
            passed: true,
            frames_reported: frames,
            frames_passed: frames,
            frames_failed: 0,
            frames_missing: 0,
            false_alarms_per_frame: 0.0,
            false_alarm_bound: 1.0,
            reasons: Vec::new(),
        },
        interrupted: None,
        gpu_telemetry: Telemetry::unavailable("no GPU stage"),
        mps: None,
    }
}

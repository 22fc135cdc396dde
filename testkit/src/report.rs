//! Report fixtures: well-formed run reports for the tests of the report's readers (the
//! sessions' aggregate, the rate search's trials). Built from the report's public fields
//! only, so a field added to the report fails to compile here, not silently in a test.

use kplace::report::run::{
    Details, Latencies, LatencyEntry, OverheadEntry, RUN_SCHEMA, RunReport, Verification,
};
use kplace::report::telemetry::Telemetry;

/// A report of a replay run of `frames` frames at `rate` frames/s with a post-frame p99 of
/// `p99_ms` (p50 half of it, p99.9 and max twice), that verified, on the CPU: a well-formed
/// starting point for the tests of the report's readers.
pub fn run_report(frames: u64, rate: f64, p99_ms: f64) -> RunReport {
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
        frame_shape: "1024x128".parse().expect("a shape"),
        source: "replay".into(),
        frames_expected: frames,
        frames,
        measured_frames: frames,
        partial_frames: 0,
        dropped_frames: 0,
        wall_s: frames as f64 / rate,
        frames_per_s: rate,
        input_gbit_per_s: 0.0,
        cores_used: 1.0,
        cpus_allowed: Some("0".into()),
        slot_waits: 0,
        stages: Vec::new(),
        overhead: OverheadEntry::default(),
        latency: Latencies {
            post_frame: latency.clone(),
            end_to_end: latency,
            post_frame_trend_ms_per_s: 0.0,
        },
        ingest: None,
        verification: Verification {
            passed: true,
            against: "the scene's truth".into(),
            frames_reported: frames,
            frames_passed: frames,
            frames_failed: 0,
            frames_missing: 0,
            lost_frames: Vec::new(),
            frames_rejudged: 0,
            mismatches: Vec::new(),
            reasons: Vec::new(),
        },
        details: Details::new(),
        interrupted: None,
        output_errors: Vec::new(),
        changes: Vec::new(),
        adaptation: None,
        metrics_endpoint: None,
        gpu_telemetry: Telemetry::unavailable("no GPU stage"),
        mps: None,
    }
}

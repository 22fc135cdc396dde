//! A run's progress: what the executor says every `RunOptions::progress_every` ([`Progress`]),
//! and the JSON lines `kplace run --report-every DURATION` writes of it, one line per interval
//! and a last one at the end (schema [`PROGRESS_SCHEMA`]).
//!
//! Each line holds the counts so far and those of its interval, so a reader can sum the
//! intervals or read the totals: over a run's lines, `interval_frames` adds up to the run
//! report's `frames`, `interval_partial_frames` to its `partial_frames` and
//! `interval_dropped_frames` to its `dropped_frames`, and the last line's totals are the run
//! report's own.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use kplace_core::measure::progress::{GpuNow, LATENCY_BOUNDS_S, LatencyBuckets, Progress};

/// The schema name and version of a progress line.
pub const PROGRESS_SCHEMA: &str = "kplace-progress/3";

/// One progress line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProgressLine {
    /// Always [`PROGRESS_SCHEMA`].
    pub schema: String,
    /// The pipeline, with several; null for a run of one.
    pub pipeline: Option<usize>,
    /// Seconds since the run started.
    pub elapsed_s: f64,
    /// Seconds this line covers: since the previous line, or the start.
    pub interval_s: f64,
    /// Frames processed so far (warm-up frames included).
    pub frames: u64,
    /// Frames processed in the interval.
    pub interval_frames: u64,
    /// Frames processed per second over the interval.
    pub frames_per_s: f64,
    /// Frames that ended with packets missing, so far.
    pub partial_frames: u64,
    /// Of those, in the interval.
    pub interval_partial_frames: u64,
    /// Frames dropped for want of a free slot, so far.
    pub dropped_frames: u64,
    /// Of those, in the interval.
    pub interval_dropped_frames: u64,
    /// Post-frame latency of the interval's frames: median, ms; null when none was processed.
    pub post_frame_p50_ms: Option<f64>,
    /// Its 99th percentile, ms; null when none was processed.
    pub post_frame_p99_ms: Option<f64>,
    /// Its largest, ms; null when none was processed.
    pub post_frame_max_ms: Option<f64>,
    /// Cores the process used over the interval.
    pub cores_used: f64,
    /// Times the source waited for a free slot, so far.
    pub slot_waits: u64,
    /// Each GPU the run uses as NVML last read it (utilisation, memory in use); empty for a
    /// run without a GPU stage or without NVML.
    pub gpus: Vec<GpuNow>,
    /// In a run that adapts (`kplace run --adapt`): the placement new frames begin on; null
    /// otherwise.
    pub placement: Option<String>,
    /// In a run that adapts: switches between placements so far (0 otherwise).
    pub switches: u64,
    /// Whether this is the run's last line.
    pub last: bool,
}

impl super::Versioned for ProgressLine {
    const SCHEMA: &'static str = PROGRESS_SCHEMA;
}

impl ProgressLine {
    /// The line of `progress`, for pipeline `pipeline` of several (`None`: the only one).
    pub fn new(progress: &Progress, pipeline: Option<usize>) -> ProgressLine {
        let latency =
            |d: Duration| (progress.post_frame.count > 0).then_some(d.as_secs_f64() * 1e3);
        ProgressLine {
            schema: PROGRESS_SCHEMA.to_string(),
            pipeline,
            elapsed_s: progress.elapsed.as_secs_f64(),
            interval_s: progress.interval.as_secs_f64(),
            frames: progress.frames,
            interval_frames: progress.interval_frames,
            frames_per_s: progress.rate(),
            partial_frames: progress.partial_frames,
            interval_partial_frames: progress.interval_partial_frames,
            dropped_frames: progress.dropped_frames,
            interval_dropped_frames: progress.interval_dropped_frames,
            post_frame_p50_ms: latency(progress.post_frame.p50),
            post_frame_p99_ms: latency(progress.post_frame.p99),
            post_frame_max_ms: latency(progress.post_frame.max),
            cores_used: progress.cores_used(),
            slot_waits: progress.slot_waits,
            gpus: progress.gpus.clone(),
            placement: progress.placement.clone(),
            switches: progress.switches,
            last: progress.last,
        }
    }
}

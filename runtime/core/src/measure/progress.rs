//! A run's progress as the executor counts it: what it says every
//! `RunOptions::progress_every` ([`Progress`]), with the GPUs as a session's telemetry last read
//! them ([`GpuNow`]). The report crate writes it as JSON lines and as OpenMetrics.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::metrics::{LatencySummary, StageTotals};

/// What a run has done: the counts so far, and those of the interval since the previous
/// report. Over a run's reports the interval counts add up to the run's (the last report's
/// totals are the run's own).
#[derive(Clone, Debug, PartialEq)]
pub struct Progress {
    /// Since the run started.
    pub elapsed: Duration,
    /// The interval this report covers: since the previous report, or the start.
    pub interval: Duration,
    /// Frames processed by every stage so far (warm-up frames included).
    pub frames: u64,
    /// Of those, frames processed in the interval.
    pub interval_frames: u64,
    /// Frames that ended with packets missing, so far.
    pub partial_frames: u64,
    /// Of those, in the interval.
    pub interval_partial_frames: u64,
    /// Frames the source dropped for want of a free slot, so far.
    pub dropped_frames: u64,
    /// Of those, in the interval.
    pub interval_dropped_frames: u64,
    /// Post-frame latency of the frames processed in the interval (quantiles only).
    pub post_frame: LatencySummary,
    /// The process's CPU time over the interval.
    pub cpu: Duration,
    /// Times the source waited for a free slot, so far.
    pub slot_waits: u64,
    /// The run's GPUs as the telemetry sampler last read them; empty for a plan without a
    /// GPU stage, without NVML, and from the executor alone (a session fills it in).
    pub gpus: Vec<GpuNow>,
    /// Each stage's launches and the time they took, so far, in graph order.
    pub stages: Vec<StageTotals>,
    /// Post-frame latency of every frame processed so far, warm-up included, in buckets.
    pub post_frame_buckets: LatencyBuckets,
    /// In a run that adapts: the placement new frames begin on.
    pub placement: Option<String>,
    /// In a run that adapts: switches between placements so far.
    pub switches: u64,
    /// Whether this is the run's last report.
    pub last: bool,
}

/// The upper bounds of [`LatencyBuckets`], seconds: 100 us to 10 s, 1-2.5-5 per decade.
pub const LATENCY_BOUNDS_S: [f64; 16] = [
    1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Latencies counted in fixed buckets, as a monitoring system's histogram wants them: no
/// allocation, a few words of memory whatever the run's length.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LatencyBuckets {
    /// Per bound of [`LATENCY_BOUNDS_S`]: latencies at most that bound and above the one
    /// before (not cumulative).
    pub counts: [u64; LATENCY_BOUNDS_S.len()],
    /// Every latency counted, those above the last bound included.
    pub count: u64,
    /// Their sum.
    pub sum: Duration,
}

impl LatencyBuckets {
    /// Counts one latency of `ns` nanoseconds.
    pub fn record(&mut self, ns: u64) {
        let s = ns as f64 * 1e-9;
        if let Some(i) = LATENCY_BOUNDS_S.iter().position(|&b| s <= b) {
            self.counts[i] += 1;
        }
        self.count += 1;
        self.sum += Duration::from_nanos(ns);
    }

    /// The cumulative counts at each bound, as OpenMetrics' `le` buckets are.
    pub fn cumulative(&self) -> [u64; LATENCY_BOUNDS_S.len()] {
        let mut total = 0;
        self.counts.map(|c| {
            total += c;
            total
        })
    }
}

impl Progress {
    /// Frames processed per second over the interval.
    pub fn rate(&self) -> f64 {
        self.interval_frames as f64 / self.interval.as_secs_f64().max(f64::MIN_POSITIVE)
    }

    /// Cores the process used over the interval.
    pub fn cores_used(&self) -> f64 {
        self.cpu.as_secs_f64() / self.interval.as_secs_f64().max(f64::MIN_POSITIVE)
    }
}

/// One GPU as the sampler last read it: what a progress report says of the GPUs while a run
/// goes on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct GpuNow {
    /// The CUDA ordinal.
    pub ordinal: u32,
    /// GPU utilisation, percent of the last sample period; null without a reading.
    pub gpu_util_pct: Option<u32>,
    /// Device memory in use, bytes; null without a reading.
    pub memory_used_bytes: Option<u64>,
}

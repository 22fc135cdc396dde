//! What a run measures: time per stage, latency per frame, throughput and CPU use.
//!
//! Workers record stage times into lock-free counters; the collector records frame latencies
//! into histograms it owns. Nothing here allocates while a run is recording. [`RunMetrics`] is
//! the summary a run returns and prints.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hdrhistogram::Histogram;

/// One stage's launches and the time they took, so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StageTotals {
    /// Launches ended.
    pub launches: u64,
    /// Their time, summed (for a GPU stage, the time to enqueue).
    pub busy: Duration,
}

/// Per-stage launch counters shared by the workers.
#[derive(Debug, Default)]
pub struct StageCounters {
    launches: AtomicU64,
    total_ns: AtomicU64,
    max_ns: AtomicU64,
    /// Frames whose GPU time was measured (profiling only), and that time.
    gpu_frames: AtomicU64,
    gpu_ns: AtomicU64,
}

impl StageCounters {
    /// Records one launch that took `ns`.
    pub fn record(&self, ns: u64) {
        self.launches.fetch_add(1, Ordering::Relaxed);
        self.total_ns.fetch_add(ns, Ordering::Relaxed);
        self.max_ns.fetch_max(ns, Ordering::Relaxed);
    }

    /// Records one frame's GPU time of the stage, measured with timing events.
    pub fn record_gpu(&self, ns: u64) {
        self.gpu_frames.fetch_add(1, Ordering::Relaxed);
        self.gpu_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// Launches ended and their time, so far.
    pub fn totals(&self) -> StageTotals {
        StageTotals {
            launches: self.launches.load(Ordering::Relaxed),
            busy: Duration::from_nanos(self.total_ns.load(Ordering::Relaxed)),
        }
    }

    /// A snapshot for reports.
    pub fn snapshot(&self, name: &str, device: String, frames: u64) -> StageReport {
        let launches = self.launches.load(Ordering::Relaxed);
        let total_ns = self.total_ns.load(Ordering::Relaxed);
        let gpu_frames = self.gpu_frames.load(Ordering::Relaxed);
        StageReport {
            name: name.to_string(),
            device,
            launches,
            total: Duration::from_nanos(total_ns),
            per_frame: Duration::from_nanos(total_ns.checked_div(frames).unwrap_or(0)),
            max_launch: Duration::from_nanos(self.max_ns.load(Ordering::Relaxed)),
            gpu_per_frame: (gpu_frames > 0)
                .then(|| Duration::from_nanos(self.gpu_ns.load(Ordering::Relaxed) / gpu_frames)),
            carry: None,
        }
    }
}

/// A latency histogram in nanoseconds, from 1 us to 1 hour at 3 significant digits.
#[derive(Debug, Clone)]
pub struct Latency {
    histogram: Histogram<u64>,
}

impl Default for Latency {
    fn default() -> Self {
        Self::new()
    }
}

impl Latency {
    /// An empty histogram; all its memory is allocated here.
    pub fn new() -> Self {
        // The bounds are constants that hdrhistogram accepts, so this cannot fail.
        let histogram = Histogram::new_with_bounds(1_000, 3_600_000_000_000, 3)
            .unwrap_or_else(|e| unreachable!("constant histogram bounds are valid: {e}"));
        Self { histogram }
    }

    /// Records one latency, clamped into the histogram's range.
    pub fn record(&mut self, ns: u64) {
        self.histogram.saturating_record(ns.max(1_000));
    }

    /// The summary for reports.
    pub fn summary(&self) -> LatencySummary {
        LatencySummary {
            histogram: self.histogram_base64(),
            ..self.quantiles()
        }
    }

    /// The quantiles alone (`histogram: None`): cheap enough for a progress report.
    pub fn quantiles(&self) -> LatencySummary {
        let h = &self.histogram;
        let q = |p: f64| {
            Duration::from_nanos(if h.is_empty() {
                0
            } else {
                h.value_at_quantile(p)
            })
        };
        LatencySummary {
            count: h.len(),
            p50: q(0.50),
            p99: q(0.99),
            p999: q(0.999),
            max: Duration::from_nanos(if h.is_empty() { 0 } else { h.max() }),
            histogram: None,
        }
    }

    /// Forgets every latency recorded, keeping the memory.
    pub fn reset(&mut self) {
        self.histogram.reset();
    }

    /// Every recorded latency as a base64 HdrHistogram V2 (deflate) record, the form reports
    /// carry and readers decode with `hdrhistogram::serialization::Deserializer`; `None` when
    /// the serializer fails (it writes into memory, so only on an internal error).
    pub fn histogram_base64(&self) -> Option<String> {
        use base64::Engine as _;
        use hdrhistogram::serialization::{Serializer as _, V2DeflateSerializer};
        let mut bytes = Vec::new();
        V2DeflateSerializer::new()
            .serialize(&self.histogram, &mut bytes)
            .ok()?;
        Some(base64::engine::general_purpose::STANDARD.encode(bytes))
    }
}

/// The fewest measured frames whose post-frame latency trend a run's summary prints: below
/// it, one late frame among a handful sets the slope's sign and size (a 4-frame run's read
/// -3 s per s). 30 is also the fewest frames a `bisect-rate` trial window measures, the trend
/// gate's own minimum. The report's JSON carries the slope whatever the count.
pub const MIN_TREND_FRAMES: u64 = 30;

/// The slope of latency against time over a run, by online least squares: whether frames
/// wait longer and longer (a pipeline falling behind) or not. Allocation free.
#[derive(Debug, Clone, Copy, Default)]
pub struct Trend {
    n: f64,
    sum_t: f64,
    sum_l: f64,
    sum_tt: f64,
    sum_tl: f64,
}

impl Trend {
    /// Records a latency of `latency_s` seconds for a frame completed at `at_s` seconds.
    pub fn record(&mut self, at_s: f64, latency_s: f64) {
        self.n += 1.0;
        self.sum_t += at_s;
        self.sum_l += latency_s;
        self.sum_tt += at_s * at_s;
        self.sum_tl += at_s * latency_s;
    }

    /// Latency growth in seconds per second of run; 0 with fewer than two distinct times.
    pub fn slope(&self) -> f64 {
        let denominator = self.n * self.sum_tt - self.sum_t * self.sum_t;
        if self.n < 2.0 || denominator.abs() < f64::EPSILON {
            return 0.0;
        }
        (self.n * self.sum_tl - self.sum_t * self.sum_l) / denominator
    }
}

/// Quantiles of a latency histogram, and the histogram itself.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LatencySummary {
    /// Frames recorded.
    pub count: u64,
    /// Median.
    pub p50: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// 99.9th percentile.
    pub p999: Duration,
    /// Largest.
    pub max: Duration,
    /// The whole histogram (nanoseconds) as [`Latency::histogram_base64`] writes it.
    pub histogram: Option<String>,
}

/// What happened to a stage's carry over a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CarryCounts {
    /// Launches admitted.
    pub launches: u64,
    /// Frames lost between launches (by the frames' numbers).
    pub frames_missing: u64,
    /// Times the carry was zeroed after a loss (the kernel resets on a gap).
    pub resets: u64,
    /// Times the frame numbers went back, and the carry was zeroed: the stream restarted.
    pub restarts: u64,
    /// Times the carry moved to another placement with the stream (a run that switches).
    pub moves: u64,
}

/// Parameters changed while a run went on, and what became of the change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamChange {
    /// The stage.
    pub stage: String,
    /// The new values, by name.
    pub params: Vec<(String, String)>,
    /// Where the change came from (`control file c.txt, line 2`).
    pub origin: String,
    /// The first frame (by the order frames began) it applied to; `None` when refused, or
    /// when no frame began after it.
    pub from_sequence: Option<u64>,
    /// Why it was refused: the kernel refused the values, or they need more memory than the
    /// stage was planned with.
    pub refused: Option<String>,
}

/// One stage's share of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct StageReport {
    /// Stage name.
    pub name: String,
    /// Device it ran on.
    pub device: String,
    /// Launches run.
    pub launches: u64,
    /// Time in launches, summed over threads.
    pub total: Duration,
    /// Time in launches per frame: for a GPU stage, the host's time to enqueue.
    pub per_frame: Duration,
    /// Slowest launch.
    pub max_launch: Duration,
    /// A GPU stage's time on its stream per frame (launches with their uploads, and
    /// downloads), when the run profiled it; `None` otherwise.
    pub gpu_per_frame: Option<Duration>,
    /// What became of a stateful stage's carry; `None` for a stateless stage.
    pub carry: Option<CarryCounts>,
}

/// The summary of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunMetrics {
    /// The run's timeline, when it was asked for (`RunOptions::trace`).
    pub trace: Option<super::trace::Trace>,
    /// Frames completed and handed to the sink.
    pub frames: u64,
    /// Of those, frames after the warm-up: the ones the rate, latency and CPU figures cover.
    pub measured_frames: u64,
    /// The measured window: from the first frame's first packet (or, after a warm-up, the
    /// last warm-up frame's delivery) to the last frame's delivery.
    pub wall: Duration,
    /// Process CPU time (user + system) over the measured window.
    pub cpu: Duration,
    /// Per stage, in graph order.
    pub stages: Vec<StageReport>,
    /// Completion minus the frame's last packet.
    pub post_frame: LatencySummary,
    /// Completion minus the frame's first packet.
    pub end_to_end: LatencySummary,
    /// Growth of post-frame latency over the run, in seconds per second (0: steady).
    pub post_frame_trend: f64,
    /// Times the source waited for a free slot (the pipeline was the bottleneck).
    pub slot_waits: u64,
    /// Frames that ended with packets missing and were not processed.
    pub partial_frames: u64,
    /// Frames an open-loop source dropped whole because no slot was free.
    pub dropped_frames: u64,
    /// Where the runtime's threads spent their time besides the kernels, over the whole run.
    pub overhead: super::overhead::Overhead,
    /// Parameter changes asked for while the run went on, in the order asked.
    pub changes: Vec<ParamChange>,
    /// In a run that adapts: its placements, what each ran, and every switch.
    pub adaptation: Option<crate::adapt::Adaptation>,
}

impl RunMetrics {
    /// Measured frames per second over the measured window.
    pub fn frames_per_second(&self) -> f64 {
        let secs = self.wall.as_secs_f64();
        if secs > 0.0 {
            self.measured_frames as f64 / secs
        } else {
            0.0
        }
    }

    /// Cores kept busy on average: CPU time over wall time.
    pub fn cores_used(&self) -> f64 {
        let secs = self.wall.as_secs_f64();
        if secs > 0.0 {
            self.cpu.as_secs_f64() / secs
        } else {
            0.0
        }
    }
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

impl fmt::Display for RunMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "frames {}  partial {}  dropped {}  wall {:.3} s  throughput {:.1} frames/s  cores used {:.2}  slot waits {}",
            self.frames,
            self.partial_frames,
            self.dropped_frames,
            self.wall.as_secs_f64(),
            self.frames_per_second(),
            self.cores_used(),
            self.slot_waits
        )?;
        writeln!(
            f,
            "{:<14} {:<6} {:>9} {:>12} {:>12}",
            "stage", "device", "launches", "per frame", "max launch"
        )?;
        for s in &self.stages {
            write!(
                f,
                "{:<14} {:<6} {:>9} {:>12} {:>12}",
                s.name,
                s.device,
                s.launches,
                ms(s.per_frame),
                ms(s.max_launch)
            )?;
            match s.gpu_per_frame {
                // A GPU stage's launch time is the host's enqueueing; the GPU's is profiled.
                Some(gpu) => writeln!(f, "   GPU {} per frame", ms(gpu))?,
                None => writeln!(f)?,
            }
        }
        for c in &self.changes {
            let values: Vec<String> = c.params.iter().map(|(n, v)| format!("{n}={v}")).collect();
            match (&c.refused, c.from_sequence) {
                (Some(why), _) => writeln!(f, "{}: refused: {why}", c.origin)?,
                (None, Some(from)) => writeln!(
                    f,
                    "{}: stage {} took {} from frame {from} on",
                    c.origin,
                    c.stage,
                    values.join(", ")
                )?,
                (None, None) => writeln!(
                    f,
                    "{}: stage {} would take {}, but no frame began after it",
                    c.origin,
                    c.stage,
                    values.join(", ")
                )?,
            }
        }
        for s in &self.stages {
            if let Some(c) = &s.carry {
                write!(
                    f,
                    "{}: stateful, {} frames lost between its launches, {} resets of its carry, {} stream restarts",
                    s.name, c.frames_missing, c.resets, c.restarts
                )?;
                match c.moves {
                    0 => {}
                    1 => write!(f, ", its carry moved to another placement once")?,
                    n => write!(f, ", its carry moved to another placement {n} times")?,
                }
                writeln!(f)?;
            }
        }
        for (name, l) in [
            ("post-frame latency", &self.post_frame),
            ("end-to-end latency", &self.end_to_end),
        ] {
            writeln!(
                f,
                "{name:<19} p50 {}  p99 {}  p99.9 {}  max {}",
                ms(l.p50),
                ms(l.p99),
                ms(l.p999),
                ms(l.max)
            )?;
        }
        // A slope through a few points is their jitter, not a trend: said only from
        // MIN_TREND_FRAMES measured frames on.
        if self.post_frame.count >= MIN_TREND_FRAMES {
            writeln!(
                f,
                "post-frame latency trend {:+.3} ms per s of run",
                self.post_frame_trend * 1e3
            )?;
        }
        writeln!(f, "{}", self.overhead)
    }
}

/// Process CPU time (user + system) so far.
pub fn process_cpu_time() -> Duration {
    use nix::sys::resource::{UsageWho, getrusage};
    use nix::sys::time::TimeValLike;
    let Ok(usage) = getrusage(UsageWho::RUSAGE_SELF) else {
        return Duration::ZERO;
    };
    let us = usage.user_time().num_microseconds() + usage.system_time().num_microseconds();
    Duration::from_micros(u64::try_from(us).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_quantiles_follow_recorded_values() {
        let mut l = Latency::new();
        for us in 1..=1000u64 {
            l.record(us * 1_000);
        }
        let s = l.summary();
        assert_eq!(s.count, 1000);
        assert!((s.p50.as_micros() as i64 - 500).abs() <= 1, "{:?}", s.p50);
        assert!((s.p99.as_micros() as i64 - 990).abs() <= 1, "{:?}", s.p99);
        assert!((s.max.as_micros() as i64 - 1000).abs() <= 1);
    }

    #[test]
    fn the_summary_carries_the_histogram_it_was_read_from() {
        use base64::Engine as _;
        let mut l = Latency::new();
        for us in [150u64, 2_000, 2_000, 90_000] {
            l.record(us * 1_000);
        }
        let text = l.summary().histogram.expect("a histogram");
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text)
            .unwrap();
        let h: Histogram<u64> = hdrhistogram::serialization::Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .unwrap();
        assert_eq!(h.len(), 4);
        assert_eq!(h.count_at(2_000_000), 2);
        assert!(h.equivalent(h.max(), 90_000_000), "{}", h.max());
        assert!(h.equivalent(h.min(), 150_000), "{}", h.min());
    }

    #[test]
    fn trend_is_the_least_squares_slope() {
        let mut steady = Trend::default();
        let mut rising = Trend::default();
        for i in 0..100 {
            let t = i as f64 * 0.01;
            steady.record(t, 0.002 + if i % 2 == 0 { 1e-4 } else { -1e-4 });
            rising.record(t, 0.002 + 0.5 * t);
        }
        assert!(steady.slope().abs() < 1e-3, "{}", steady.slope());
        assert!((rising.slope() - 0.5).abs() < 1e-9, "{}", rising.slope());
        assert_eq!(Trend::default().slope(), 0.0);
    }

    #[test]
    fn stage_counters_sum_and_max() {
        let c = StageCounters::default();
        c.record(10);
        c.record(30);
        let r = c.snapshot("s", "cpu".into(), 2);
        assert_eq!(r.launches, 2);
        assert_eq!(r.total, Duration::from_nanos(40));
        assert_eq!(r.per_frame, Duration::from_nanos(20));
        assert_eq!(r.max_launch, Duration::from_nanos(30));
    }
}

//! The pass criteria of one trial (docs/architecture.md, `kplace bisect-rate`), as a pure function.
//!
//! [`judge`] guarantees:
//!
//! - **All gates, every reason.** Every gate is evaluated, and the [`Verdict`] lists every
//!   [`Failure`], in a fixed order (frame accounting, partial, dropped, verification, rate,
//!   latency, trend), so a trial records all the reasons it failed, not just the first.
//! - **Pass means all of:** every frame sent in the measured window was completed (and no more
//!   were counted than were sent), no partial frames, no dropped frames, no frame failed
//!   verification, processed rate >= `min_rate_ratio` x offered rate, post-frame p99 <= the
//!   latency budget at that rate ([`LatencyBudget::at`]), and latency growth over the window
//!   (trend x window) <= `max_trend_growth` x the budget.
//! - **Fails closed.** A NaN rate, trend or gate setting fails the gate it feeds; nothing
//!   passes by default.
//! - **Pure.** No clock, no I/O, no allocation beyond the verdict's list of failures.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What one trial at offered rate R measured, over its measured window (after warm-up).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrialMeasurement {
    /// The rate asked of the sender, in frames/s.
    pub offered_rate: f64,
    /// Frames the sender sent in the measured window.
    pub frames_sent: u64,
    /// Frames of those processed and delivered.
    pub frames_completed: u64,
    /// Frames completed as partial (some packets never arrived).
    pub partial_frames: u64,
    /// Frames dropped (never completed, e.g. no slot free).
    pub dropped_frames: u64,
    /// Frames whose output the verifier rejected.
    pub frames_failed_verification: u64,
    /// Frames completed per second over the measured window, in frames/s.
    pub processed_rate: f64,
    /// The 99th percentile of post-frame latency (completion - last packet) in the window.
    pub post_frame_p99: Duration,
    /// The least-squares slope of post-frame latency against time in the window: seconds of
    /// latency per second of run. Positive when a backlog is building.
    pub post_frame_trend: f64,
    /// The length of the measured window.
    pub window: Duration,
    /// Frames whose post-frame latency exceeded the latency budget at the offered rate (from
    /// the trial's latency histogram; 0 when the system reported none).
    #[serde(default)]
    pub frames_over_budget: u64,
    /// Frames whose post-frame latency was measured: the histogram's count, the measured
    /// window's completed frames (the warm-up's are not timed). `frames_over_budget` is a
    /// share of these; 0 when not reported (results written before it), when it is taken as a
    /// share of `frames_sent`.
    #[serde(default)]
    pub frames_timed: u64,
}

/// The latency budget: what a trial's post-frame p99 must not exceed, stated with the rule
/// that gives it.
///
/// The default, [`LatencyBudget::Deadline`], is the workload's own deadline: its frame
/// period in real time (the radar's CPI duration), or one frame period at the
/// offered rate when that is longer, so that a slow stream is never held to a tighter bound
/// than its own period. [`LatencyBudget::OneFramePeriod`] (`1/R`) is the strict rule: a frame
/// is processed before the next one has fully arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "rule", rename_all = "snake_case")]
pub enum LatencyBudget {
    /// `max(frame_period, 1/R)`.
    Deadline {
        /// The workload's frame period.
        #[serde(with = "duration_ms", rename = "frame_period_ms")]
        frame_period: Duration,
    },
    /// One frame period at the offered rate, 1/R.
    OneFramePeriod,
    /// A fixed bound, whatever the rate.
    Fixed {
        /// The bound.
        #[serde(with = "duration_ms", rename = "bound_ms")]
        bound: Duration,
    },
}

impl LatencyBudget {
    /// The budget at offered rate `rate` (frames/s). A rate that is not positive and finite has
    /// no period; its period is then [`Duration::MAX`] (such a trial fails the rate gate
    /// instead).
    pub fn at(self, rate: f64) -> Duration {
        let period = Duration::try_from_secs_f64(1.0 / rate).unwrap_or(Duration::MAX);
        match self {
            Self::Deadline { frame_period } => frame_period.max(period),
            Self::OneFramePeriod => period,
            Self::Fixed { bound } => bound,
        }
    }
}

impl fmt::Display for LatencyBudget {
    /// The rule as `--latency-budget` takes it, with the deadline's value: `deadline (6.4 ms)`,
    /// `1/R`, `6.4 ms`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Milliseconds to the microsecond, without trailing zeros: `6.4`, `0.41`.
        let ms = |d: &Duration| {
            let text = format!("{:.3}", d.as_secs_f64() * 1e3);
            text.trim_end_matches('0').trim_end_matches('.').to_string()
        };
        match self {
            Self::Deadline { frame_period } => {
                write!(f, "deadline (max of {} ms and 1/R)", ms(frame_period))
            }
            Self::OneFramePeriod => f.write_str("1/R"),
            Self::Fixed { bound } => write!(f, "{} ms", ms(bound)),
        }
    }
}

/// The budget rule as given on the command line, before the frame shape is known:
/// `deadline`, `1/R`, or a duration (`6.4ms`, `25 ms`, `0.1s`, `500us`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BudgetRule {
    /// [`LatencyBudget::Deadline`] at each frame shape.
    #[default]
    Deadline,
    /// [`LatencyBudget::OneFramePeriod`].
    OneFramePeriod,
    /// [`LatencyBudget::Fixed`].
    Fixed(Duration),
}

impl BudgetRule {
    /// The budget at a frame shape whose physical duration is `frame_period`.
    pub fn at_period(self, frame_period: Duration) -> LatencyBudget {
        match self {
            Self::Deadline => LatencyBudget::Deadline { frame_period },
            Self::OneFramePeriod => LatencyBudget::OneFramePeriod,
            Self::Fixed(bound) => LatencyBudget::Fixed { bound },
        }
    }
}

impl fmt::Display for BudgetRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Deadline => f.write_str("deadline"),
            Self::OneFramePeriod => f.write_str("1/R"),
            Self::Fixed(bound) => write!(f, "{}ms", bound.as_secs_f64() * 1e3),
        }
    }
}

/// A `--latency-budget` that is not `deadline`, `1/R` or a positive duration.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "latency budget {given:?}: expected `deadline`, `1/R` or a positive duration with its unit (`6.4ms`, `500us`, `0.1s`)"
)]
pub struct BudgetRuleError {
    /// The text given.
    given: String,
}

impl std::str::FromStr for BudgetRule {
    type Err = BudgetRuleError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || BudgetRuleError {
            given: text.to_string(),
        };
        let t = text.trim();
        match t.to_ascii_lowercase().as_str() {
            "deadline" => return Ok(Self::Deadline),
            "1/r" => return Ok(Self::OneFramePeriod),
            _ => {}
        }
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let (number, unit) = t.split_at(split);
        let value: f64 = number.parse().map_err(|_| bad())?;
        let scale = match unit.trim() {
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            _ => return Err(bad()),
        };
        match Duration::try_from_secs_f64(value * scale) {
            Ok(bound) if !bound.is_zero() => Ok(Self::Fixed(bound)),
            _ => Err(bad()),
        }
    }
}

/// Serde for a [`Duration`] as a number of milliseconds.
mod duration_ms {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64() * 1e3)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let ms = f64::deserialize(d)?;
        Duration::try_from_secs_f64(ms / 1e3).map_err(serde::de::Error::custom)
    }
}

/// The thresholds a trial must meet.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Gates {
    /// The budget post-frame p99 latency must stay within.
    pub latency_budget: LatencyBudget,
    /// The least processed rate as a fraction of the offered rate (default 0.99).
    pub min_rate_ratio: f64,
    /// How much post-frame latency may grow over the measured window (trend x window), as a
    /// fraction of the latency budget (default 0.5).
    pub max_trend_growth: f64,
}

impl Gates {
    /// The default least processed rate, as a fraction of the offered rate.
    pub const DEFAULT_MIN_RATE_RATIO: f64 = 0.99;
    /// The default allowed latency growth over the window, as a fraction of the budget.
    pub const DEFAULT_MAX_TREND_GROWTH: f64 = 0.5;

    /// The default gates with this latency budget.
    pub fn new(latency_budget: LatencyBudget) -> Self {
        Self {
            latency_budget,
            min_rate_ratio: Self::DEFAULT_MIN_RATE_RATIO,
            max_trend_growth: Self::DEFAULT_MAX_TREND_GROWTH,
        }
    }
}

/// One reason a trial failed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Failure {
    /// Fewer frames completed than were sent (or, an accounting error, more).
    NotAllFramesCompleted {
        /// Frames sent in the window.
        sent: u64,
        /// Frames completed in the window.
        completed: u64,
    },
    /// Frames completed as partial.
    PartialFrames(u64),
    /// Frames dropped.
    DroppedFrames(u64),
    /// Frames the verifier rejected.
    Verification(u64),
    /// The processed rate fell short of the required fraction of the offered rate.
    RateShort {
        /// The processed rate, frames/s.
        processed: f64,
        /// The least rate that passes, frames/s.
        wanted: f64,
    },
    /// Post-frame p99 latency exceeded the budget.
    LatencyOverBudget {
        /// The measured p99.
        p99: Duration,
        /// The budget at this rate.
        budget: Duration,
    },
    /// Post-frame latency grew over the window by more than allowed.
    RisingLatency {
        /// Latency growth over the window (trend x window), in seconds.
        growth: f64,
        /// The allowed growth, in seconds.
        allowed: f64,
    },
    /// The sender itself could not offer the rate: it sent at most `achieved` frames/s. The
    /// rate cannot be measured on this machine, so it bounds the search like a failure, but
    /// names the load generator, not the system. Built by trial runners, never by [`judge`].
    SenderLimit {
        /// The rate asked, frames/s.
        offered: f64,
        /// The rate the sender reached, frames/s.
        achieved: f64,
    },
    /// The trial could not be completed as measured: the system under test or the sender
    /// failed during it (it exited, or produced no report). Built by trial runners, never by
    /// [`judge`].
    SystemFailed(String),
    /// A failure of one pipeline of several (numbered from 0), each judged on its own.
    Pipeline(usize, Box<Failure>),
}

/// "1 frame" or "`n` frames".
fn frames(n: u64) -> String {
    if n == 1 {
        "1 frame".to_string()
    } else {
        format!("{n} frames")
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotAllFramesCompleted { sent, completed } if completed > sent => write!(
                f,
                "{} counted as completed but only {} sent (accounting error)",
                frames(*completed),
                frames(*sent)
            ),
            Self::NotAllFramesCompleted { sent, completed } => {
                write!(
                    f,
                    "only {completed} of {} sent were completed",
                    frames(*sent)
                )
            }
            Self::PartialFrames(n) => write!(f, "{} completed partial", frames(*n)),
            Self::DroppedFrames(n) => write!(f, "{} dropped", frames(*n)),
            Self::Verification(n) => write!(f, "{} failed verification", frames(*n)),
            Self::RateShort { processed, wanted } => write!(
                f,
                "processed {processed:.3} frames/s, short of the {wanted:.3} frames/s required"
            ),
            Self::LatencyOverBudget { p99, budget } => {
                write!(
                    f,
                    "post-frame p99 {p99:.3?} exceeds the {budget:.3?} budget"
                )
            }
            Self::RisingLatency { growth, allowed } => write!(
                f,
                "post-frame latency rose {:.3} ms over the window, more than the {:.3} ms allowed",
                growth * 1e3,
                allowed * 1e3
            ),
            Self::SenderLimit { offered, achieved } => write!(
                f,
                "the sender could not offer {offered:.3} frames/s here (it reached {achieved:.3})"
            ),
            Self::SystemFailed(why) => write!(f, "the trial failed to run: {why}"),
            Self::Pipeline(index, failure) => write!(f, "pipeline {index}: {failure}"),
        }
    }
}

/// A trial's outcome: passed, or failed with every reason.
///
/// Built by [`judge`], [`Verdict::pass`] or [`Verdict::from_failures`], `passed` is true
/// exactly when `failures` is empty; [`Verdict::is_pass`] requires both, so a verdict built
/// inconsistently by hand counts as a failure.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// Whether the trial passed every gate.
    pub passed: bool,
    /// Every reason it failed, in gate order; empty when it passed.
    pub failures: Vec<Failure>,
}

impl Verdict {
    /// A passing verdict.
    pub fn pass() -> Self {
        Self {
            passed: true,
            failures: Vec::new(),
        }
    }

    /// The verdict for these failures: a pass when there are none.
    pub fn from_failures(failures: Vec<Failure>) -> Self {
        Self {
            passed: failures.is_empty(),
            failures,
        }
    }

    /// Whether this counts as a pass: `passed` is set and no failure is listed.
    pub fn is_pass(&self) -> bool {
        self.passed && self.failures.is_empty()
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_pass() {
            return f.write_str("pass");
        }
        f.write_str("fail")?;
        for (i, failure) in self.failures.iter().enumerate() {
            f.write_str(if i == 0 { ": " } else { "; " })?;
            write!(f, "{failure}")?;
        }
        Ok(())
    }
}

/// Judges one trial against the gates; see the module documentation for what passes.
pub fn judge(m: &TrialMeasurement, gates: &Gates) -> Verdict {
    let mut failures = Vec::new();

    if m.frames_completed != m.frames_sent {
        failures.push(Failure::NotAllFramesCompleted {
            sent: m.frames_sent,
            completed: m.frames_completed,
        });
    }
    if m.partial_frames > 0 {
        failures.push(Failure::PartialFrames(m.partial_frames));
    }
    if m.dropped_frames > 0 {
        failures.push(Failure::DroppedFrames(m.dropped_frames));
    }
    if m.frames_failed_verification > 0 {
        failures.push(Failure::Verification(m.frames_failed_verification));
    }

    let wanted = gates.min_rate_ratio * m.offered_rate;
    // Written as "is it enough" so that a NaN on either side fails.
    let rate_enough = m.processed_rate >= wanted;
    if !rate_enough {
        failures.push(Failure::RateShort {
            processed: m.processed_rate,
            wanted,
        });
    }

    let budget = gates.latency_budget.at(m.offered_rate);
    if m.post_frame_p99 > budget {
        failures.push(Failure::LatencyOverBudget {
            p99: m.post_frame_p99,
            budget,
        });
    }

    let growth = m.post_frame_trend * m.window.as_secs_f64();
    let allowed = gates.max_trend_growth * budget.as_secs_f64();
    let growth_within = growth <= allowed;
    if !growth_within {
        failures.push(Failure::RisingLatency { growth, allowed });
    }

    Verdict::from_failures(failures)
}

/// The fraction of a trial's frames lost, as a search goal counts them: frames never
/// completed (partial, dropped, or never arrived: each once) and completed frames rejected by
/// the verifier, over the frames sent, plus the share of the timed frames over the latency
/// budget (the same share of the frames sent: the warm-up's frames are sent but not timed, so
/// a p99 over the budget is always more than 1% of frames late); or the share of the offered
/// rate not processed (`1 - processed / offered`) when the rate gate failed, whichever is
/// larger; at most 1. A trial whose verdict fails it as a whole (the system or the sender
/// failed, latency kept rising, the counts do not add up) lost everything: 1. Fails closed:
/// nothing sent, or a NaN rate, is total loss.
pub fn loss_ratio(m: &TrialMeasurement, verdict: &Verdict) -> f64 {
    if verdict.failures.iter().any(Failure::is_whole_trial) || m.frames_sent == 0 {
        return 1.0;
    }
    // A partial or dropped frame is one of the frames never completed: counted once. A frame
    // the verifier rejected or that came late is one of those completed.
    let never_completed = m
        .frames_sent
        .saturating_sub(m.frames_completed)
        .max(m.partial_frames + m.dropped_frames);
    let rejected = m.frames_failed_verification.min(m.frames_completed);
    let sent = m.frames_sent as f64;
    // The late frames' share of those timed, as frames of those sent.
    let timed = if m.frames_timed > 0 {
        m.frames_timed
    } else {
        m.frames_sent
    };
    let late = m.frames_over_budget.min(timed) as f64 * sent / timed as f64;
    let completed = m.frames_completed as f64;
    let lost = never_completed as f64 + (rejected as f64 + late).min(completed);
    let frames = lost / sent;
    let short = if verdict.failures.iter().any(Failure::is_rate_short) {
        let processed = m.processed_rate / m.offered_rate;
        // Written so that a NaN is total loss.
        if processed >= 0.0 {
            1.0 - processed.min(1.0)
        } else {
            1.0
        }
    } else {
        0.0
    };
    frames.max(short).min(1.0)
}

impl Failure {
    /// Whether the failure condemns the whole trial rather than counted frames.
    fn is_whole_trial(&self) -> bool {
        match self {
            Self::NotAllFramesCompleted { sent, completed } => completed > sent,
            Self::PartialFrames(_)
            | Self::DroppedFrames(_)
            | Self::Verification(_)
            | Self::LatencyOverBudget { .. }
            | Self::RateShort { .. } => false,
            Self::RisingLatency { .. } | Self::SenderLimit { .. } | Self::SystemFailed(_) => true,
            Self::Pipeline(_, failure) => failure.is_whole_trial(),
        }
    }

    /// Whether the failure is the processed rate falling short (of any pipeline).
    fn is_rate_short(&self) -> bool {
        match self {
            Self::RateShort { .. } => true,
            Self::Pipeline(_, failure) => failure.is_rate_short(),
            _ => false,
        }
    }
}

/// Why a report's latency histogram cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum HistogramError {
    /// Its text is not base64.
    #[error("the histogram is not base64: {0}")]
    Base64(base64::DecodeError),
    /// Its bytes are not an HdrHistogram V2 record.
    #[error("the histogram is not an HdrHistogram V2 record: {0:?}")]
    Record(hdrhistogram::serialization::DeserializeError),
    /// Two histograms cannot be added.
    #[error("{0:?}")]
    Merge(hdrhistogram::AdditionError),
}

/// A latency histogram as reports carry it (a base64 HdrHistogram V2 deflate record).
pub fn decode_histogram(text: &str) -> Result<hdrhistogram::Histogram<u64>, HistogramError> {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(HistogramError::Base64)?;
    hdrhistogram::serialization::Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(HistogramError::Record)
}

/// What one trial established: a verdict on the system under test, or nothing (the trial was
/// invalid: the load generator, not the system, decided it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Judgement {
    /// The gates' verdict.
    Verdict(Verdict),
    /// Why the trial says nothing about the system under test.
    Invalid(String),
}

impl From<Verdict> for Judgement {
    fn from(verdict: Verdict) -> Self {
        Self::Verdict(verdict)
    }
}

impl Judgement {
    /// Whether the trial was judged and passed.
    pub fn passed(&self) -> bool {
        matches!(self, Self::Verdict(v) if v.is_pass())
    }

    /// Whether the trial was judged and failed.
    pub fn failed(&self) -> bool {
        matches!(self, Self::Verdict(v) if !v.is_pass())
    }

    /// The verdict, when the trial was judged.
    pub fn verdict(&self) -> Option<&Verdict> {
        match self {
            Self::Verdict(v) => Some(v),
            Self::Invalid(_) => None,
        }
    }

    /// Why the trial was invalid, when it was.
    pub fn invalid(&self) -> Option<&str> {
        match self {
            Self::Verdict(_) => None,
            Self::Invalid(why) => Some(why),
        }
    }
}

impl fmt::Display for Judgement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Verdict(v) => write!(f, "{v}"),
            Self::Invalid(why) => write!(f, "invalid: {why}"),
        }
    }
}

#[cfg(test)]
mod tests;

//! The pass criteria of one trial (docs/architecture.md, `kplace bisect-rate`), as a pure function.
//!
//! [`judge`] guarantees:
//!
//! - **All gates, every reason.** Every gate is evaluated, and the [`Verdict`] lists every
//!   [`Failure`], in a fixed order (frame accounting, partial, dropped, verification, rate,
//!   latency, trend), so a trial records all the reasons it failed, not just the first.
//! - **Pass means all of:** every frame sent in the measured window was completed (and no more
//!   were counted than were sent), no partial frames, no dropped frames, no frame failed
//!   verification, processed rate >= `min_rate_ratio` x offered rate, post-CPI p99 <= the
//!   latency budget at that rate ([`LatencyBudget::at`]), and latency growth over the window
//!   (trend x window) <= `max_trend_growth` x the budget.
//! - **Fails closed.** A NaN rate, trend or gate setting fails the gate it feeds; nothing
//!   passes by default.
//! - **Pure.** No clock, no I/O, no allocation beyond the verdict's list of failures.
//!
//! Long (421 lines of code, 427 of tests): about half of it is tests of every gate.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What one trial at offered rate R measured, over its measured window (after warm-up).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrialMeasurement {
    /// The rate asked of the sender, in CPI/s.
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
    /// Frames completed per second over the measured window, in CPI/s.
    pub processed_rate: f64,
    /// The 99th percentile of post-CPI latency (completion - last packet) in the window.
    pub post_cpi_p99: Duration,
    /// The least-squares slope of post-CPI latency against time in the window: seconds of
    /// latency per second of run. Positive when a backlog is building.
    pub post_cpi_trend: f64,
    /// The length of the measured window.
    pub window: Duration,
    /// Frames whose post-CPI latency exceeded the latency budget at the offered rate (from
    /// the trial's latency histogram; 0 when the system reported none).
    #[serde(default)]
    pub frames_over_budget: u64,
}

/// The latency budget: what a trial's post-CPI p99 must not exceed, stated with the rule
/// that gives it.
///
/// The default, [`LatencyBudget::Deadline`], is the workload's own deadline: the CPI's
/// physical duration (its chirps at the physical chirp interval), or one CPI period at the
/// offered rate when that is longer, so that a slow stream is never held to a tighter bound
/// than its own period. [`LatencyBudget::OneCpiPeriod`] (`1/R`) is the strict rule: a frame
/// is processed before the next one has fully arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "rule", rename_all = "snake_case")]
pub enum LatencyBudget {
    /// `max(cpi_duration, 1/R)`.
    Deadline {
        /// The CPI's physical duration.
        #[serde(with = "duration_ms", rename = "cpi_duration_ms")]
        cpi_duration: Duration,
    },
    /// One CPI period at the offered rate, 1/R.
    OneCpiPeriod,
    /// A fixed bound, whatever the rate.
    Fixed {
        /// The bound.
        #[serde(with = "duration_ms", rename = "bound_ms")]
        bound: Duration,
    },
}

impl LatencyBudget {
    /// The budget at offered rate `rate` (CPI/s). A rate that is not positive and finite has
    /// no period; its period is then [`Duration::MAX`] (such a trial fails the rate gate
    /// instead).
    pub fn at(self, rate: f64) -> Duration {
        let period = Duration::try_from_secs_f64(1.0 / rate).unwrap_or(Duration::MAX);
        match self {
            Self::Deadline { cpi_duration } => cpi_duration.max(period),
            Self::OneCpiPeriod => period,
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
            Self::Deadline { cpi_duration } => {
                write!(f, "deadline (max of {} ms and 1/R)", ms(cpi_duration))
            }
            Self::OneCpiPeriod => f.write_str("1/R"),
            Self::Fixed { bound } => write!(f, "{} ms", ms(bound)),
        }
    }
}

/// The budget rule as given on the command line, before the CPI is known:
/// `deadline`, `1/R`, or a duration (`6.4ms`, `25 ms`, `0.1s`, `500us`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BudgetRule {
    /// [`LatencyBudget::Deadline`] at each CPI.
    #[default]
    Deadline,
    /// [`LatencyBudget::OneCpiPeriod`].
    OneCpiPeriod,
    /// [`LatencyBudget::Fixed`].
    Fixed(Duration),
}

impl BudgetRule {
    /// The budget at a CPI whose physical duration is `cpi_duration`.
    pub fn at_cpi(self, cpi_duration: Duration) -> LatencyBudget {
        match self {
            Self::Deadline => LatencyBudget::Deadline { cpi_duration },
            Self::OneCpiPeriod => LatencyBudget::OneCpiPeriod,
            Self::Fixed(bound) => LatencyBudget::Fixed { bound },
        }
    }
}

impl fmt::Display for BudgetRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Deadline => f.write_str("deadline"),
            Self::OneCpiPeriod => f.write_str("1/R"),
            Self::Fixed(bound) => write!(f, "{}ms", bound.as_secs_f64() * 1e3),
        }
    }
}

/// A `--latency-budget` that is not `deadline`, `1/R` or a positive duration.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "latency budget {0:?}: expected `deadline`, `1/R` or a positive duration with its unit (`6.4ms`, `500us`, `0.1s`)"
)]
pub struct BudgetRuleError(String);

impl std::str::FromStr for BudgetRule {
    type Err = BudgetRuleError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || BudgetRuleError(text.to_string());
        let t = text.trim();
        match t.to_ascii_lowercase().as_str() {
            "deadline" => return Ok(Self::Deadline),
            "1/r" => return Ok(Self::OneCpiPeriod),
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
    /// The budget post-CPI p99 latency must stay within.
    pub latency_budget: LatencyBudget,
    /// The least processed rate as a fraction of the offered rate (default 0.99).
    pub min_rate_ratio: f64,
    /// How much post-CPI latency may grow over the measured window (trend x window), as a
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
        /// The processed rate, CPI/s.
        processed: f64,
        /// The least rate that passes, CPI/s.
        wanted: f64,
    },
    /// Post-CPI p99 latency exceeded the budget.
    LatencyOverBudget {
        /// The measured p99.
        p99: Duration,
        /// The budget at this rate.
        budget: Duration,
    },
    /// Post-CPI latency grew over the window by more than allowed.
    RisingLatency {
        /// Latency growth over the window (trend x window), in seconds.
        growth: f64,
        /// The allowed growth, in seconds.
        allowed: f64,
    },
    /// The sender itself could not offer the rate: it sent at most `achieved` CPI/s. The
    /// rate cannot be measured on this machine, so it bounds the search like a failure, but
    /// names the load generator, not the system. Built by trial runners, never by [`judge`].
    SenderLimit {
        /// The rate asked, CPI/s.
        offered: f64,
        /// The rate the sender reached, CPI/s.
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
                "processed {processed:.3} CPI/s, short of the {wanted:.3} CPI/s required"
            ),
            Self::LatencyOverBudget { p99, budget } => {
                write!(f, "post-CPI p99 {p99:.3?} exceeds the {budget:.3?} budget")
            }
            Self::RisingLatency { growth, allowed } => write!(
                f,
                "post-CPI latency rose {:.3} ms over the window, more than the {:.3} ms allowed",
                growth * 1e3,
                allowed * 1e3
            ),
            Self::SenderLimit { offered, achieved } => write!(
                f,
                "the sender could not offer {offered:.3} CPI/s here (it reached {achieved:.3})"
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
    if m.post_cpi_p99 > budget {
        failures.push(Failure::LatencyOverBudget {
            p99: m.post_cpi_p99,
            budget,
        });
    }

    let growth = m.post_cpi_trend * m.window.as_secs_f64();
    let allowed = gates.max_trend_growth * budget.as_secs_f64();
    let growth_within = growth <= allowed;
    if !growth_within {
        failures.push(Failure::RisingLatency { growth, allowed });
    }

    Verdict::from_failures(failures)
}

/// The fraction of a trial's frames lost, as a search goal counts them: frames never
/// completed, partial, dropped, rejected by the verifier or over the latency budget, over the
/// frames sent, or the share of the offered rate not processed (`1 - processed / offered`)
/// when the rate gate failed, whichever is larger; at most 1. A trial whose verdict fails it as
/// a whole (the system or the sender failed, latency kept rising, the counts do not add up)
/// lost everything: 1. Fails closed: nothing sent, or a NaN rate, is total loss.
pub fn loss_ratio(m: &TrialMeasurement, verdict: &Verdict) -> f64 {
    if verdict.failures.iter().any(Failure::is_whole_trial) || m.frames_sent == 0 {
        return 1.0;
    }
    let lost = m.frames_sent.saturating_sub(m.frames_completed)
        + m.partial_frames
        + m.dropped_frames
        + m.frames_failed_verification
        + m.frames_over_budget;
    let frames = lost as f64 / m.frames_sent as f64;
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

/// A latency histogram as reports carry it (a base64 HdrHistogram V2 deflate record).
pub fn decode_histogram(text: &str) -> Result<hdrhistogram::Histogram<u64>, String> {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|e| format!("the histogram is not base64: {e}"))?;
    hdrhistogram::serialization::Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| format!("the histogram is not an HdrHistogram V2 record: {e:?}"))
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
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// A clean trial at 100 CPI/s over a 10 s window: everything within the default gates.
    fn clean() -> TrialMeasurement {
        TrialMeasurement {
            offered_rate: 100.0,
            frames_sent: 1000,
            frames_completed: 1000,
            partial_frames: 0,
            dropped_frames: 0,
            frames_failed_verification: 0,
            processed_rate: 100.0,
            post_cpi_p99: 4 * MS,
            post_cpi_trend: 0.0,
            window: Duration::from_secs(10),
            frames_over_budget: 0,
        }
    }

    /// The default gates at a CPI of 6.4 ms (1024x128): the deadline is 6.4 ms or 1/R.
    fn defaults() -> Gates {
        Gates::new(BudgetRule::default().at_cpi(Duration::from_micros(6_400)))
    }

    /// The strict rule's gates, 1/R.
    fn strict() -> Gates {
        Gates::new(LatencyBudget::OneCpiPeriod)
    }

    fn failures(m: &TrialMeasurement) -> Vec<Failure> {
        judge(m, &strict()).failures
    }

    #[test]
    fn a_clean_measurement_passes() {
        let verdict = judge(&clean(), &strict());
        assert!(verdict.passed && verdict.is_pass(), "{verdict}");
        assert!(verdict.failures.is_empty());
        assert_eq!(verdict.to_string(), "pass");
    }

    #[test]
    fn defaults_are_the_contract() {
        let gates = defaults();
        assert_eq!(
            gates.latency_budget,
            LatencyBudget::Deadline {
                cpi_duration: Duration::from_micros(6_400)
            }
        );
        assert_eq!(gates.min_rate_ratio, 0.99);
        assert_eq!(gates.max_trend_growth, 0.5);
        assert_eq!(BudgetRule::default(), BudgetRule::Deadline);
    }

    #[test]
    fn the_deadline_is_the_cpi_duration_or_the_period_when_longer() {
        let deadline = defaults().latency_budget;
        // Fast streams: the CPI's physical duration, whatever R.
        assert_eq!(deadline.at(500.0), Duration::from_micros(6_400));
        assert_eq!(deadline.at(156.25), Duration::from_micros(6_400));
        // A slow stream is held to its own period, never to less.
        assert_eq!(deadline.at(100.0), 10 * MS);
        assert_eq!(deadline.at(1.0), Duration::from_secs(1));
        assert_eq!(deadline.at(0.0), Duration::MAX);

        // 5 ms passes at 500 CPI/s under the deadline but fails the strict 1/R (2 ms).
        let fast = TrialMeasurement {
            offered_rate: 500.0,
            frames_sent: 5000,
            frames_completed: 5000,
            processed_rate: 500.0,
            post_cpi_p99: 5 * MS,
            ..clean()
        };
        assert!(judge(&fast, &defaults()).is_pass());
        assert_eq!(
            failures(&fast),
            [Failure::LatencyOverBudget {
                p99: 5 * MS,
                budget: 2 * MS
            }]
        );
    }

    #[test]
    fn budget_rules_parse_and_print_as_given() {
        for (text, rule) in [
            ("deadline", BudgetRule::Deadline),
            ("1/R", BudgetRule::OneCpiPeriod),
            ("1/r", BudgetRule::OneCpiPeriod),
            ("6.4ms", BudgetRule::Fixed(Duration::from_micros(6_400))),
            ("25 ms", BudgetRule::Fixed(25 * MS)),
            ("500us", BudgetRule::Fixed(Duration::from_micros(500))),
            ("0.1s", BudgetRule::Fixed(100 * MS)),
        ] {
            assert_eq!(text.parse::<BudgetRule>(), Ok(rule), "{text}");
            assert_eq!(rule.to_string().parse::<BudgetRule>(), Ok(rule), "{rule}");
        }
        for bad in ["", "6.4", "ms", "0ms", "-1ms", "fast", "1/2", "6.4 min"] {
            let e = bad.parse::<BudgetRule>().unwrap_err().to_string();
            assert!(e.contains("deadline") && e.contains("1/R"), "{bad}: {e}");
        }
    }

    #[test]
    fn budgets_serialize_with_their_rule() {
        let deadline = defaults().latency_budget;
        let text = serde_json::to_string(&deadline).unwrap();
        assert_eq!(text, r#"{"rule":"deadline","cpi_duration_ms":6.4}"#);
        assert_eq!(
            serde_json::from_str::<LatencyBudget>(&text).unwrap(),
            deadline
        );
        assert_eq!(
            serde_json::to_string(&LatencyBudget::OneCpiPeriod).unwrap(),
            r#"{"rule":"one_cpi_period"}"#
        );
        assert_eq!(deadline.to_string(), "deadline (max of 6.4 ms and 1/R)");
        assert_eq!(LatencyBudget::Fixed { bound: 2 * MS }.to_string(), "2 ms");
    }

    #[test]
    fn incomplete_frames_fail() {
        let m = TrialMeasurement {
            frames_completed: 990,
            ..clean()
        };
        assert_eq!(
            failures(&m),
            [Failure::NotAllFramesCompleted {
                sent: 1000,
                completed: 990
            }]
        );
    }

    #[test]
    fn more_completed_than_sent_is_an_accounting_failure() {
        let m = TrialMeasurement {
            frames_completed: 1001,
            ..clean()
        };
        let got = failures(&m);
        assert_eq!(
            got,
            [Failure::NotAllFramesCompleted {
                sent: 1000,
                completed: 1001
            }]
        );
        assert!(
            got[0].to_string().contains("accounting error"),
            "{}",
            got[0]
        );
    }

    #[test]
    fn partial_frames_fail() {
        let m = TrialMeasurement {
            partial_frames: 1,
            ..clean()
        };
        assert_eq!(failures(&m), [Failure::PartialFrames(1)]);
    }

    #[test]
    fn dropped_frames_fail() {
        let m = TrialMeasurement {
            dropped_frames: 3,
            ..clean()
        };
        assert_eq!(failures(&m), [Failure::DroppedFrames(3)]);
    }

    #[test]
    fn verification_failures_fail() {
        let m = TrialMeasurement {
            frames_failed_verification: 2,
            ..clean()
        };
        assert_eq!(failures(&m), [Failure::Verification(2)]);
    }

    #[test]
    fn a_short_rate_fails_and_the_ratio_is_inclusive() {
        let wanted = 0.99 * 100.0;
        let at_ratio = TrialMeasurement {
            processed_rate: wanted,
            ..clean()
        };
        assert!(judge(&at_ratio, &strict()).is_pass());

        let short = TrialMeasurement {
            processed_rate: 98.9,
            ..clean()
        };
        assert_eq!(
            failures(&short),
            [Failure::RateShort {
                processed: 98.9,
                wanted
            }]
        );
    }

    #[test]
    fn the_strict_budget_is_one_cpi_period_at_r() {
        assert_eq!(LatencyBudget::OneCpiPeriod.at(100.0), 10 * MS);
        assert_eq!(LatencyBudget::OneCpiPeriod.at(50.0), 20 * MS);
        assert_eq!(LatencyBudget::Fixed { bound: 3 * MS }.at(100.0), 3 * MS);

        // 10.5 ms fails at 100 CPI/s (period 10 ms) and passes at 50 CPI/s (period 20 ms).
        let p99 = Duration::from_micros(10_500);
        let at_100 = TrialMeasurement {
            post_cpi_p99: p99,
            ..clean()
        };
        assert_eq!(
            failures(&at_100),
            [Failure::LatencyOverBudget {
                p99,
                budget: 10 * MS
            }]
        );
        let at_50 = TrialMeasurement {
            offered_rate: 50.0,
            frames_sent: 500,
            frames_completed: 500,
            processed_rate: 50.0,
            post_cpi_p99: p99,
            ..clean()
        };
        assert!(judge(&at_50, &strict()).is_pass());

        // Exactly the budget passes.
        let at_bound = TrialMeasurement {
            post_cpi_p99: 10 * MS,
            ..clean()
        };
        assert!(judge(&at_bound, &strict()).is_pass());
    }

    #[test]
    fn a_fixed_latency_budget_applies_at_every_rate() {
        let gates = Gates::new(LatencyBudget::Fixed { bound: 2 * MS });
        let verdict = judge(&clean(), &gates);
        assert_eq!(
            verdict.failures,
            [Failure::LatencyOverBudget {
                p99: 4 * MS,
                budget: 2 * MS
            }]
        );
    }

    #[test]
    fn the_budget_of_a_rate_without_a_period_is_unbounded() {
        assert_eq!(LatencyBudget::OneCpiPeriod.at(0.0), Duration::MAX);
        assert_eq!(LatencyBudget::OneCpiPeriod.at(-1.0), Duration::MAX);
        assert_eq!(LatencyBudget::OneCpiPeriod.at(f64::NAN), Duration::MAX);
    }

    #[test]
    fn rising_latency_fails_beyond_half_the_budget_over_the_window() {
        // Budget 10 ms at 100 CPI/s, so growth over the 10 s window may be at most 5 ms.
        let rising = |trend: f64| TrialMeasurement {
            post_cpi_trend: trend,
            ..clean()
        };
        assert!(judge(&rising(4e-4), &strict()).is_pass()); // 4 ms
        assert!(judge(&rising(-1e-3), &strict()).is_pass()); // falling
        let got = failures(&rising(6e-4)); // 6 ms
        let [Failure::RisingLatency { growth, allowed }] = got[..] else {
            panic!("expected one RisingLatency, got {got:?}");
        };
        assert!((growth - 6e-3).abs() < 1e-12, "{growth}");
        assert!((allowed - 5e-3).abs() < 1e-12, "{allowed}");
    }

    #[test]
    fn nan_fails_closed() {
        let nan_rate = TrialMeasurement {
            processed_rate: f64::NAN,
            ..clean()
        };
        assert!(matches!(
            failures(&nan_rate)[..],
            [Failure::RateShort { .. }]
        ));
        let nan_trend = TrialMeasurement {
            post_cpi_trend: f64::NAN,
            ..clean()
        };
        assert!(matches!(
            failures(&nan_trend)[..],
            [Failure::RisingLatency { .. }]
        ));
        let nan_gates = Gates {
            min_rate_ratio: f64::NAN,
            max_trend_growth: f64::NAN,
            ..strict()
        };
        let verdict = judge(&clean(), &nan_gates);
        assert!(!verdict.is_pass());
        assert_eq!(verdict.failures.len(), 2, "{verdict}");
    }

    #[test]
    fn every_failure_is_reported_in_gate_order() {
        let m = TrialMeasurement {
            offered_rate: 100.0,
            frames_sent: 1000,
            frames_completed: 900,
            partial_frames: 5,
            dropped_frames: 95,
            frames_failed_verification: 1,
            processed_rate: 90.0,
            post_cpi_p99: 50 * MS,
            post_cpi_trend: 1e-2,
            window: Duration::from_secs(10),
            frames_over_budget: 0,
        };
        let verdict = judge(&m, &strict());
        assert!(!verdict.passed && !verdict.is_pass());
        let kinds: Vec<_> = verdict
            .failures
            .iter()
            .map(|f| match f {
                Failure::NotAllFramesCompleted { .. } => "completed",
                Failure::PartialFrames(_) => "partial",
                Failure::DroppedFrames(_) => "dropped",
                Failure::Verification(_) => "verification",
                Failure::RateShort { .. } => "rate",
                Failure::LatencyOverBudget { .. } => "latency",
                Failure::RisingLatency { .. } => "trend",
                Failure::SystemFailed(_) => "system",
                Failure::SenderLimit { .. } => "sender",
                Failure::Pipeline(..) => "pipeline",
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "completed",
                "partial",
                "dropped",
                "verification",
                "rate",
                "latency",
                "trend"
            ]
        );
        let text = verdict.to_string();
        assert!(
            text.starts_with("fail: only 900 of 1000 frames sent"),
            "{text}"
        );
        assert_eq!(text.matches("; ").count(), 6, "{text}");
    }

    #[test]
    fn failures_read_as_one_short_sentence() {
        let all = [
            Failure::NotAllFramesCompleted {
                sent: 10,
                completed: 9,
            },
            Failure::NotAllFramesCompleted {
                sent: 9,
                completed: 10,
            },
            Failure::PartialFrames(1),
            Failure::DroppedFrames(2),
            Failure::Verification(3),
            Failure::RateShort {
                processed: 9.0,
                wanted: 9.9,
            },
            Failure::LatencyOverBudget {
                p99: 12 * MS,
                budget: 10 * MS,
            },
            Failure::RisingLatency {
                growth: 6e-3,
                allowed: 5e-3,
            },
            Failure::SystemFailed("receiver exited with status 1".into()),
        ];
        for failure in &all {
            let text = failure.to_string();
            assert!(!text.is_empty() && text.len() < 100, "{text}");
            assert!(!text.contains('\n') && !text.ends_with('.'), "{text}");
        }
        assert_eq!(
            Failure::PartialFrames(1).to_string(),
            "1 frame completed partial"
        );
        assert_eq!(Failure::DroppedFrames(2).to_string(), "2 frames dropped");
        assert_eq!(
            Failure::LatencyOverBudget {
                p99: 12 * MS,
                budget: 10 * MS
            }
            .to_string(),
            "post-CPI p99 12.000ms exceeds the 10.000ms budget"
        );
    }

    #[test]
    fn verdict_consistency() {
        assert!(Verdict::pass().is_pass());
        assert!(Verdict::from_failures(Vec::new()).is_pass());
        assert!(!Verdict::from_failures(vec![Failure::DroppedFrames(1)]).is_pass());
        // Hand-built and inconsistent: counts as a failure.
        let odd = Verdict {
            passed: true,
            failures: vec![Failure::DroppedFrames(1)],
        };
        assert!(!odd.is_pass());
        assert!(!Verdict::default().is_pass());
    }

    #[test]
    fn the_loss_ratio_counts_every_frame_lost_and_condemns_a_failed_trial() {
        let gates = strict();
        let m = clean();
        assert_eq!(loss_ratio(&m, &judge(&m, &gates)), 0.0);
        let lossy = TrialMeasurement {
            frames_completed: 995,
            partial_frames: 1,
            dropped_frames: 2,
            frames_failed_verification: 1,
            frames_over_budget: 3,
            ..clean()
        };
        // 5 never completed, 1 partial, 2 dropped, 1 rejected, 3 late: 12 of 1000.
        assert_eq!(loss_ratio(&lossy, &judge(&lossy, &gates)), 0.012);
        let falling_behind = TrialMeasurement {
            post_cpi_trend: 1.0,
            ..clean()
        };
        assert_eq!(
            loss_ratio(&falling_behind, &judge(&falling_behind, &gates)),
            1.0
        );
        let crashed = Verdict::from_failures(vec![Failure::Pipeline(
            1,
            Box::new(Failure::SystemFailed("exited".into())),
        )]);
        assert_eq!(loss_ratio(&clean(), &crashed), 1.0);
        let nothing = TrialMeasurement {
            frames_sent: 0,
            frames_completed: 0,
            ..clean()
        };
        assert_eq!(loss_ratio(&nothing, &Verdict::pass()), 1.0);
        let miscounted = TrialMeasurement {
            frames_completed: 1001,
            ..clean()
        };
        assert_eq!(loss_ratio(&miscounted, &judge(&miscounted, &gates)), 1.0);
    }
}

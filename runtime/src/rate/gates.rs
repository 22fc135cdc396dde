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
//!   latency bound, and latency growth over the window (trend x window) <= `max_trend_growth`
//!   x the latency bound.
//! - **Fails closed.** A NaN rate, trend or gate setting fails the gate it feeds; nothing
//!   passes by default.
//! - **Pure.** No clock, no I/O, no allocation beyond the verdict's list of failures.

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
}

/// The latency a trial's post-CPI p99 must not exceed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LatencyBound {
    /// One CPI period at the offered rate, 1/R: a frame is processed before the next one has
    /// fully arrived.
    #[default]
    OneCpiPeriod,
    /// A fixed bound, whatever the rate.
    Fixed(Duration),
}

impl LatencyBound {
    /// The bound at offered rate `rate` (CPI/s). [`LatencyBound::OneCpiPeriod`] at a rate
    /// that is not positive and finite has no period; its bound is then [`Duration::MAX`]
    /// (such a trial fails the rate gate instead).
    pub fn at(self, rate: f64) -> Duration {
        match self {
            Self::OneCpiPeriod => Duration::try_from_secs_f64(1.0 / rate).unwrap_or(Duration::MAX),
            Self::Fixed(bound) => bound,
        }
    }
}

/// The thresholds a trial must meet.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Gates {
    /// The bound on post-CPI p99 latency.
    pub latency_bound: LatencyBound,
    /// The least processed rate as a fraction of the offered rate (default 0.99).
    pub min_rate_ratio: f64,
    /// How much post-CPI latency may grow over the measured window (trend x window), as a
    /// fraction of the latency bound (default 0.5).
    pub max_trend_growth: f64,
}

impl Gates {
    /// The default least processed rate, as a fraction of the offered rate.
    pub const DEFAULT_MIN_RATE_RATIO: f64 = 0.99;
    /// The default allowed latency growth over the window, as a fraction of the bound.
    pub const DEFAULT_MAX_TREND_GROWTH: f64 = 0.5;
}

impl Default for Gates {
    fn default() -> Self {
        Self {
            latency_bound: LatencyBound::OneCpiPeriod,
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
    /// Post-CPI p99 latency exceeded the bound.
    LatencyOverBound {
        /// The measured p99.
        p99: Duration,
        /// The bound at this rate.
        bound: Duration,
    },
    /// Post-CPI latency grew over the window by more than allowed.
    RisingLatency {
        /// Latency growth over the window (trend x window), in seconds.
        growth: f64,
        /// The allowed growth, in seconds.
        allowed: f64,
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
            Self::LatencyOverBound { p99, bound } => {
                write!(f, "post-CPI p99 {p99:.3?} exceeds the {bound:.3?} bound")
            }
            Self::RisingLatency { growth, allowed } => write!(
                f,
                "post-CPI latency rose {:.3} ms over the window, more than the {:.3} ms allowed",
                growth * 1e3,
                allowed * 1e3
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

    let bound = gates.latency_bound.at(m.offered_rate);
    if m.post_cpi_p99 > bound {
        failures.push(Failure::LatencyOverBound {
            p99: m.post_cpi_p99,
            bound,
        });
    }

    let growth = m.post_cpi_trend * m.window.as_secs_f64();
    let allowed = gates.max_trend_growth * bound.as_secs_f64();
    let growth_within = growth <= allowed;
    if !growth_within {
        failures.push(Failure::RisingLatency { growth, allowed });
    }

    Verdict::from_failures(failures)
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
        }
    }

    fn failures(m: &TrialMeasurement) -> Vec<Failure> {
        judge(m, &Gates::default()).failures
    }

    #[test]
    fn a_clean_measurement_passes() {
        let verdict = judge(&clean(), &Gates::default());
        assert!(verdict.passed && verdict.is_pass(), "{verdict}");
        assert!(verdict.failures.is_empty());
        assert_eq!(verdict.to_string(), "pass");
    }

    #[test]
    fn defaults_are_the_contract() {
        let gates = Gates::default();
        assert_eq!(gates.latency_bound, LatencyBound::OneCpiPeriod);
        assert_eq!(gates.min_rate_ratio, 0.99);
        assert_eq!(gates.max_trend_growth, 0.5);
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
        assert!(judge(&at_ratio, &Gates::default()).is_pass());

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
    fn the_default_latency_bound_is_one_cpi_period_at_r() {
        assert_eq!(LatencyBound::OneCpiPeriod.at(100.0), 10 * MS);
        assert_eq!(LatencyBound::OneCpiPeriod.at(50.0), 20 * MS);
        assert_eq!(LatencyBound::Fixed(3 * MS).at(100.0), 3 * MS);

        // 10.5 ms fails at 100 CPI/s (period 10 ms) and passes at 50 CPI/s (period 20 ms).
        let p99 = Duration::from_micros(10_500);
        let at_100 = TrialMeasurement {
            post_cpi_p99: p99,
            ..clean()
        };
        assert_eq!(
            failures(&at_100),
            [Failure::LatencyOverBound {
                p99,
                bound: 10 * MS
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
        assert!(judge(&at_50, &Gates::default()).is_pass());

        // Exactly the bound passes.
        let at_bound = TrialMeasurement {
            post_cpi_p99: 10 * MS,
            ..clean()
        };
        assert!(judge(&at_bound, &Gates::default()).is_pass());
    }

    #[test]
    fn a_fixed_latency_bound_applies_at_every_rate() {
        let gates = Gates {
            latency_bound: LatencyBound::Fixed(2 * MS),
            ..Gates::default()
        };
        let verdict = judge(&clean(), &gates);
        assert_eq!(
            verdict.failures,
            [Failure::LatencyOverBound {
                p99: 4 * MS,
                bound: 2 * MS
            }]
        );
    }

    #[test]
    fn the_bound_of_a_rate_without_a_period_is_unbounded() {
        assert_eq!(LatencyBound::OneCpiPeriod.at(0.0), Duration::MAX);
        assert_eq!(LatencyBound::OneCpiPeriod.at(-1.0), Duration::MAX);
        assert_eq!(LatencyBound::OneCpiPeriod.at(f64::NAN), Duration::MAX);
    }

    #[test]
    fn rising_latency_fails_beyond_half_the_bound_over_the_window() {
        // Bound 10 ms at 100 CPI/s, so growth over the 10 s window may be at most 5 ms.
        let rising = |trend: f64| TrialMeasurement {
            post_cpi_trend: trend,
            ..clean()
        };
        assert!(judge(&rising(4e-4), &Gates::default()).is_pass()); // 4 ms
        assert!(judge(&rising(-1e-3), &Gates::default()).is_pass()); // falling
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
            ..Gates::default()
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
        };
        let verdict = judge(&m, &Gates::default());
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
                Failure::LatencyOverBound { .. } => "latency",
                Failure::RisingLatency { .. } => "trend",
                Failure::SystemFailed(_) => "system",
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
            Failure::LatencyOverBound {
                p99: 12 * MS,
                bound: 10 * MS,
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
            Failure::LatencyOverBound {
                p99: 12 * MS,
                bound: 10 * MS
            }
            .to_string(),
            "post-CPI p99 12.000ms exceeds the 10.000ms bound"
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
}

//! The search for the sustained rate (docs/architecture.md, `kplace bisect-rate`): probe, bisect, confirm
//! K of K, step down.
//!
//! [`search`] asks a caller's closure for one trial at a time and decides the next rate from
//! the trials so far. The algorithm:
//!
//! 1. **Probe.** A trial at `start_rate` (phase [`Phase::ProbeUp`]). While every trial has
//!    passed, double the rate (capped at `max_rate`) until a trial fails. While no trial has
//!    passed, halve it (floored at `min_rate`, phase [`Phase::ProbeDown`]) until one passes.
//! 2. **Bisect** ([`Phase::Bisect`]) between the highest passing rate and the lowest failing
//!    rate at their *geometric* midpoint `sqrt(pass x fail)`, until
//!    `(fail - pass) / pass <= tolerance`. The geometric midpoint halves the bracket's log
//!    ratio each step, which matches a relative tolerance and is scale-free: the step count
//!    depends only on how many factors of two the probe spanned, not on the rates.
//! 3. **Confirm** ([`Phase::Confirm`]) at the highest passing rate: `confirm` (K) *fresh*
//!    trials; the pass that made it the highest passing rate does not count, so "K/K" always
//!    means K consecutive confirmation trials. A run stops at its first failure.
//! 4. **Step down.** A failed confirmation makes that rate a failing bound and makes the search
//!    *strict*: the system has shown that one pass proves little, so from then on every rate is
//!    tested by a confirmation run (phase [`Phase::Confirm`]). The search steps down to the
//!    next lower rate that passed before (or, with none left, halves the failing rate down to
//!    `min_rate`), confirms there, and then bisects between the highest confirmed rate and the
//!    lowest failing rate with confirmation runs until they are within the tolerance.
//!
//! If the probe reaches `max_rate` without a failure it confirms there, and a K/K pass ends
//! the search with [`Outcome::PassesEverywhere`]. A failure at `min_rate` with nothing passing
//! below the lowest failure ends it with [`Outcome::FailsEverywhere`].
//!
//! The machine's bad minutes never become a rate:
//!
//! - **A failure is rechecked.** A probe or bisection trial that fails is run again at once at
//!   the same rate ([`Phase::Recheck`]); the failure bounds the search (becomes the lowest
//!   failing rate) only if the recheck fails too, and a passing recheck makes the rate a pass.
//!   A failure inside a confirmation run is not rechecked: K of K already asks every trial to
//!   pass.
//! - **Invalid trials are retried.** A trial the runner judges [`Judgement::Invalid`] (the
//!   load generator fell behind its schedule, or the machine was unsteady when it failed)
//!   says nothing about the system under test: it is recorded and run again at the same rate,
//!   up to `invalid_retries` times in a row; one more ends the search with
//!   [`Outcome::Unsteady`].
//! - **Contradictions end the search.** A failure at a rate more than `contradiction` below a
//!   rate that passed (`(pass - fail) / fail > contradiction`) cannot be the system's capacity
//!   changing by a few percent: the search ends with [`Outcome::Unsteady`] and its trials,
//!   never with a rate far below one that passed.
//!
//! Guarantees of a [`SearchResult`]:
//!
//! - **Every trial recorded.** `trials[i]` is the i-th call of the closure that returned a
//!   judgement (invalid ones too), with the rate and phase it was called with, so a runner may
//!   keep richer per-trial data (its measurements) in a list of its own, index for index.
//! - **Rates in range.** Every rate offered lies in `[min_rate, max_rate]`; at most
//!   `max_trials` trials are run, invalid ones included.
//! - **`sustained` is K/K and below every failure.** When `Some(r)`, K consecutive
//!   judged confirmation trials at `r` passed (invalid ones between them are retries, not
//!   breaks), and every failure that bounds the search (one not followed by a passing recheck
//!   at its rate) was at a rate above `r`. It is always
//!   `None` when the outcome is [`Outcome::Unsteady`].
//! - **Both bounds tested, never assumed.** `lowest_fail` is the lowest rate at which a
//!   failure stood (its recheck failed too, or it was a confirmation trial); `highest_pass` is
//!   the highest rate below it at which a trial passed (it equals
//!   `sustained` whenever that is `Some`). With [`Outcome::Converged`],
//!   `(lowest_fail - sustained) / sustained <= tolerance` (or the two are adjacent floats).
//! - **Errors keep the trials.** A trial that returns an error stops the search at once;
//!   [`SearchError::Trial`] carries the error and the partial result.
//! - **Terminates.** Even without the trial cap: every step runs a trial, and each step either
//!   narrows a bracket geometrically or moves a bound past a finite set of tested rates.
//!
//! Long (681 lines of code, 888 of tests): more than half of it is tests on simulated systems.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::gates::Verdict;

/// What one trial established: a verdict on the system under test, or nothing (the trial was
/// invalid: the load generator or the machine, not the system, decided it).
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
            Self::Invalid(why) => write!(f, "invalid (retried): {why}"),
        }
    }
}

/// How to search.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchConfig {
    /// The first rate tried, CPI/s (in the CLI: by default the physical CPI rate).
    pub start_rate: f64,
    /// The relative width `(fail - pass) / pass` at which bisection stops (default 0.02).
    pub tolerance: f64,
    /// K: how many consecutive fresh trials a rate must pass to be sustained (default 3).
    pub confirm: u32,
    /// The highest rate ever offered, CPI/s.
    pub max_rate: f64,
    /// The lowest rate ever offered, CPI/s; positive.
    pub min_rate: f64,
    /// The most trials run; the search stops with [`Outcome::TrialCap`] when it would need
    /// more.
    pub max_trials: usize,
    /// How many invalid trials in a row are retried at one rate (default 3); one more ends
    /// the search as [`Outcome::Unsteady`].
    pub invalid_retries: u32,
    /// How far below a passing rate a failure may lie, as `(pass - fail) / fail`, before the
    /// trials contradict each other and the search ends as [`Outcome::Unsteady`] (default
    /// 0.5: a failure below two thirds of a rate that passed); `None` never ends a search so (the step-down alone decides).
    pub contradiction: Option<f64>,
    /// Whether a failure outside a confirmation run is rechecked at once at the same rate
    /// (default true): one unlucky trial never becomes the upper end of the bracket.
    pub recheck_failures: bool,
}

impl SearchConfig {
    /// The default relative tolerance.
    pub const DEFAULT_TOLERANCE: f64 = 0.02;
    /// The default K of K/K.
    pub const DEFAULT_CONFIRM: u32 = 3;
    /// The default highest rate, CPI/s.
    pub const DEFAULT_MAX_RATE: f64 = 1e6;
    /// The default lowest rate as a fraction of the start rate: ten halvings.
    pub const DEFAULT_MIN_RATE_FRACTION: f64 = 1.0 / 1024.0;
    /// The default trial cap.
    pub const DEFAULT_MAX_TRIALS: usize = 60;
    /// The default number of invalid trials retried in a row.
    pub const DEFAULT_INVALID_RETRIES: u32 = 3;
    /// The default contradiction tolerance.
    pub const DEFAULT_CONTRADICTION: f64 = 0.5;

    /// The defaults around `start_rate`: tolerance 2%, 3/3, rates from `start_rate / 1024` to
    /// 10^6 CPI/s (or `start_rate`, if higher), at most 60 trials, 3 invalid trials retried
    /// in a row, failures rechecked, a failure more than 50% below a pass ends the search as
    /// unsteady.
    pub fn new(start_rate: f64) -> Self {
        Self {
            start_rate,
            tolerance: Self::DEFAULT_TOLERANCE,
            confirm: Self::DEFAULT_CONFIRM,
            max_rate: Self::DEFAULT_MAX_RATE.max(start_rate),
            min_rate: start_rate * Self::DEFAULT_MIN_RATE_FRACTION,
            max_trials: Self::DEFAULT_MAX_TRIALS,
            invalid_retries: Self::DEFAULT_INVALID_RETRIES,
            contradiction: Some(Self::DEFAULT_CONTRADICTION),
            recheck_failures: true,
        }
    }

    /// Checks that the rates are finite with `0 < min_rate <= start_rate <= max_rate`, the
    /// tolerance and the contradiction tolerance are finite and positive, and K is at least 1.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let Self {
            start_rate,
            tolerance,
            confirm,
            max_rate,
            min_rate,
            max_trials: _,
            invalid_retries: _,
            contradiction,
            recheck_failures: _,
        } = *self;
        if !(min_rate.is_finite() && min_rate > 0.0) {
            return Err(ConfigError::MinRate(min_rate));
        }
        if !(max_rate.is_finite() && max_rate >= min_rate) {
            return Err(ConfigError::MaxRate { max_rate, min_rate });
        }
        if !(start_rate >= min_rate && start_rate <= max_rate) {
            return Err(ConfigError::StartRate {
                start_rate,
                min_rate,
                max_rate,
            });
        }
        if !(tolerance.is_finite() && tolerance > 0.0) {
            return Err(ConfigError::Tolerance(tolerance));
        }
        if confirm == 0 {
            return Err(ConfigError::Confirm);
        }
        if let Some(c) = contradiction
            && !(c.is_finite() && c > 0.0)
        {
            return Err(ConfigError::Contradiction(c));
        }
        Ok(())
    }
}

/// A [`SearchConfig`] that cannot be searched.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// `min_rate` is not a positive finite number.
    #[error("the minimum rate must be positive and finite, not {0}")]
    MinRate(f64),
    /// `max_rate` is not finite or is below `min_rate`.
    #[error("the maximum rate must be finite and at least the minimum {min_rate}, not {max_rate}")]
    MaxRate {
        /// The maximum rate given.
        max_rate: f64,
        /// The minimum rate given.
        min_rate: f64,
    },
    /// `start_rate` lies outside `[min_rate, max_rate]`.
    #[error("the start rate {start_rate} lies outside [{min_rate}, {max_rate}]")]
    StartRate {
        /// The start rate given.
        start_rate: f64,
        /// The minimum rate given.
        min_rate: f64,
        /// The maximum rate given.
        max_rate: f64,
    },
    /// The tolerance is not a positive finite number.
    #[error("the tolerance must be positive and finite, not {0}")]
    Tolerance(f64),
    /// K is zero.
    #[error("confirmation needs at least one trial")]
    Confirm,
    /// The contradiction tolerance is not a positive finite number.
    #[error("the contradiction tolerance must be positive and finite, not {0}")]
    Contradiction(f64),
}

/// Why the search chose a trial's rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// The start rate, or a doubling while nothing has failed.
    ProbeUp,
    /// A halving while nothing has passed.
    ProbeDown,
    /// A midpoint between the highest pass and the lowest failure.
    Bisect,
    /// One trial of a K-trial confirmation run: at the result, or, once a confirmation has
    /// failed, at every rate tried after it.
    Confirm,
    /// A second trial at a rate whose probe or bisection trial just failed: the failure
    /// bounds the search only if this fails too.
    Recheck,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::ProbeUp => "probe-up",
            Self::ProbeDown => "probe-down",
            Self::Bisect => "bisect",
            Self::Confirm => "confirm",
            Self::Recheck => "recheck",
        })
    }
}

/// One trial the search ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrialRecord {
    /// The offered rate, CPI/s.
    pub rate: f64,
    /// Why this rate was chosen.
    pub phase: Phase,
    /// What the trial returned.
    pub judgement: Judgement,
}

impl TrialRecord {
    /// Whether the trial was judged and passed.
    pub fn passed(&self) -> bool {
        self.judgement.passed()
    }

    /// Whether the trial was judged and failed.
    pub fn failed(&self) -> bool {
        self.judgement.failed()
    }
}

/// How the search ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// A rate passed K/K with a tested failure within the tolerance above it.
    Converged,
    /// Nothing failed up to `max_rate`, which passed K/K.
    PassesEverywhere {
        /// The highest rate offered.
        max_rate: f64,
    },
    /// No rate from `min_rate` up was sustained: `min_rate` failed and nothing below the
    /// lowest failure passed K/K.
    FailsEverywhere {
        /// The lowest rate offered.
        min_rate: f64,
    },
    /// The trial cap was reached first.
    TrialCap,
    /// The machine, not the system under test, decided: too many invalid trials in a row, or
    /// a failure far below a rate that passed. No rate is reported.
    Unsteady {
        /// What happened, in one sentence.
        reason: String,
    },
    /// A trial returned an error (only in [`SearchError::Trial`]'s partial result).
    Interrupted,
}

impl Outcome {
    /// The outcome's kind as one word (`converged`, `passes_everywhere`, `fails_everywhere`,
    /// `trial_cap`, `unsteady`, `interrupted`), for tables and scripts.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Converged => "converged",
            Self::PassesEverywhere { .. } => "passes_everywhere",
            Self::FailsEverywhere { .. } => "fails_everywhere",
            Self::TrialCap => "trial_cap",
            Self::Unsteady { .. } => "unsteady",
            Self::Interrupted => "interrupted",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Converged => f.write_str("converged"),
            Self::PassesEverywhere { max_rate } => {
                write!(f, "passes everywhere up to the maximum {max_rate} CPI/s")
            }
            Self::FailsEverywhere { min_rate } => {
                write!(f, "fails everywhere down to the minimum {min_rate} CPI/s")
            }
            Self::TrialCap => f.write_str("stopped at the trial cap"),
            Self::Unsteady { reason } => write!(f, "unsteady machine: {reason}"),
            Self::Interrupted => f.write_str("interrupted"),
        }
    }
}

/// What the search found; see the module documentation for its guarantees.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchResult {
    /// The highest rate that passed K/K consecutive confirmation trials, below every failure.
    pub sustained: Option<f64>,
    /// The highest rate below `lowest_fail` at which a trial passed.
    pub highest_pass: Option<f64>,
    /// The lowest rate at which a failure stood (see the module documentation).
    pub lowest_fail: Option<f64>,
    /// Every trial, in the order run.
    pub trials: Vec<TrialRecord>,
    /// How the search ended.
    pub outcome: Outcome,
}

/// Why [`search`] returned no complete result.
#[derive(Debug)]
pub enum SearchError<E> {
    /// The configuration was rejected; no trial ran.
    InvalidConfig(ConfigError),
    /// A trial returned an error, which stopped the search.
    Trial {
        /// The trials before the error and the bounds they establish, with outcome
        /// [`Outcome::Interrupted`].
        partial: Box<SearchResult>,
        /// The trial's error.
        cause: E,
    },
}

impl<E: fmt::Display> fmt::Display for SearchError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidConfig(error) => write!(f, "invalid search configuration: {error}"),
            Self::Trial { partial, cause } => write!(
                f,
                "the search stopped after {} trials: {cause}",
                partial.trials.len()
            ),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for SearchError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::InvalidConfig(error) => Some(error),
            Self::Trial { cause, .. } => Some(cause),
        }
    }
}

/// Searches for the sustained rate, calling `trial(rate, phase)` for each trial.
///
/// The closure runs one trial at `rate` and returns its verdict or [`Judgement`] (a
/// [`Verdict`] converts), or an error that stops the search (Ctrl-C, a runner that cannot
/// continue); the partial result comes back in [`SearchError::Trial`]. A system that fails at
/// a rate for its own reasons (it crashed, it fell behind) should return a failing verdict,
/// not an error; a trial the load generator or the machine decided returns
/// [`Judgement::Invalid`].
pub fn search<E, J, F>(config: &SearchConfig, trial: F) -> Result<SearchResult, SearchError<E>>
where
    J: Into<Judgement>,
    F: FnMut(f64, Phase) -> Result<J, E>,
{
    config.validate().map_err(SearchError::InvalidConfig)?;
    let mut state = Search {
        config,
        trial,
        trials: Vec::new(),
        lowest_fail: None,
        confirmed: None,
        strict: false,
    };
    match state.drive() {
        Ok(outcome) => Ok(state.finish(outcome)),
        Err(Stop::Cap) => Ok(state.finish(Outcome::TrialCap)),
        Err(Stop::Unsteady(reason)) => Ok(state.finish(Outcome::Unsteady { reason })),
        Err(Stop::Trial(cause)) => Err(SearchError::Trial {
            partial: Box::new(state.finish(Outcome::Interrupted)),
            cause,
        }),
    }
}

/// Why the search stopped early.
enum Stop<E> {
    /// The next trial would exceed the cap.
    Cap,
    /// The machine decided the trials, not the system: why.
    Unsteady(String),
    /// A trial returned an error.
    Trial(E),
}

/// What the search does next.
#[derive(Debug)]
enum Step {
    /// One trial.
    Trial(f64, Phase),
    /// A confirmation run of up to K trials.
    Confirm(f64),
    /// Nothing more: the search ended.
    Done(Outcome),
}

/// The search's state: the trials so far and what they established.
struct Search<'c, F> {
    config: &'c SearchConfig,
    trial: F,
    trials: Vec<TrialRecord>,
    /// The lowest rate at which a failure stood (a failed recheck or confirmation trial).
    lowest_fail: Option<f64>,
    /// The highest rate that passed a whole confirmation run.
    confirmed: Option<f64>,
    /// Whether a confirmation run has failed: single passes are no longer trusted.
    strict: bool,
}

impl<F> Search<'_, F> {
    /// Runs steps until one ends the search.
    fn drive<E, J>(&mut self) -> Result<Outcome, Stop<E>>
    where
        J: Into<Judgement>,
        F: FnMut(f64, Phase) -> Result<J, E>,
    {
        loop {
            match self.next_step() {
                Step::Trial(rate, phase) => {
                    self.run(rate, phase)?;
                }
                Step::Confirm(rate) => self.confirm(rate)?,
                Step::Done(outcome) => return Ok(outcome),
            }
        }
    }

    /// The next step, decided from the state alone (see the module documentation).
    fn next_step(&self) -> Step {
        let config = self.config;
        let fail = self.lowest_fail;
        if let Some(confirmed) = self.confirmed {
            return match fail {
                None => Step::Done(Outcome::PassesEverywhere {
                    max_rate: config.max_rate,
                }),
                Some(fail) => match self.midpoint(confirmed, fail) {
                    Some(mid) => Step::Confirm(mid),
                    None => Step::Done(Outcome::Converged),
                },
            };
        }
        match (self.highest_pass(), fail) {
            (None, None) => Step::Trial(config.start_rate, Phase::ProbeUp),
            (Some(pass), None) if pass >= config.max_rate => Step::Confirm(pass),
            (Some(pass), None) => Step::Trial((2.0 * pass).min(config.max_rate), Phase::ProbeUp),
            (None, Some(fail)) if fail <= config.min_rate => Step::Done(Outcome::FailsEverywhere {
                min_rate: config.min_rate,
            }),
            (None, Some(fail)) => {
                let lower = (fail / 2.0).max(config.min_rate);
                if self.strict {
                    Step::Confirm(lower)
                } else {
                    Step::Trial(lower, Phase::ProbeDown)
                }
            }
            // Strict: step down to the highest rate that passed once, and confirm it.
            (Some(pass), Some(_)) if self.strict => Step::Confirm(pass),
            (Some(pass), Some(fail)) => match self.midpoint(pass, fail) {
                Some(mid) => Step::Trial(mid, Phase::Bisect),
                None => Step::Confirm(pass),
            },
        }
    }

    /// The geometric midpoint of `pass < fail`, or `None` when they are within the tolerance
    /// (or no float lies strictly between them).
    fn midpoint(&self, pass: f64, fail: f64) -> Option<f64> {
        if (fail - pass) / pass <= self.config.tolerance {
            return None;
        }
        // pass * sqrt(fail / pass) rather than sqrt(pass * fail): no overflow.
        let mid = pass * (fail / pass).sqrt();
        (mid > pass && mid < fail).then_some(mid)
    }

    /// The highest rate at which a trial passed, below the lowest failure if there is one.
    fn highest_pass(&self) -> Option<f64> {
        self.trials
            .iter()
            .filter(|t| t.passed() && self.lowest_fail.is_none_or(|fail| t.rate < fail))
            .map(|t| t.rate)
            .reduce(f64::max)
    }

    /// Runs one trial at `rate`, retrying invalid ones and rechecking a failure outside a
    /// confirmation run; whether the rate passed. Only a failure that stands (its recheck
    /// failed too, or it was a confirmation trial) bounds the search.
    fn run<E, J>(&mut self, rate: f64, phase: Phase) -> Result<bool, Stop<E>>
    where
        J: Into<Judgement>,
        F: FnMut(f64, Phase) -> Result<J, E>,
    {
        if self.attempt(rate, phase)? {
            return Ok(true);
        }
        if self.config.recheck_failures
            && phase != Phase::Confirm
            && self.attempt(rate, Phase::Recheck)?
        {
            return Ok(true);
        }
        let contradicted = self.contradicted(rate);
        self.lowest_fail = Some(self.lowest_fail.map_or(rate, |fail| fail.min(rate)));
        if let Some(pass) = contradicted {
            return Err(Stop::Unsteady(format!(
                "a trial failed at {rate:.3} CPI/s after one passed at {pass:.3} CPI/s, {:.0}% higher",
                (pass - rate) / rate * 100.0
            )));
        }
        Ok(false)
    }

    /// Runs one judged trial at `rate` and records it, retrying invalid ones; whether it
    /// passed.
    fn attempt<E, J>(&mut self, rate: f64, phase: Phase) -> Result<bool, Stop<E>>
    where
        J: Into<Judgement>,
        F: FnMut(f64, Phase) -> Result<J, E>,
    {
        let mut invalid = 0;
        loop {
            if self.trials.len() >= self.config.max_trials {
                return Err(Stop::Cap);
            }
            let judgement: Judgement = (self.trial)(rate, phase).map_err(Stop::Trial)?.into();
            let passed = judgement.passed();
            let why = judgement.invalid().map(str::to_string);
            self.trials.push(TrialRecord {
                rate,
                phase,
                judgement,
            });
            let Some(why) = why else {
                return Ok(passed);
            };
            invalid += 1;
            if invalid > self.config.invalid_retries {
                return Err(Stop::Unsteady(format!(
                    "{invalid} invalid trials in a row at {rate:.3} CPI/s, the last: {why}"
                )));
            }
        }
    }

    /// The highest rate that passed so far, if a failure at `rate` contradicts it: it lies
    /// more than the contradiction tolerance above `rate`.
    fn contradicted(&self, rate: f64) -> Option<f64> {
        let tolerance = self.config.contradiction?;
        self.trials
            .iter()
            .filter(|t| t.passed() && (t.rate - rate) / rate > tolerance)
            .map(|t| t.rate)
            .reduce(f64::max)
    }

    /// Runs up to K fresh trials at `rate`, stopping at the first failure; a full pass makes
    /// `rate` confirmed, a failure makes the search strict.
    fn confirm<E, J>(&mut self, rate: f64) -> Result<(), Stop<E>>
    where
        J: Into<Judgement>,
        F: FnMut(f64, Phase) -> Result<J, E>,
    {
        for _ in 0..self.config.confirm {
            if !self.run(rate, Phase::Confirm)? {
                self.strict = true;
                return Ok(());
            }
        }
        self.confirmed = Some(rate);
        Ok(())
    }

    /// The result, ended by `outcome`.
    fn finish(self, outcome: Outcome) -> SearchResult {
        // An unsteady machine's search reports its bracket, never a rate.
        let sustained = match outcome {
            Outcome::Unsteady { .. } => None,
            _ => self.confirmed,
        };
        SearchResult {
            sustained,
            highest_pass: self.highest_pass(),
            lowest_fail: self.lowest_fail,
            trials: self.trials,
            outcome,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::convert::Infallible;
    use std::time::Duration;

    use super::*;
    use crate::rate::gates::{Failure, Gates, LatencyBudget, TrialMeasurement, judge};

    /// xorshift64*: a tiny, seeded, deterministic generator for simulated noise.
    struct XorShift(u64);

    impl XorShift {
        fn new(seed: u64) -> Self {
            // Any non-zero state works; mix the seed so that small seeds differ at once.
            Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
        }

        fn next_u64(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }

        /// Uniform in [-1, 1).
        fn symmetric(&mut self) -> f64 {
            let unit = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
            2.0 * unit - 1.0
        }
    }

    fn pass_if(passed: bool, rate: f64) -> Verdict {
        if passed {
            Verdict::pass()
        } else {
            Verdict::from_failures(vec![Failure::RateShort {
                processed: 0.9 * rate,
                wanted: 0.99 * rate,
            }])
        }
    }

    /// The defaults from 0.5 CPI/s up, without the contradiction rule, so that the step-down
    /// logic is tested alone; the rule's own tests turn it on.
    fn config(start_rate: f64) -> SearchConfig {
        SearchConfig {
            min_rate: 0.5,
            contradiction: None,
            recheck_failures: false,
            ..SearchConfig::new(start_rate)
        }
    }

    /// The failures that bound the search: every failed trial but one followed (invalid
    /// trials aside) by a passing recheck at its rate.
    fn bounding_failures(r: &SearchResult) -> Vec<&TrialRecord> {
        let judged: Vec<&TrialRecord> = r
            .trials
            .iter()
            .filter(|t| t.judgement.verdict().is_some())
            .collect();
        judged
            .iter()
            .enumerate()
            .filter(|(i, t)| {
                t.failed()
                    && !judged.get(i + 1).is_some_and(|next| {
                        next.phase == Phase::Recheck && next.rate == t.rate && next.passed()
                    })
            })
            .map(|(_, t)| *t)
            .collect()
    }

    /// Runs a search on a simulated system that cannot fail to run.
    fn simulate(config: &SearchConfig, mut system: impl FnMut(f64) -> bool) -> SearchResult {
        let result = search(config, |rate, _| {
            Ok::<_, Infallible>(pass_if(system(rate), rate))
        });
        match result {
            Ok(result) => {
                check_guarantees(config, &result);
                result
            }
            Err(e) => panic!("{e}"),
        }
    }

    /// The module's guarantees, checked on any result.
    fn check_guarantees(config: &SearchConfig, r: &SearchResult) {
        let k = config.confirm as usize;
        let describe = || format!("{:?} after {:?}", r.outcome, rates(r));
        assert!(r.trials.len() <= config.max_trials, "{}", describe());
        for t in &r.trials {
            assert!(
                t.rate.is_finite() && t.rate >= config.min_rate && t.rate <= config.max_rate,
                "rate {} out of range: {}",
                t.rate,
                describe()
            );
        }
        if let Some(s) = r.sustained {
            let judged: Vec<_> = r
                .trials
                .iter()
                .filter(|t| t.judgement.verdict().is_some())
                .collect();
            let kk = judged.windows(k).any(|w| {
                w.iter()
                    .all(|t| t.rate == s && t.phase == Phase::Confirm && t.passed())
            });
            assert!(kk, "{s} never passed K/K: {}", describe());
            for t in bounding_failures(r) {
                assert!(
                    t.rate > s,
                    "failure at {} <= sustained {s}: {}",
                    t.rate,
                    describe()
                );
            }
            assert_eq!(r.highest_pass, Some(s), "{}", describe());
        }
        if let Some(f) = r.lowest_fail {
            let bounding = bounding_failures(r);
            assert!(bounding.iter().any(|t| t.rate == f), "{}", describe());
            assert!(bounding.iter().all(|t| t.rate >= f), "{}", describe());
        }
        if let Some(p) = r.highest_pass {
            assert!(r.trials.iter().any(|t| t.rate == p && t.passed()));
            assert!(r.lowest_fail.is_none_or(|f| p < f), "{}", describe());
        }
        match &r.outcome {
            Outcome::Converged => {
                let s = r.sustained.expect("converged without a sustained rate");
                let f = r.lowest_fail.expect("converged without a failure");
                assert!(
                    (f - s) / s <= config.tolerance * (1.0 + 1e-12),
                    "{}",
                    describe()
                );
            }
            Outcome::PassesEverywhere { max_rate } => {
                assert_eq!(*max_rate, config.max_rate);
                assert_eq!(r.sustained, Some(*max_rate));
                assert_eq!(r.lowest_fail, None);
            }
            Outcome::FailsEverywhere { min_rate } => {
                assert_eq!(*min_rate, config.min_rate);
                assert_eq!(r.sustained, None);
                assert_eq!(r.highest_pass, None);
                assert_eq!(r.lowest_fail, Some(*min_rate));
            }
            Outcome::TrialCap => assert_eq!(r.trials.len(), config.max_trials),
            Outcome::Unsteady { reason } => {
                assert_eq!(r.sustained, None, "an unsteady search reports no rate");
                assert!(!reason.is_empty());
            }
            Outcome::Interrupted => panic!("an Ok result is never interrupted"),
        }
    }

    fn rates(r: &SearchResult) -> Vec<(f64, Phase, bool)> {
        r.trials
            .iter()
            .map(|t| ((t.rate * 100.0).round() / 100.0, t.phase, t.passed()))
            .collect()
    }

    #[test]
    fn converges_within_the_tolerance_of_a_known_capacity() {
        for capacity in [3.7, 100.0, 1234.5, 99_999.0] {
            for start in [1.0, 50.0, 5000.0] {
                for confirm in [1, 3] {
                    let cfg = SearchConfig {
                        confirm,
                        ..config(start)
                    };
                    let r = simulate(&cfg, |rate| rate <= capacity);
                    assert_eq!(r.outcome, Outcome::Converged, "{:?}", rates(&r));
                    let s = r.sustained.expect("sustained");
                    assert!(
                        (capacity / (1.0 + cfg.tolerance)..=capacity).contains(&s),
                        "capacity {capacity}, start {start}: {s}"
                    );
                    let f = r.lowest_fail.expect("a tested failure");
                    assert!(f > capacity);
                    // A noiseless system confirms at once: the last K trials are the run.
                    let last = &r.trials[r.trials.len() - confirm as usize..];
                    assert!(
                        last.iter()
                            .all(|t| t.rate == s && t.phase == Phase::Confirm)
                    );
                    assert!(r.trials.len() < 40, "{:?}", rates(&r));
                }
            }
        }
    }

    #[test]
    fn phases_follow_probe_bisect_confirm() {
        let r = simulate(&config(100.0), |rate| rate <= 300.0);
        let phases: Vec<_> = r.trials.iter().map(|t| t.phase).collect();
        assert_eq!(
            phases[..3],
            [Phase::ProbeUp, Phase::ProbeUp, Phase::ProbeUp],
            "{:?}",
            rates(&r)
        );
        assert_eq!(
            (r.trials[0].rate, r.trials[1].rate, r.trials[2].rate),
            (100.0, 200.0, 400.0)
        );
        let bisect = &phases[3..phases.len() - 3];
        assert!(!bisect.is_empty() && bisect.iter().all(|p| *p == Phase::Bisect));
        assert!(
            phases[phases.len() - 3..]
                .iter()
                .all(|p| *p == Phase::Confirm)
        );

        let r = simulate(&config(1000.0), |rate| rate <= 300.0);
        assert_eq!(
            rates(&r)[..3],
            [
                (1000.0, Phase::ProbeUp, false),
                (500.0, Phase::ProbeDown, false),
                (250.0, Phase::ProbeDown, true)
            ]
        );
    }

    #[test]
    fn converges_on_a_noisy_system_and_confirms_k_of_k() {
        let capacity = 500.0;
        let noise = 0.01;
        let mut trials = Vec::new();
        for seed in 0..300 {
            for start in [100.0, 2000.0] {
                let cfg = config(start);
                let mut rng = XorShift::new(seed);
                let r = simulate(&cfg, |rate| {
                    rate <= capacity * (1.0 + noise * rng.symmetric())
                });
                assert_eq!(
                    r.outcome,
                    Outcome::Converged,
                    "seed {seed}: {:?}",
                    rates(&r)
                );
                let s = r.sustained.expect("sustained");
                // It passed at least once, so it is below the noisiest capacity; its tested
                // failure lies above the least capacity and within the tolerance of it.
                let low = capacity * (1.0 - noise) / (1.0 + cfg.tolerance);
                let high = capacity * (1.0 + noise);
                assert!(
                    (low..=high).contains(&s),
                    "seed {seed}: {s} {:?}",
                    rates(&r)
                );
                trials.push(r.trials.len());
            }
        }
        trials.sort_unstable();
        let worst = trials[trials.len() - 1];
        assert!(worst < 40, "worst search took {worst} trials");
    }

    #[test]
    fn a_system_failing_everywhere_is_reported_so() {
        // With rechecks, each rate is tried twice on the way down.
        let rechecked = simulate(
            &SearchConfig {
                min_rate: 1.0,
                ..SearchConfig::new(100.0)
            },
            |_| false,
        );
        assert_eq!(
            rechecked.outcome,
            Outcome::FailsEverywhere { min_rate: 1.0 }
        );
        assert_eq!(rechecked.trials.len(), 16);
        let cfg = SearchConfig {
            min_rate: 1.0,
            ..config(100.0)
        };
        let r = simulate(&cfg, |_| false);
        assert_eq!(r.outcome, Outcome::FailsEverywhere { min_rate: 1.0 });
        let offered: Vec<_> = r.trials.iter().map(|t| t.rate).collect();
        assert_eq!(offered, [100.0, 50.0, 25.0, 12.5, 6.25, 3.125, 1.5625, 1.0]);
        assert!(r.trials[1..].iter().all(|t| t.phase == Phase::ProbeDown));

        // Starting at the minimum: one trial.
        let cfg = SearchConfig {
            min_rate: 100.0,
            ..cfg
        };
        let r = simulate(&cfg, |_| false);
        assert_eq!(r.outcome, Outcome::FailsEverywhere { min_rate: 100.0 });
        assert_eq!(r.trials.len(), 1);
    }

    #[test]
    fn a_system_passing_everywhere_stops_at_the_maximum() {
        let cfg = SearchConfig {
            max_rate: 1000.0,
            ..config(100.0)
        };
        let r = simulate(&cfg, |_| true);
        assert_eq!(r.outcome, Outcome::PassesEverywhere { max_rate: 1000.0 });
        let offered: Vec<_> = r.trials.iter().map(|t| (t.rate, t.phase)).collect();
        assert_eq!(
            offered,
            [
                (100.0, Phase::ProbeUp),
                (200.0, Phase::ProbeUp),
                (400.0, Phase::ProbeUp),
                (800.0, Phase::ProbeUp),
                (1000.0, Phase::ProbeUp),
                (1000.0, Phase::Confirm),
                (1000.0, Phase::Confirm),
                (1000.0, Phase::Confirm),
            ]
        );

        // Starting at the maximum: the probe trial and the confirmation run.
        let cfg = SearchConfig {
            start_rate: 1000.0,
            ..cfg
        };
        let r = simulate(&cfg, |_| true);
        assert_eq!(r.outcome, Outcome::PassesEverywhere { max_rate: 1000.0 });
        assert_eq!(r.trials.len(), 4);
    }

    /// Passes below `low`; in `[low, high)` passes then fails alternately (per rate, or
    /// across all rates in the band); fails from `high` up.
    fn bistable(low: f64, high: f64, per_rate: bool) -> impl FnMut(f64) -> bool {
        let mut calls: HashMap<u64, u32> = HashMap::new();
        let mut band_calls = 0u32;
        move |rate| {
            if rate < low {
                return true;
            }
            if rate >= high {
                return false;
            }
            let n = if per_rate {
                calls.entry(rate.to_bits()).or_default()
            } else {
                &mut band_calls
            };
            *n += 1;
            *n % 2 == 1
        }
    }

    #[test]
    fn a_bistable_system_is_sustained_only_below_its_band() {
        for per_rate in [true, false] {
            for start in [10.0, 100.0, 115.0, 300.0] {
                let cfg = config(start);
                let r = simulate(&cfg, bistable(100.0, 150.0, per_rate));
                assert_eq!(r.outcome, Outcome::Converged, "{:?}", rates(&r));
                let s = r.sustained.expect("sustained");
                assert!(
                    (100.0 / (1.0 + cfg.tolerance)..100.0).contains(&s),
                    "per rate {per_rate}, start {start}: {s} {:?}",
                    rates(&r)
                );
                // Single passes in the band were seen, and are not the answer.
                assert!(r.trials.iter().any(|t| t.rate >= 100.0 && t.passed()));
                assert!(
                    r.trials.len() <= 45,
                    "{} trials: {:?}",
                    r.trials.len(),
                    rates(&r)
                );
            }
        }
    }

    #[test]
    fn a_failed_confirmation_at_the_maximum_steps_down() {
        let cfg = SearchConfig {
            max_rate: 1000.0,
            ..config(100.0)
        };
        let r = simulate(&cfg, bistable(900.0, f64::INFINITY, true));
        assert_eq!(r.outcome, Outcome::Converged, "{:?}", rates(&r));
        let s = r.sustained.expect("sustained");
        assert!((900.0 / 1.02..900.0).contains(&s), "{s}");
    }

    #[test]
    fn a_system_that_never_passes_twice_is_never_sustained() {
        let mut seen = HashMap::new();
        let cfg = config(100.0);
        let r = simulate(&cfg, |rate: f64| {
            let n: &mut u32 = seen.entry(rate.to_bits()).or_default();
            *n += 1;
            *n == 1
        });
        assert_eq!(
            r.outcome,
            Outcome::FailsEverywhere { min_rate: 0.5 },
            "{:?}",
            rates(&r)
        );
        assert_eq!(r.sustained, None);
    }

    #[test]
    fn the_trial_cap_stops_the_search() {
        let cfg = SearchConfig {
            max_trials: 4,
            ..config(100.0)
        };
        let r = simulate(&cfg, |rate| rate <= 1000.0);
        assert_eq!(r.outcome, Outcome::TrialCap);
        assert_eq!(r.trials.len(), 4);
        assert_eq!(r.sustained, None);
        assert_eq!(r.highest_pass, Some(800.0));
        assert_eq!(r.lowest_fail, None);

        // The cap can fall inside a confirmation run.
        let mut calls = 0;
        let cfg = SearchConfig {
            max_trials: 2,
            ..SearchConfig::new(1e6)
        };
        let r = simulate(&cfg, |_| {
            calls += 1;
            true
        });
        assert_eq!(
            (r.outcome, r.trials.len(), r.sustained),
            (Outcome::TrialCap, 2, None)
        );
        assert_eq!(calls, 2);

        let cfg = SearchConfig {
            max_trials: 0,
            ..config(100.0)
        };
        let r = simulate(&cfg, |_| true);
        assert!(r.trials.is_empty());
    }

    #[derive(Debug, PartialEq, thiserror::Error)]
    #[error("interrupted by the user")]
    struct Interrupted;

    #[test]
    fn a_trial_error_stops_the_search_and_keeps_the_trials() {
        let mut calls = 0;
        let mut asked = Vec::new();
        let result = search(&config(100.0), |rate, phase| {
            calls += 1;
            asked.push((rate, phase));
            if calls == 6 {
                return Err(Interrupted);
            }
            Ok(pass_if(rate <= 300.0, rate))
        });
        let Err(SearchError::Trial { partial, cause }) = result else {
            panic!("expected a trial error, got {result:?}");
        };
        assert_eq!(cause, Interrupted);
        assert_eq!(partial.outcome, Outcome::Interrupted);
        assert_eq!(partial.trials.len(), 5);
        // The records match what the closure was asked, index for index.
        let recorded: Vec<_> = partial.trials.iter().map(|t| (t.rate, t.phase)).collect();
        assert_eq!(recorded, asked[..5]);
        // 100 and 200 pass, 400 fails, then bisection: 283 passes, 336 fails.
        let pass = 200.0 * 2f64.sqrt();
        let fail = pass * (400.0 / pass).sqrt();
        assert_eq!(
            recorded[3..],
            [(pass, Phase::Bisect), (fail, Phase::Bisect)]
        );
        assert_eq!(partial.highest_pass, Some(pass));
        assert_eq!(partial.lowest_fail, Some(fail));
        assert_eq!(partial.sustained, None);
        let error = SearchError::Trial { partial, cause };
        assert_eq!(
            error.to_string(),
            "the search stopped after 5 trials: interrupted by the user"
        );
        assert!(std::error::Error::source(&error).is_some());
    }

    #[test]
    fn invalid_configurations_run_no_trial() {
        let good = config(100.0);
        assert_eq!(good.validate(), Ok(()));
        let cases = [
            SearchConfig {
                min_rate: 0.0,
                ..good
            },
            SearchConfig {
                min_rate: f64::NAN,
                ..good
            },
            SearchConfig {
                max_rate: f64::INFINITY,
                ..good
            },
            SearchConfig {
                max_rate: 0.1,
                ..good
            },
            SearchConfig {
                start_rate: 0.1,
                ..good
            },
            SearchConfig {
                start_rate: 2e6,
                ..good
            },
            SearchConfig {
                start_rate: f64::NAN,
                ..good
            },
            SearchConfig {
                tolerance: 0.0,
                ..good
            },
            SearchConfig {
                tolerance: f64::NAN,
                ..good
            },
            SearchConfig { confirm: 0, ..good },
        ];
        for cfg in cases {
            let mut ran = false;
            let result = search(&cfg, |_, _| {
                ran = true;
                Ok::<_, Infallible>(Verdict::pass())
            });
            assert!(
                matches!(result, Err(SearchError::InvalidConfig(_))),
                "{cfg:?}"
            );
            assert!(!ran);
        }
        assert_eq!(SearchConfig::new(5e6).validate(), Ok(()));
    }

    /// A queue that serves `capacity` CPI/s: below it every frame completes within its
    /// service time; above it the backlog grows until frames drop.
    fn queue(capacity: f64, rate: f64) -> TrialMeasurement {
        let window = Duration::from_secs(5);
        let sent = (rate * window.as_secs_f64()).round() as u64;
        let service = Duration::from_secs_f64(0.8 / capacity);
        if rate <= capacity {
            TrialMeasurement {
                offered_rate: rate,
                frames_sent: sent,
                frames_completed: sent,
                partial_frames: 0,
                dropped_frames: 0,
                frames_failed_verification: 0,
                processed_rate: rate,
                post_cpi_p99: service,
                post_cpi_trend: 0.0,
                window,
            }
        } else {
            let completed = (capacity * window.as_secs_f64()).round() as u64;
            TrialMeasurement {
                offered_rate: rate,
                frames_sent: sent,
                frames_completed: completed,
                partial_frames: 0,
                dropped_frames: sent - completed,
                frames_failed_verification: 0,
                processed_rate: capacity,
                post_cpi_p99: 4 * service,
                post_cpi_trend: 1.0 - capacity / rate,
                window,
            }
        }
    }

    #[test]
    fn the_search_and_the_gates_find_a_queues_capacity() {
        let cfg = config(10.0);
        let gates = Gates::new(LatencyBudget::OneCpiPeriod);
        let result = search(&cfg, |rate, _| {
            Ok::<_, Infallible>(judge(&queue(640.0, rate), &gates))
        });
        let Ok(r) = result else {
            panic!("{result:?}");
        };
        check_guarantees(&cfg, &r);
        let s = r.sustained.expect("sustained");
        assert!((640.0 / 1.02..=640.0).contains(&s), "{s}");
        let failed = r
            .trials
            .iter()
            .find_map(|t| t.judgement.verdict().filter(|v| !v.is_pass()))
            .expect("a failure");
        assert!(failed.failures.len() >= 3, "{failed}");
    }

    /// A system of capacity `capacity` driven by a load generator that misses its schedule on
    /// a seeded fraction `miss` of trials: those come back invalid.
    fn with_a_late_sender(
        capacity: f64,
        miss: f64,
        seed: u64,
    ) -> impl FnMut(f64, Phase) -> Result<Judgement, Infallible> {
        let mut rng = XorShift::new(seed);
        move |rate, _| {
            Ok(if rng.symmetric().abs() < miss {
                Judgement::Invalid("the sender fell 4.1 ms behind its schedule".into())
            } else {
                pass_if(rate <= capacity, rate).into()
            })
        }
    }

    #[test]
    fn a_late_sender_is_retried_and_converges_as_a_quiet_one() {
        // One trial in five is invalid; 8 retries make an unsteady end (0.2^9) improbable.
        let cfg = SearchConfig {
            min_rate: 0.5,
            invalid_retries: 8,
            ..SearchConfig::new(100.0)
        };
        let quiet = simulate(&cfg, |rate| rate <= 640.0);
        let mut invalid_seen = 0;
        for seed in 0..200 {
            let r = search(&cfg, with_a_late_sender(640.0, 0.2, seed)).expect("no error");
            check_guarantees(&cfg, &r);
            assert_eq!(
                r.outcome,
                Outcome::Converged,
                "seed {seed}: {:?}",
                rates(&r)
            );
            assert_eq!(r.sustained, quiet.sustained, "seed {seed}");
            assert_eq!(r.lowest_fail, quiet.lowest_fail, "seed {seed}");
            // The judged trials are the quiet search's, in order: invalid ones only repeat.
            let judged: Vec<_> = r
                .trials
                .iter()
                .filter(|t| t.judgement.verdict().is_some())
                .map(|t| (t.rate, t.phase, t.passed()))
                .collect();
            let quiet_trials: Vec<_> = quiet
                .trials
                .iter()
                .map(|t| (t.rate, t.phase, t.passed()))
                .collect();
            assert_eq!(judged, quiet_trials, "seed {seed}");
            invalid_seen += r.trials.len() - judged.len();
        }
        assert!(
            invalid_seen > 100,
            "the simulated sender missed: {invalid_seen}"
        );
    }

    #[test]
    fn too_many_invalid_trials_in_a_row_end_the_search_as_unsteady() {
        let cfg = SearchConfig {
            min_rate: 0.5,
            ..SearchConfig::new(100.0)
        };
        let mut calls = 0;
        let r = search(&cfg, |rate, _| {
            calls += 1;
            Ok::<_, Infallible>(if calls <= 2 {
                pass_if(true, rate).into()
            } else {
                Judgement::Invalid("the sender was descheduled for 30 ms".into())
            })
        })
        .expect("no error");
        check_guarantees(&cfg, &r);
        let Outcome::Unsteady { reason } = &r.outcome else {
            panic!("{:?}", r.outcome);
        };
        assert!(
            reason.starts_with("4 invalid trials in a row at 400.000 CPI/s")
                && reason.ends_with("descheduled for 30 ms"),
            "{reason}"
        );
        // Two judged passes, then 1 + 3 retries at 400; the bracket is kept, no rate.
        assert_eq!(r.trials.len(), 6);
        assert_eq!((r.highest_pass, r.sustained), (Some(200.0), None));
        assert!(
            r.outcome
                .to_string()
                .starts_with("unsteady machine: 4 invalid")
        );
    }

    #[test]
    fn a_machine_that_turns_slow_mid_search_ends_unsteady_not_with_a_low_rate() {
        // Capacity 618 CPI/s, until the machine stalls from the 6th trial on and everything
        // fails, down to 1 CPI/s (issue 14's second search).
        let cfg = SearchConfig {
            min_rate: 0.5,
            ..SearchConfig::new(156.25)
        };
        let mut calls = 0;
        let r = simulate(&cfg, |rate| {
            calls += 1;
            calls < 6 && rate <= 618.0
        });
        let Outcome::Unsteady { reason } = &r.outcome else {
            panic!("{:?} after {:?}", r.outcome, rates(&r));
        };
        assert_eq!(r.sustained, None);
        assert!(reason.contains("after one passed at"), "{reason}");
        // It stopped at the first contradiction: never below 1/(1 + the tolerance) of the highest pass.
        let highest = r
            .trials
            .iter()
            .filter(|t| t.passed())
            .map(|t| t.rate)
            .reduce(f64::max)
            .expect("passes before the stall");
        assert!(
            r.trials
                .iter()
                .all(
                    |t| t.rate * (1.0 + SearchConfig::DEFAULT_CONTRADICTION) >= highest
                        || t.passed()
                        || t.rate == r.trials.last().unwrap().rate
                ),
            "{:?}",
            rates(&r)
        );
        assert!(r.trials.len() <= 20, "{:?}", rates(&r));
        // Without the rule, the same trials step down to a rate far below ones that passed.
        let mut calls = 0;
        let lenient = SearchConfig {
            contradiction: None,
            ..cfg
        };
        let r = simulate(&lenient, |rate| {
            calls += 1;
            calls < 6 && rate <= 618.0
        });
        assert!(r.sustained.is_none_or(|s| s < 100.0), "{:?}", rates(&r));
    }

    #[test]
    fn noise_of_a_few_percent_never_reads_as_a_contradiction() {
        for seed in 0..300 {
            let cfg = SearchConfig {
                min_rate: 0.5,
                ..SearchConfig::new(100.0)
            };
            let mut rng = XorShift::new(seed);
            let r = simulate(&cfg, |rate| rate <= 500.0 * (1.0 + 0.05 * rng.symmetric()));
            assert_eq!(
                r.outcome,
                Outcome::Converged,
                "seed {seed}: {:?}",
                rates(&r)
            );
        }
    }

    #[test]
    fn a_system_that_never_passes_twice_is_unsteady_by_default() {
        let mut seen = HashMap::new();
        let cfg = SearchConfig {
            min_rate: 0.5,
            ..SearchConfig::new(100.0)
        };
        let r = simulate(&cfg, |rate: f64| {
            let n: &mut u32 = seen.entry(rate.to_bits()).or_default();
            *n += 1;
            *n == 1
        });
        assert_eq!(r.outcome.kind(), "unsteady", "{:?}", rates(&r));
        assert_eq!(r.sustained, None);
    }

    #[test]
    fn one_unlucky_failure_is_rechecked_and_never_becomes_the_bracket() {
        // Capacity 460 CPI/s, and one outlier: the first trial at 312.5 fails (a stall of the
        // machine), as in a search of issue 14 that ended at 309 without a recheck.
        let run = |recheck_failures| {
            let cfg = SearchConfig {
                recheck_failures,
                ..config(156.25)
            };
            let mut outlier = true;
            simulate(&cfg, move |rate| {
                if rate == 312.5 && std::mem::take(&mut outlier) {
                    return false;
                }
                rate <= 460.0
            })
        };
        let without = run(false);
        let s = without.sustained.expect("sustained");
        assert!(
            s < 312.5,
            "without a recheck the outlier is the bracket: {s}"
        );
        let with = run(true);
        assert_eq!(with.outcome, Outcome::Converged, "{:?}", rates(&with));
        let s = with.sustained.expect("sustained");
        assert!(
            (460.0 / 1.02..=460.0).contains(&s),
            "{s} {:?}",
            rates(&with)
        );
        assert_eq!(
            rates(&with)[1..3],
            [
                (312.5, Phase::ProbeUp, false),
                (312.5, Phase::Recheck, true)
            ]
        );
        // Every standing failure was rechecked: its recheck failed too.
        let failed_rechecks = with
            .trials
            .iter()
            .filter(|t| t.phase == Phase::Recheck && t.failed())
            .count();
        let failed_probes = with
            .trials
            .iter()
            .filter(|t| matches!(t.phase, Phase::ProbeUp | Phase::Bisect) && t.failed())
            .count();
        assert_eq!(failed_rechecks + 1, failed_probes, "{:?}", rates(&with));
    }

    #[test]
    fn rechecked_searches_keep_every_guarantee_on_noisy_systems() {
        for seed in 0..200 {
            let cfg = SearchConfig {
                recheck_failures: true,
                ..config(100.0)
            };
            let mut rng = XorShift::new(seed);
            let r = simulate(&cfg, |rate| rate <= 500.0 * (1.0 + 0.03 * rng.symmetric()));
            assert_eq!(
                r.outcome,
                Outcome::Converged,
                "seed {seed}: {:?}",
                rates(&r)
            );
            let s = r.sustained.unwrap();
            assert!(
                (500.0 * 0.97 / 1.02..=500.0 * 1.03).contains(&s),
                "seed {seed}: {s}"
            );
            assert!(r.trials.len() < 50, "seed {seed}: {}", r.trials.len());
        }
    }

    #[test]
    fn a_contradiction_tolerance_must_be_positive() {
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let cfg = SearchConfig {
                contradiction: Some(bad),
                ..SearchConfig::new(100.0)
            };
            assert!(
                matches!(cfg.validate(), Err(ConfigError::Contradiction(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn results_serialize() {
        let r = simulate(&config(100.0), |rate| rate <= 150.0);
        let json = serde_json::to_string(&r).expect("serialize");
        assert!(json.contains("\"phase\":\"probe-up\""), "{json}");
        assert!(json.contains("\"outcome\":\"converged\""), "{json}");
        let back: SearchResult = serde_json::from_str(&json).expect("deserialize");
        assert_eq!(back, r);
    }
}

//! The search for the sustained rate (`kplace bisect-rate`), after RFC 9971, Multiple Loss
//! Ratio Search (MLRsearch): several goals answered by one search, each load classified by the
//! durations of its high-loss and low-loss trials, so that a noisy machine asks for more
//! evidence instead of ending the search. docs/bisect-rate.md explains how a result is read.
//!
//! A [`Goal`] states what "sustained" means: a trial is *high-loss* when the fraction of its
//! frames lost (or partial, unverified, over the latency budget) exceeds the goal's loss
//! ratio; a load meets the goal when high-loss trials take at most the goal's *exceed ratio*
//! of its *duration sum* of full-length trials. [`classify`] decides a load, for one goal, as
//! a lower bound, an upper bound or undecided: decided only once no further trial could change
//! it (the missing duration counted as high-loss for a lower bound, as low-loss for an upper
//! bound). Each goal is searched in two stages: a coarse one where one short trial decides a
//! load, at four times the width, then the final one with full-length trials, which starts
//! from the coarse bounds (and never returns to the coarse stage once it has begun).
//! Short trials count as RFC 9971 has it: a short high-loss trial is evidence of loss, a short
//! low-loss trial only offsets short high-loss ones.
//!
//! [`Search`] is the planner: [`Search::next`] says which trial to run (load, duration, goal),
//! [`Search::record`] takes what it measured. It runs nothing, has no clock and no I/O, so
//! the real trial runner interleaves several searches trial by trial (the machine's drift
//! then hits every system alike) and the tests drive it on simulated systems. [`search`]
//! drives one search through a closure.
//!
//! Guarantees of a [`SearchResult`]:
//!
//! - **A number or a reason, never "unsteady".** Every goal ends with its relevant lower
//!   bound (the highest load shown to meet it below every load shown not to), or with a stated
//!   reason that none exists ([`Ending::MinLoad`]: even the lowest load fails; or the trial
//!   cap came first). Noise only costs trials.
//! - **Decided, never assumed.** A goal's lower bound was classified a lower bound by its own
//!   full-length trials, whatever any further trial would show; its upper bound likewise.
//! - **A sender that cannot offer a load bounds the answer from below.** A load whose trials
//!   the load generator could not offer ([`TrialOutcome::Unoffered`]) more than
//!   `unoffered_retries` times in a row becomes the *sender ceiling*: no load at or above it is
//!   offered again, and a goal whose lower bound lies within its width below the ceiling ends
//!   [`Ending::SenderLimit`]: "at least this, the sender's limit here". A ceiling at or below a
//!   goal's lower bound (another goal's trials met it later, on a busier machine) leaves a goal
//!   whose bounds are within its width [`Ending::Regular`]; one not yet narrowed ends
//!   [`Ending::SenderLimit`], its description saying the sender offered the answer but not the
//!   ceiling since, so no higher load was tried.
//! - **Bounded.** Every load lies in `[min_load, max_load]`, at most `max_trials` trials run,
//!   and without the cap the search still ends: each load needs at most its duration sum of
//!   full-length trials to be decided, and each new load halves a bracket's log width.
//!
//! Beside this planner, `search/goal.rs` holds what a goal asks and the classification of a
//! load, `search/result.rs` what a search establishes, and `search/tests.rs` the tests on
//! simulated noisy systems (stalls, drift, a slow sender).

use std::fmt;

use serde::{Deserialize, Serialize};

mod goal;
mod result;

pub use goal::{Class, Goal, GoalSpec, GoalSpecError, Stage, Target, classify};
use goal::{FULL_LENGTH_SLACK, quantile_loss};
pub use result::{Ending, GoalResult, LoadEntry, SearchResult};

/// How to search: the goals (the first is the answer a table shows) and the loads allowed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchConfig {
    /// The goals, searched in this order; at least one.
    pub goals: Vec<Goal>,
    /// The first load offered (per second: CPI/s or frames/s).
    pub start_load: f64,
    /// The lowest load ever offered; positive.
    pub min_load: f64,
    /// The highest load ever offered.
    pub max_load: f64,
    /// The most trials run; goals unanswered then end [`Ending::TrialCap`].
    pub max_trials: usize,
    /// How many trials in a row at one load the load generator may fail to offer before that
    /// load becomes the sender ceiling.
    pub unoffered_retries: u32,
}

impl SearchConfig {
    /// The default relative width of every goal.
    pub const DEFAULT_WIDTH: f64 = 0.02;
    /// The default highest load.
    pub const DEFAULT_MAX_LOAD: f64 = 1e6;
    /// The default lowest load as a fraction of the start load: ten halvings.
    pub const DEFAULT_MIN_LOAD_FRACTION: f64 = 1.0 / 1024.0;
    /// The default trial cap.
    pub const DEFAULT_MAX_TRIALS: usize = 80;
    /// The default number of unoffered trials retried in a row at one load.
    pub const DEFAULT_UNOFFERED_RETRIES: u32 = 2;

    /// The robust goal, then the strict one, with `final_trial_s` trials, from `start_load`:
    /// width 2%, loads from `start_load / 1024` to 10^6 (or `start_load` if higher), at most
    /// 80 trials, 2 unoffered trials retried in a row.
    pub fn new(start_load: f64, final_trial_s: f64) -> Self {
        Self {
            goals: vec![
                Goal::robust(final_trial_s, Self::DEFAULT_WIDTH),
                Goal::strict(final_trial_s, Self::DEFAULT_WIDTH),
            ],
            start_load,
            min_load: start_load * Self::DEFAULT_MIN_LOAD_FRACTION,
            max_load: Self::DEFAULT_MAX_LOAD.max(start_load),
            max_trials: Self::DEFAULT_MAX_TRIALS,
            unoffered_retries: Self::DEFAULT_UNOFFERED_RETRIES,
        }
    }

    /// Checks that there is a goal, every goal is valid and named once, and the loads are
    /// finite with `0 < min_load <= start_load <= max_load`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.goals.is_empty() {
            return Err(ConfigError::NoGoal);
        }
        for (i, goal) in self.goals.iter().enumerate() {
            goal.validate()?;
            if self.goals[..i].iter().any(|g| g.name == goal.name) {
                return Err(ConfigError::DuplicateGoal(goal.name.clone()));
            }
        }
        let (min, start, max) = (self.min_load, self.start_load, self.max_load);
        if !(min.is_finite() && min > 0.0) {
            return Err(ConfigError::MinLoad(min));
        }
        if !(max.is_finite() && max >= min) {
            return Err(ConfigError::MaxLoad { max, min });
        }
        if !(start >= min && start <= max) {
            return Err(ConfigError::StartLoad { start, min, max });
        }
        Ok(())
    }
}

/// A [`SearchConfig`] that cannot be searched.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// No goal was given.
    #[error("a search needs at least one goal")]
    NoGoal,
    /// Two goals share a name.
    #[error("the goal {0:?} is given twice")]
    DuplicateGoal(String),
    /// A goal's field is out of range.
    #[error("goal {goal:?}: the {field} must lie in {range}, not {value}")]
    Goal {
        /// The goal's name.
        goal: String,
        /// The field.
        field: &'static str,
        /// Its value.
        value: f64,
        /// Its range.
        range: &'static str,
    },
    /// `min_load` is not a positive finite number.
    #[error("the lowest load must be positive and finite, not {0}")]
    MinLoad(f64),
    /// `max_load` is not finite or lies below `min_load`.
    #[error("the highest load must be finite and at least the lowest {min}, not {max}")]
    MaxLoad {
        /// The highest load given.
        max: f64,
        /// The lowest load given.
        min: f64,
    },
    /// `start_load` lies outside `[min_load, max_load]`.
    #[error("the start load {start} lies outside [{min}, {max}]")]
    StartLoad {
        /// The start load given.
        start: f64,
        /// The lowest load given.
        min: f64,
        /// The highest load given.
        max: f64,
    },
}

/// Why the search chose a trial's load.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// The start load: nothing decided yet.
    Start,
    /// Above the highest lower bound, with no upper bound yet (doubling).
    Up,
    /// Below the lowest upper bound, with no lower bound yet (halving).
    Down,
    /// The geometric midpoint of the bracket.
    Bisect,
    /// Another trial at a load still undecided for this stage.
    Again,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Start => "start",
            Self::Up => "up",
            Self::Down => "down",
            Self::Bisect => "bisect",
            Self::Again => "again",
        })
    }
}

/// The trial the search asks for.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrialRequest {
    /// The load to offer, per second.
    pub load: f64,
    /// The trial's duration, s of stream (a runner may run longer, never shorter).
    pub duration_s: f64,
    /// The goal it serves (an index into [`SearchConfig::goals`]).
    pub goal: usize,
    /// The stage of that goal.
    pub stage: Stage,
    /// Why this load.
    pub phase: Phase,
}

/// What one trial measured, as the search counts it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrialOutcome {
    /// The system was offered the load for `duration_s` and lost this fraction of its frames
    /// (1.0 for a trial that failed as a whole).
    Measured {
        /// The trial's measured duration, s.
        duration_s: f64,
        /// The fraction of the trial's frames lost, in [0, 1].
        loss_ratio: f64,
    },
    /// The load generator could not offer the load (it fell behind its schedule, or could
    /// not reach the rate): nothing is known of the system at this load from this trial.
    Unoffered(String),
}

/// One trial the search ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrialRecord {
    /// What was asked.
    pub request: TrialRequest,
    /// What it measured.
    pub outcome: TrialOutcome,
}

impl TrialRecord {
    /// `(duration_s, loss_ratio)` of a measured trial.
    fn measured(&self) -> Option<(f64, f64)> {
        match self.outcome {
            TrialOutcome::Measured {
                duration_s,
                loss_ratio,
            } => Some((duration_s, loss_ratio)),
            TrialOutcome::Unoffered(_) => None,
        }
    }
}

/// The planner of one search: which trial next, and what the trials so far establish.
#[derive(Clone, Debug)]
pub struct Search {
    config: SearchConfig,
    /// Every goal's stages, in search order, with the goal's index.
    targets: Vec<(usize, Target)>,
    trials: Vec<TrialRecord>,
    /// The lowest load the sender could not offer, and why.
    ceiling: Option<(f64, String)>,
    interrupted: bool,
}

/// A stage's bracket: its relevant lower and upper bounds.
#[derive(Clone, Copy, Debug, Default)]
struct Bracket {
    lower: Option<f64>,
    upper: Option<f64>,
}

impl Search {
    /// A search of `config`, once it is valid.
    pub fn new(config: SearchConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let targets = config
            .goals
            .iter()
            .enumerate()
            .flat_map(|(i, g)| g.targets().into_iter().map(move |t| (i, t)))
            .collect();
        Ok(Self {
            config,
            targets,
            trials: Vec::new(),
            ceiling: None,
            interrupted: false,
        })
    }

    /// The configuration searched.
    pub fn config(&self) -> &SearchConfig {
        &self.config
    }

    /// The trials so far.
    pub fn trials(&self) -> &[TrialRecord] {
        &self.trials
    }

    /// The next trial to run, or `None` once every goal is answered (or the cap is reached).
    pub fn next(&self) -> Option<TrialRequest> {
        if self.interrupted || self.trials.len() >= self.config.max_trials {
            return None;
        }
        (0..self.targets.len())
            .filter(|&t| !self.superseded(t))
            .find_map(|t| self.next_for(t))
    }

    /// Whether target `t` is a coarse stage whose goal's final stage has begun: its bracket
    /// moves as full-length trials come in, but the final stage now answers the goal.
    fn superseded(&self, t: usize) -> bool {
        let (goal, target) = self.targets[t];
        target.stage == Stage::Coarse
            && self
                .trials
                .iter()
                .any(|r| r.request.goal == goal && r.request.stage == Stage::Final)
    }

    /// Records what the trial `request` measured.
    pub fn record(&mut self, request: TrialRequest, outcome: TrialOutcome) {
        let unoffered = match &outcome {
            TrialOutcome::Unoffered(why) => Some(why.clone()),
            TrialOutcome::Measured { .. } => None,
        };
        self.trials.push(TrialRecord { request, outcome });
        let Some(why) = unoffered else {
            return;
        };
        // Unoffered trials in a row at this load, counting back to its last measured one.
        let in_a_row = self
            .trials
            .iter()
            .rev()
            .filter(|t| t.request.load == request.load)
            .take_while(|t| t.measured().is_none())
            .count();
        if in_a_row > self.config.unoffered_retries as usize
            && self.ceiling.as_ref().is_none_or(|(c, _)| request.load < *c)
        {
            self.ceiling = Some((request.load, why));
        }
    }

    /// Stops the search: [`Search::next`] asks for nothing more, and unanswered goals end
    /// [`Ending::Interrupted`].
    pub fn interrupt(&mut self) {
        self.interrupted = true;
    }

    /// What the trials so far establish.
    pub fn result(&self) -> SearchResult {
        let finals: Vec<usize> = (0..self.config.goals.len())
            .map(|g| {
                self.targets
                    .iter()
                    .rposition(|(goal, _)| *goal == g)
                    .unwrap_or_default()
            })
            .collect();
        let goals = finals
            .iter()
            .enumerate()
            .map(|(g, &t)| self.goal_result(g, t))
            .collect();
        let loads = self
            .loads()
            .into_iter()
            .map(|load| {
                let measured = self.measured_at(load);
                LoadEntry {
                    load,
                    trials: measured.len(),
                    seconds: seconds(&measured),
                    unoffered: self
                        .trials
                        .iter()
                        .filter(|t| t.request.load == load && t.measured().is_none())
                        .count(),
                    classes: finals
                        .iter()
                        .map(|&t| classify(measured.iter().copied(), &self.targets[t].1))
                        .collect(),
                }
            })
            .collect();
        SearchResult {
            goals,
            loads,
            trials: self.trials.clone(),
            trial_seconds: seconds(
                &self
                    .trials
                    .iter()
                    .filter_map(TrialRecord::measured)
                    .collect::<Vec<_>>(),
            ),
            sender_ceiling: self.ceiling.as_ref().map(|(c, _)| *c),
        }
    }

    /// The result of goal `g`, whose final stage is target `t`.
    fn goal_result(&self, g: usize, t: usize) -> GoalResult {
        let goal = &self.config.goals[g];
        let bracket = self.bracket(t);
        let ending = self.done(t, &bracket).unwrap_or(if self.interrupted {
            Ending::Interrupted
        } else {
            Ending::TrialCap
        });
        let at_lower: Vec<(f64, f64)> = bracket
            .lower
            .map(|l| {
                self.measured_at(l)
                    .into_iter()
                    .filter(|(d, _)| *d >= goal.final_trial_s * (1.0 - FULL_LENGTH_SLACK))
                    .collect()
            })
            .unwrap_or_default();
        GoalResult {
            goal: goal.clone(),
            lower: bracket.lower,
            upper: bracket.upper,
            conditional_throughput: bracket
                .lower
                .map(|l| l * (1.0 - quantile_loss(&at_lower, goal))),
            trials_at_lower: at_lower.len(),
            seconds_at_lower: seconds(&at_lower),
            ending,
        }
    }

    /// Every load with a trial, ascending, once each.
    fn loads(&self) -> Vec<f64> {
        let mut loads: Vec<f64> = self.trials.iter().map(|t| t.request.load).collect();
        loads.sort_by(f64::total_cmp);
        loads.dedup();
        loads
    }

    /// The measured trials at `load`, as `(duration_s, loss_ratio)`.
    fn measured_at(&self, load: f64) -> Vec<(f64, f64)> {
        self.trials
            .iter()
            .filter(|t| t.request.load == load)
            .filter_map(TrialRecord::measured)
            .collect()
    }

    /// `load`'s class for target `t`.
    fn class(&self, load: f64, t: usize) -> Class {
        classify(self.measured_at(load), &self.targets[t].1)
    }

    /// Target `t`'s relevant bounds: the lowest upper bound, and the highest lower bound
    /// below it.
    fn bracket(&self, t: usize) -> Bracket {
        let classes: Vec<(f64, Class)> = self
            .loads()
            .into_iter()
            .map(|l| (l, self.class(l, t)))
            .collect();
        let upper = classes
            .iter()
            .find(|(_, c)| *c == Class::Upper)
            .map(|(l, _)| *l);
        let lower = classes
            .iter()
            .filter(|(l, c)| *c == Class::Lower && upper.is_none_or(|u| *l < u))
            .map(|(l, _)| *l)
            .next_back();
        Bracket { lower, upper }
    }

    /// The load no new trial may reach: the lowest upper bound or the sender ceiling.
    fn roof(&self, bracket: &Bracket) -> Option<f64> {
        match (bracket.upper, &self.ceiling) {
            (Some(u), Some((c, _))) => Some(u.min(*c)),
            (Some(u), None) => Some(u),
            (None, Some((c, _))) => Some(*c),
            (None, None) => None,
        }
    }

    /// How target `t`'s search ended, or `None` while it needs trials.
    fn done(&self, t: usize, bracket: &Bracket) -> Option<Ending> {
        let width = self.targets[t].1.width;
        let sender = || {
            self.ceiling.as_ref().map(|(c, why)| Ending::SenderLimit {
                ceiling: *c,
                why: why.clone(),
            })
        };
        // A ceiling at or below the goal's answer is a rate the sender failed to offer after
        // (or before) it offered a higher one: it says nothing of this goal, whose own bounds,
        // once within its width, are its answer.
        let ceiling_below = matches!(
            (bracket.lower, &self.ceiling),
            (Some(l), Some((c, _))) if *c <= l
        );
        if ceiling_below
            && let (Some(l), Some(u)) = (bracket.lower, bracket.upper)
            && (u - l <= width * u || midpoint(l, u).is_none())
        {
            return Some(Ending::Regular);
        }
        let roof = self.roof(bracket);
        let by_sender = bracket
            .upper
            .is_none_or(|u| self.ceiling.as_ref().is_some_and(|(c, _)| *c < u));
        match (bracket.lower, roof) {
            (Some(l), _) if l >= self.config.max_load => Some(Ending::MaxLoad),
            (Some(l), Some(r)) if r - l <= width * r => {
                if by_sender {
                    sender()
                } else {
                    Some(Ending::Regular)
                }
            }
            (Some(l), Some(r)) if midpoint(l, r).is_none() => {
                if by_sender {
                    sender()
                } else {
                    Some(Ending::Regular)
                }
            }
            (None, Some(r)) if r <= self.config.min_load => {
                if by_sender {
                    sender()
                } else {
                    Some(Ending::MinLoad)
                }
            }
            _ => None,
        }
    }

    /// The next trial for target `t`, or `None` when it is done.
    fn next_for(&self, t: usize) -> Option<TrialRequest> {
        let (goal, target) = self.targets[t];
        let bracket = self.bracket(t);
        if self.done(t, &bracket).is_some() {
            return None;
        }
        let roof = self.roof(&bracket);
        let inside = |l: f64| bracket.lower.is_none_or(|lo| l > lo) && roof.is_none_or(|r| l < r);
        let request = |load: f64, phase| {
            Some(TrialRequest {
                load,
                duration_s: target.trial_s,
                goal,
                stage: target.stage,
                phase,
            })
        };
        // A load inside the bracket with trials but undecided gets another: first the
        // preceding stage's bounds (where this stage's answer most likely lies), then the
        // highest.
        let undecided: Vec<f64> = self
            .loads()
            .into_iter()
            .filter(|&l| inside(l) && !self.measured_at(l).is_empty())
            .filter(|&l| self.class(l, t) == Class::Undecided)
            .collect();
        if let Some(&last) = undecided.last() {
            let preceding = t
                .checked_sub(1)
                .map(|p| self.bracket(p))
                .unwrap_or_default();
            let load = [preceding.lower, preceding.upper]
                .into_iter()
                .flatten()
                .find(|l| undecided.contains(l))
                .unwrap_or(last);
            return request(load, Phase::Again);
        }
        let (min, max) = (self.config.min_load, self.config.max_load);
        match (bracket.lower, roof) {
            (None, None) => request(self.config.start_load, Phase::Start),
            (None, Some(r)) => {
                let start = self.config.start_load;
                // Nothing measured below the roof yet: the start load, when it lies below.
                if start < r && self.measured_at(start).is_empty() && !self.offered(start) {
                    return request(start, Phase::Start);
                }
                request((r / 2.0).max(min), Phase::Down)
            }
            (Some(l), None) => request((2.0 * l).min(max), Phase::Up),
            (Some(l), Some(r)) => {
                let up = 2.0 * l;
                if up < r && bracket.upper.is_none() && up <= max {
                    return request(up, Phase::Up);
                }
                request(midpoint(l, r)?, Phase::Bisect)
            }
        }
    }

    /// Whether any trial offered `load`.
    fn offered(&self, load: f64) -> bool {
        self.trials.iter().any(|t| t.request.load == load)
    }
}

/// The total duration of `trials` (`(duration_s, loss_ratio)`): 0 for none (a float sum of
/// nothing is -0).
fn seconds(trials: &[(f64, f64)]) -> f64 {
    trials.iter().fold(0.0, |sum, (d, _)| sum + d)
}

/// The geometric midpoint of `low < high`, or `None` when no float lies strictly between.
fn midpoint(low: f64, high: f64) -> Option<f64> {
    // low * sqrt(high / low) rather than sqrt(low * high): no overflow.
    let mid = low * (high / low).sqrt();
    (mid > low && mid < high).then_some(mid)
}

/// Why [`search`] returned no complete result.
#[derive(Debug)]
pub enum SearchError<E> {
    /// The configuration was rejected; no trial ran.
    InvalidConfig(ConfigError),
    /// A trial returned an error, which stopped the search.
    Trial {
        /// What the trials before the error establish (unanswered goals end
        /// [`Ending::Interrupted`]).
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

/// Runs one search to its end, calling `trial(request)` for each trial: the closure runs it
/// and returns what it measured, or an error that stops the search (Ctrl-C, a runner that
/// cannot continue), whose partial result comes back in [`SearchError::Trial`].
pub fn search<E, F>(config: &SearchConfig, mut trial: F) -> Result<SearchResult, SearchError<E>>
where
    F: FnMut(&TrialRequest) -> Result<TrialOutcome, E>,
{
    let mut planner = Search::new(config.clone()).map_err(SearchError::InvalidConfig)?;
    while let Some(request) = planner.next() {
        match trial(&request) {
            Ok(outcome) => planner.record(request, outcome),
            Err(cause) => {
                planner.interrupt();
                return Err(SearchError::Trial {
                    partial: Box::new(planner.result()),
                    cause,
                });
            }
        }
    }
    Ok(planner.result())
}

#[cfg(test)]
mod tests;

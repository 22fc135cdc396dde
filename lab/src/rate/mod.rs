//! The sustained-rate search of `kplace bisect-rate` (docs/architecture.md): the pure
//! logic, with no I/O, no clock and no processes, and the types of its results file.
//!
//! - [`gates`] turns what one trial measured ([`TrialMeasurement`]) into a [`Verdict`]: pass
//!   or fail, and every reason it failed. [`judge`] is a pure function of the measurement and
//!   the [`Gates`], and fails closed (a NaN anywhere fails the gate it feeds).
//!   [`loss_ratio`] is the fraction of a trial's frames a search goal counts as lost.
//! - [`search`](mod@search) plans the trials of a search after RFC 9971 (MLRsearch): which
//!   load, how long, for which goal, and what the trials so far establish for every goal. It
//!   never runs a trial itself: the caller does (open-loop sender, pipeline under test,
//!   verifier), so the search is tested here on simulated noisy systems, and the real trial
//!   runner interleaves several searches trial by trial.
//!
//! - [`steadiness`] judges a steadiness probe (a fixed loop timed repeatedly): is the
//!   machine itself steady enough for a failure to mean something?
//! - [`sweep`] is the results file a sweep writes and `kplace plot` reads.
//!
//! A trial runner pairs them: for each [`TrialRequest`] the search asks for, run the trial,
//! build a [`TrialMeasurement`], judge it, and record its [`loss_ratio`] (or that the sender
//! could not offer the load) with [`Search::record`].

pub mod gates;
pub mod search;
pub mod steadiness;
pub mod sweep;

pub use gates::{
    BudgetRule, BudgetRuleError, Failure, Gates, Judgement, LatencyBudget, TrialMeasurement,
    Verdict, judge, loss_ratio,
};
pub use search::{
    Class, ConfigError, Ending, Goal, GoalResult, GoalSpec, GoalSpecError, LoadEntry, Phase,
    Search, SearchConfig, SearchError, SearchResult, Stage, TrialOutcome, TrialRecord,
    TrialRequest, classify, search,
};
pub use steadiness::{Probe, Steadiness, SteadyLimits, relative_spread};

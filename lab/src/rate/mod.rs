//! The sustained-rate search of `kplace bisect-rate` (docs/architecture.md): the pure
//! logic, with no I/O, no clock and no processes, and the types of its results file.
//!
//! - [`gates`] turns what one trial measured ([`TrialMeasurement`]) into a [`Verdict`]: pass
//!   or fail, and every reason it failed. [`judge`] is a pure function of the measurement and
//!   the [`Gates`], and fails closed (a NaN anywhere fails the gate it feeds).
//! - [`search`](mod@search) drives trials at chosen rates through a caller's closure and
//!   finds the highest rate that passes K of K consecutive trials, with a failing rate tested
//!   within the tolerance above it. It never runs a trial itself: the caller's closure does
//!   (open-loop sender, pipeline under test, verifier), so the search is tested here on
//!   simulated systems and reused unchanged by the real trial runner.
//!
//! - [`steadiness`] judges a steadiness probe (a fixed loop timed repeatedly): is the
//!   machine itself steady enough for a failure to mean something?
//! - [`sweep`] is the results file a sweep writes and `kplace plot` reads.
//!
//! A trial runner pairs them: for each `(rate, phase)` the search asks for, run the trial,
//! build a [`TrialMeasurement`], and return [`judge`]'s verdict (or an error to stop, e.g. on
//! Ctrl-C; the trials so far come back in [`SearchError::Trial`]).

pub mod gates;
pub mod search;
pub mod steadiness;
pub mod sweep;

pub use gates::{
    BudgetRule, BudgetRuleError, Failure, Gates, LatencyBudget, TrialMeasurement, Verdict, judge,
};
pub use search::{
    ConfigError, Judgement, Outcome, Phase, SearchConfig, SearchError, SearchResult, TrialRecord,
    search,
};
pub use steadiness::{Probe, Steadiness, SteadyLimits, relative_spread};

//! The sustained-rate search of `kplace bisect-rate` (docs/architecture.md): the pure
//! logic, with no I/O, no clock and no processes.
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
//! A trial runner pairs them: for each `(rate, phase)` the search asks for, run the trial,
//! build a [`TrialMeasurement`], and return [`judge`]'s verdict (or an error to stop, e.g. on
//! Ctrl-C; the trials so far come back in [`SearchError::Trial`]).

pub mod gates;
pub mod search;

pub use gates::{Failure, Gates, LatencyBound, TrialMeasurement, Verdict, judge};
pub use search::{
    ConfigError, Outcome, Phase, SearchConfig, SearchError, SearchResult, TrialRecord, search,
};

//! `kplace tune`: the placement chosen for the user, predicted and then proven (issue 17).
//!
//! Built in steps. This one is the search space: [`space`] enumerates every placement of a
//! graph that the planner accepts, from what the kernel libraries offer; calibration, the
//! model, and proving the best predictions with `bisect-rate` come next.

pub mod space;

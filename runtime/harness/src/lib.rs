//! kplace-harness: one pipeline of a workload, run and measured.
//!
//! A [`session`] runs a plan from any source to any sink and builds the typed run report
//! around the verdict the sink reached (one pipeline or several, with their control files,
//! ready file, telemetry and child processes); a [`workload`] is what feeds a run and judges
//! it: the registry of workload kinds, their recordings (SigMF, npy), synthesised tones, the
//! generic sinks and references, and `workload::run`, which runs one pipeline of any
//! `Workload`.
//!
//! It sits on top of the other runtime crates: `kplace-core` (the data path), `kplace-net`
//! (the sources) and `kplace-report` (what a run says).

#![warn(missing_docs)]

pub mod session;
pub mod workload;

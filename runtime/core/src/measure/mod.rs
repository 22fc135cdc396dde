//! What the executor counts, in its own types: the report crate reads them and writes them
//! out, so counting a frame needs none of the report's dependencies (JSON Schema, HTTP,
//! NVML).
//!
//! - [`metrics`]: per-stage launch counters, latency histograms and the [`metrics::RunMetrics`]
//!   a run returns.
//! - [`overhead`]: where the executor's threads spend their time besides the kernels.
//! - [`progress`]: what a run says while it goes on.
//! - [`trace`]: a run's timeline as spans, and the Chrome trace events they become.
//! - [`nvtx`]: the same spans as NVTX ranges, for a profiler.

pub mod metrics;
pub mod nvtx;
pub mod overhead;
pub mod progress;
pub mod trace;

//! kplace's lab: the tools that measure a pipeline rather than run it. None of them is on the
//! data path; each drives or loads the machine beside a run of the [`kplace`] runtime.
//!
//! - [`rate`]: the sustained-rate search of `kplace bisect-rate` (pure logic: gates, search,
//!   steadiness, the results file's types).
//! - [`bisect`]: the sweep that runs that search with real trials (a paced sender into the
//!   system under test, two processes), the bounds and probes beside it, and its outputs.
//! - [`bounds`]: what the same kernels do with no runtime at all (kernel-only rate).
//! - [`hog`]: co-tenants that load a GPU or the CPUs beside a run.
//! - [`mps`]: a private NVIDIA MPS daemon, and the check that a process is its client.
//! - [`plots`]: the SVG pictures of a sweep's results file.

#![warn(missing_docs)]

pub mod bisect;
pub mod bounds;
pub mod hog;
pub mod mps;
pub mod plots;
pub mod rate;
pub mod tune;

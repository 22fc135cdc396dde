//! kplace: a streaming signal-processing runtime whose every stage runs on the CPU or a GPU,
//! chosen per stage by a placement file.
//!
//! The modules, in data-path order: the user's [`model`] (graph and placement) becomes a
//! [`plan`] of kernels from [`plugin`] libraries, on the CPU or through the [`cuda`] seam; the
//! [`executor`] moves frames from a source in [`net`] (the UDP receiver, or a replay) through
//! the plan's stages and its pools to a sink; [`report`] measures it and writes what it
//! measured, and a [`session`] runs one pipeline and builds its typed report. [`interrupt`] is how a signal stops a run cleanly; [`os`] holds what the runtime
//! and its tools ask of the operating system beyond `std` (CPU affinity, child processes).
//!
//! The measuring tools live beside it in `kplace-lab`, the radar workload in `kplace-radar`,
//! and the `kplace` binary (`kplace-cli`) joins them.

#![warn(missing_docs)]

// What the user writes.
pub mod model;
// Kernels, devices and the plan that binds them.
pub mod cuda;
pub mod plan;
pub mod plugin;
// Frames moving.
pub mod adapt;
pub mod executor;
pub mod net;
// What a run measured.
pub mod report;
// One pipeline, run and measured.
pub mod session;
pub mod workload;
// Signals and the operating system.
pub mod interrupt;
pub mod os;

pub use kplace_abi as abi;

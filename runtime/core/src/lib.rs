//! kplace-core: a stream of frames through a graph of stages, each on the CPU or a GPU as a
//! placement file says.
//!
//! The modules, in data-path order: the user's [`model`] (graph and placement) becomes a
//! [`plan`] of kernels from [`plugin`] libraries, on the CPU or through the [`cuda`] seam; the
//! [`executor`] moves frames from any source behind its `Ingest` seam through the plan's
//! stages and pools to a sink, re-placing stages while it runs when [`adapt`] says so, and
//! counts what it did into [`measure`]'s types. [`interrupt`] is how a signal stops a run
//! cleanly; [`os`] holds what the runtime and its tools ask of the operating system beyond
//! `std` (CPU affinity, child processes, whole-file reads and writes).
//!
//! This crate knows no network, report file or workload: `kplace-net` feeds it packets,
//! `kplace-report` reads what it counted, `kplace-harness` runs one pipeline of a workload
//! with them (see docs/architecture.md for the crate graph). Its optional feature `schema`
//! derives the JSON Schema of the records a report embeds ([`adapt::Adaptation`],
//! [`measure::progress::GpuNow`]); only the report crate turns it on.

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
// What a run counts.
pub mod measure;
// Signals and the operating system.
pub mod interrupt;
pub mod os;

pub use kplace_abi as abi;

//! kplace: a streaming signal-processing runtime whose every stage runs on the CPU or a GPU,
//! chosen per stage by a placement file.
//!
//! The data path reads in module order: a [`graph`] and a [`placement`] become a [`plan`] of
//! kernels from [`plugin`] libraries and buffers from [`pool`]s; the [`executor`] moves frames
//! from a [`source`] through the plan's stages to a sink; [`metrics`] measures it.
//!
//! The binary `kplace` is a thin layer over this library and the radar application
//! (`kplace-radar`).

#![warn(missing_docs)]

pub mod cuda;
pub mod executor;
pub mod graph;
pub mod interrupt;
pub mod placement;
pub mod plan;
pub mod plugin;
pub mod pool;
pub mod report;
pub mod sender;
pub mod source;
pub mod udp;
pub mod wire;

pub use kplace_abi as abi;

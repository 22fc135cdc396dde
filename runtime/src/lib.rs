//! kplace: a streaming signal-processing runtime whose every stage runs on the CPU or a GPU,
//! chosen per stage by a placement file.
//!
//! This crate is a facade over the runtime's crates, each owning one concern, so that the
//! lab, the binary and the tests keep one set of paths:
//!
//! - `kplace-core`: [`model`], [`plan`], [`plugin`], [`cuda`], [`executor`], [`adapt`],
//!   [`interrupt`], [`os`], and what the executor counts (re-exported under [`report`]);
//! - `kplace-net`: [`net`]'s packet format, UDP receiver, sender and replay source;
//! - `kplace-report`: [`report`] (the run report, progress lines, OpenMetrics, telemetry,
//!   output files), the metrics endpoint (as `net::metrics`) and NVML's part of the device
//!   probe (`cuda::probe::probe`);
//! - `kplace-harness`: [`session`] and [`workload`].
//!
//! A crate that needs only the data path depends on `kplace-core` alone. The measuring tools
//! live beside it in `kplace-lab`, the radar workload in `kplace-radar`, and the `kplace`
//! binary (`kplace-cli`) joins them. docs/architecture.md draws the crate graph.

#![warn(missing_docs)]

pub use kplace_core::{abi, adapt, executor, interrupt, model, os, plan, plugin};
pub use kplace_harness::{session, workload};
pub use kplace_report as report;

/// The CUDA seam (`kplace_core::cuda`).
pub mod cuda {
    pub use kplace_core::cuda::*;

    /// The device probe (`kplace_core::cuda::probe`), whose `probe()` is the whole answer
    /// `kplace devices` gives, NVML's facts included (`kplace_report::devices::probe`).
    pub mod probe {
        pub use kplace_core::cuda::probe::*;
        pub use kplace_report::devices::probe;
    }
}

/// Frames over the network (`kplace_net`), and the metrics endpoint
/// (`kplace_report::endpoint`).
pub mod net {
    pub use kplace_net::*;
    pub use kplace_report::endpoint as metrics;
}

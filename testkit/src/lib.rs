//! Test support shared by the workspace's crates, used only as a dev-dependency: nothing here
//! is part of any crate's public API, and no crate's tests reach into another crate's tests/
//! directory for helpers.
//!
//! - [`workspace`]: where things are (the workspace, the `kplace` binary, the CPU library),
//!   also for test executables carried to another machine ([`carried`]).
//! - [`process`]: child processes with a limit on every wait, killed when a test ends.
//! - [`clib`]: the runtime's C test kernels, built now, and their frames and results.
//! - [`abi`] and [`spectrogram`]: a kernel library driven through the ABI as the runtime does.
//! - [`devices`]: `/dev/full` where it is one, and device nodes made for a test.
//! - [`gpu`]: the GPU tests' one skip-or-fail rule (`KPLACE_REQUIRE_GPU`).
//! - [`report`]: well-formed run reports for the readers' tests.
//! - [`npy`]: `.npy` files as NumPy writes them.
//! - [`source`]: the workspace's sources read as modules, for the layering and size checks
//!   (`tests/layers.rs`, `tests/sizes.rs`).
//!
//! The common helpers are re-exported at the root (`kplace_testkit::output`, ...).

pub mod abi;
pub mod clib;
pub mod devices;
pub mod gpu;
pub mod npy;
pub mod process;
pub mod report;
pub mod source;
pub mod spectrogram;
pub mod workspace;

pub use clib::{SumsSink, build_c_library, expected_column_sums, test_frames};
pub use process::{Ended, Guard, KillOnDrop, PROCESS_LIMIT, output, output_within};
pub use report::run_report;
pub use workspace::{carried, cpu_library, kplace_bin_or, workspace, write_temp};

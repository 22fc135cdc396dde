//! kplace's radar kernels on the CPU.
//!
//! This crate is a kernel library for the kplace runtime: built as a `cdylib` it exports
//! `kplace_library_entry` (see `runtime/include/kplace.h`) with four kernels, all running on
//! the calling thread over host memory, one input and one output each:
//!
//! | kernel               | input                     | output                    |
//! |----------------------|---------------------------|---------------------------|
//! | `radar.range_fft`    | `ci16 [M, N]` chirp-major | `cf32 [N, M]` range-major |
//! | `radar.doppler_fft`  | `cf32 [N, M]`             | `f32 [N, M]` power        |
//! | `radar.cfar`         | `f32 [N, M]` power        | `detections [capacity]`   |
//! | `radar.cluster`      | `detections [capacity]`   | `detections [capacity]`   |
//!
//! (N samples per chirp = range bins, M chirps per CPI = Doppler bins.) Each kernel's module
//! states its parameters, its workspace and what it guarantees. The FFTs use FFTW, linked
//! statically by `kplace-fftw` so the library needs no libfftw3 at run time.
//!
//! What every backend must agree on (kernel names, parameters and defaults, their validation
//! and messages, the port checks, the CFAR window and threshold arithmetic, the Hann window)
//! is the contract crate's, `kplace_kernels`; this crate keeps what is the CPU's own: FFTW
//! plans, chunking and corner turns, the CFAR bound and its vectorised passes, workspaces.
//!
//! Every kernel keeps its mutable scratch in the runtime's workspace, never in its state, so
//! tiles of one state may run concurrently (the range FFT is split along chirps), and no
//! launch allocates.
//!
//! Built as an `rlib`, the same kernels are plain Rust types implementing
//! [`kplace_abi::export::KernelImpl`], which tests and benchmarks drive directly.

#![warn(missing_docs)]

pub mod cfar;
pub mod cluster;
mod detections;
pub mod doppler_fft;
pub mod range_fft;
mod tensor;

pub use cfar::Cfar;
pub use cluster::Cluster;
pub use doppler_fft::DopplerFft;
pub use range_fft::RangeFft;

/// FFTW's planning rigor for the kernels' `planner` parameter (which the contract reads and
/// validates; `estimate` by default, since it is deterministic: see [`kplace_fftw::Rigor`]).
/// On this workload `measure` was not measurably faster.
fn rigor(planner: kplace_kernels::fft::Planner) -> kplace_fftw::Rigor {
    use kplace_kernels::fft::Planner;
    match planner {
        Planner::Estimate => kplace_fftw::Rigor::Estimate,
        Planner::Measure => kplace_fftw::Rigor::Measure,
        Planner::Patient => kplace_fftw::Rigor::Patient,
    }
}

kplace_abi::export_library!(c"kplace-cpu", [RangeFft, DopplerFft, Cfar, Cluster]);

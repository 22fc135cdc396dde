//! kplace's radar kernels on CUDA (`libkplace_gpu.so`).
//!
//! This crate is a kernel library for the kplace runtime: built as a `cdylib` it exports
//! `kplace_library_entry` (see `runtime/include/kplace.h`) with three kernels, each running on
//! a CUDA device over device memory, one input and one output each, under the same logical
//! names, ports, shapes and parameters as the CPU library's, so a placement swap is a YAML
//! edit:
//!
//! | kernel              | input                     | output                    | work on the stream                                 | enqueues   |
//! |---------------------|---------------------------|---------------------------|----------------------------------------------------|------------|
//! | `radar.range_fft`   | `ci16 [M, N]` chirp-major | `cf32 [N, M]` range-major | window; cuFFT (N) into the output's columns        | 2 per tile |
//! | `radar.doppler_fft` | `cf32 [N, M]`             | `f32 [N, M]` power        | window; cuFFT (M) in place; power                  | 3          |
//! | `radar.cfar`        | `f32 [N, M]` power        | `detections [capacity]`   | row sums; column sums, rule, counts; scan; records | 4          |
//!
//! (N samples per chirp = range bins, M chirps per CPI = Doppler bins; enqueues count kernel
//! launches and cuFFT executions per launch of the kernel. At 4096x512 with the GPU's default
//! tile, a quarter of the chirps, a frame through all three costs 4 x 2 + 3 + 4 = 15.) Each
//! kernel's module states its parameters, workspace and guarantees: [`range_fft`],
//! [`doppler_fft`], [`cfar`]. In short:
//!
//! - The FFT stages apply the CPU library's f32 Hann coefficients (`kplace_kernels::window`)
//!   and compute unnormalised forward transforms with batched cuFFT; they agree with an f64
//!   FFT within 1e-5 of the peak (max-abs error over max-abs), as FFTW does. Power is
//!   `re * re + im * im`, rounded per operation.
//! - CFAR follows the CPU library's exact rule (fixed-point training sums, one rounding, one
//!   multiply), so both report identical detections for the same power map, in the same
//!   row-major order, with the same overflow accounting.
//!
//! `radar.cluster` has no GPU version: the placements run it on the CPU. A frame has a handful
//! to a few hundred detections; connected components over them are sequential, pointer-chasing
//! work on a few kilobytes, and copying the detection list down (the one transfer the GPU
//! placements make on the way back anyway) costs less than the chain of small launches a GPU
//! version would need.
//!
//! Names, parameters and defaults, their validation and messages, the port checks, the CFAR
//! window and threshold arithmetic and the Hann window are the contract both libraries share
//! (crate `kplace_kernels`); this crate keeps what is the GPU's own: plans, grids, workspace
//! layouts and launch sequences.
//!
//! # How the library uses CUDA
//!
//! Through `kplace_cudakit`, which every Rust GPU library shares (its docs say how):
//! cudarc's `result`/`sys` layers with the runtime's raw streams and device addresses; the
//! device's primary context retained while any state lives and bound for teardown; libcuda,
//! libcufft and libnvrtc found where the machine keeps them and probed before first use, so a
//! missing one is a [`KernelError`](kplace_abi::export::KernelError) naming every place
//! looked at; panics that slip through are caught at the C ABI by
//! `kplace_abi::export_library!`.
//!
//! - **NVRTC at first create.** The CUDA C in `kernels/*.cu` ([`source`]) is compiled for the
//!   device's compute capability with `--fmad=false` and loaded once per device and process:
//!   later states, one per stage and frame slot, reuse the handles.
//! - **Launch only enqueues.** `launch` enqueues kernels and `cufftExecC2C` on the given
//!   stream and returns: it never synchronizes and never allocates (workspace layouts are
//!   fixed-size arrays; messages are formatted only on errors). cuFFT's work area is part of
//!   the runtime's workspace; each state owns its own plan, made at create time with its data
//!   layout.
//! - **Errors with context.** Every failure names the call and the CUDA error, e.g.
//!   `cuLaunchKernel failed: CUDA_ERROR_INVALID_VALUE (kp_cfar_detect)`.
//!
//! # Testing without a GPU
//!
//! Each kernel's launch sequence (grids, arguments, workspace carving, tiles) is a plan
//! ([`range_fft::RangeFftPlan`], [`doppler_fft::DopplerFftPlan`], [`cfar::CfarPlan`]) that
//! enqueues on a `kplace_cudakit::queue::Queue`. The library's queue is a CUDA stream; the
//! tests' queue runs the same `.cu` files compiled as C++ on the host (crate
//! `kplace-cuda-hostsim`), with rustfft in place of cuFFT (with cuFFT's strided layouts). So on
//! a machine without a GPU the tests still check the arithmetic of every kernel and the whole
//! launch sequence against the CPU library and an f64 model, and NVRTC (which needs no GPU)
//! compiles every source. A queue that only counts checks what a frame enqueues, and that
//! enqueueing allocates nothing (`tests/hot_path.rs`). Tests that need a device say `skipped`
//! and why when there is none.

#![warn(missing_docs)]

pub mod cfar;
pub mod doppler_fft;
mod ports;
pub mod range_fft;
pub mod source;

pub use cfar::Cfar;
pub use doppler_fft::DopplerFft;
pub use kplace_cudakit::probe;
pub use range_fft::RangeFft;

kplace_abi::export_library!(c"kplace-gpu", [RangeFft, DopplerFft, Cfar]);

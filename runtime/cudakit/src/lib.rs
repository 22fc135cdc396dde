//! The CUDA side of a kplace kernel library written in Rust.
//!
//! A GPU kernel library (the radar's `libkplace_gpu.so`, the block library's
//! `libkplace_blocks_gpu.so`) is the ABI's export layer (`kplace_abi::export`) over kernels
//! that enqueue work on the runtime's CUDA streams. What every such library needs, and
//! nothing of any one kernel, is here:
//!
//! - [`driver`]: libcuda through cudarc's `result`/`sys` layers with the runtime's raw
//!   handles; a [`driver::Device`] holds a reference on the device's primary context for as
//!   long as anything built in it lives, and binds it for teardown on any thread; small
//!   device buffers uploaded at create time.
//! - [`source`], [`nvrtc`] and [`program`]: a library ships CUDA C, compiled at the first create on a
//!   device for its compute capability (a CUBIN, or PTX for a device newer than the NVRTC)
//!   and loaded once per device and process.
//! - [`cufft`] and [`fft_shape`]: one cuFFT plan per state, without a work area of its own.
//! - [`queue`]: where a kernel's launch sequence goes. A kernel's plan computes grids,
//!   arguments and workspace carving ([`workspace`]) in code that knows nothing of CUDA and
//!   hands each step to a [`queue::Queue`]: a CUDA stream in the library, the host simulator
//!   (`kplace-cuda-hostsim`) in tests, so the launch sequence a GPU runs is the one tested
//!   without one.
//!
//! Guarantees: libcuda, libcufft and libnvrtc are found where the machine keeps them
//! (`kplace_cuda_libs`) and probed before first use, so a missing library is a
//! `KernelError` naming it and every place looked at (cudarc would panic); every failed call
//! is an error naming the call and the CUDA error; enqueueing never synchronizes and never
//! allocates.

#![warn(missing_docs)]

mod availability;
pub mod cufft;
pub mod driver;
pub mod fft_shape;
pub mod nvrtc;
pub mod program;
pub mod queue;
pub mod source;
pub mod workspace;

pub use availability::probe;

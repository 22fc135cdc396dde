//! kplace's standard block library on CUDA (`libkplace_blocks_gpu.so`, library name
//! `kplace-blocks-gpu`).
//!
//! The CPU block library's blocks, under the same names, parameters, defaults, checks and
//! messages (crate `kplace_blocks_contract`), over device memory, so a placement moves a
//! block between the CPU and a GPU with a YAML edit:
//!
//! | block               | enqueues  | arithmetic against the CPU library                    |
//! |---------------------|-----------|-------------------------------------------------------|
//! | `blocks.convert`    | 1         | equal bit for bit (every input type)                  |
//! | `blocks.window`     | 1         | equal bit for bit                                     |
//! | `blocks.fft`        | 3         | cuFFT against FFTW: within 1e-5 of the row's peak     |
//! | `blocks.power`      | 1         | equal bit for bit (with or without `axis`)            |
//! | `blocks.magnitude`  | 1         | equal bit for bit (with or without `axis`)            |
//! | `blocks.mean`       | 1         | equal bit for bit                                     |
//! | `blocks.beamform`   | 1         | equal bit for bit                                     |
//! | `blocks.combine`    | 1         | equal bit for bit                                     |
//! | `blocks.fir`        | 2 or 3    | equal bit for bit, across frames, under loss          |
//! | `blocks.transpose`  | 1         | equal bit for bit (a copy)                            |
//! | `blocks.add`        | 1         | equal bit for bit                                     |
//! | `blocks.multiply`   | 1         | equal bit for bit                                     |
//!
//! Each block's module states its launch sequence. Every kernel computes one output value per
//! thread with the CPU library's operations in the CPU library's order, as explicitly rounded
//! intrinsics compiled with `--fmad=false`; that is what "equal bit for bit" rests on, and
//! the tests check it on the host simulator. `blocks.fir` is stateful: its history lives in
//! the runtime's carry, in device memory, fenced on the stage's stream like any tensor.
//! `blocks.channelize` has no CUDA version yet: a placement runs it on the CPU.
//!
//! How the library uses CUDA (NVRTC at the first create on a device, one module per device
//! and process, launches that only enqueue, errors naming the call) is
//! `kplace_cudakit`'s. Each block is a plan that validates its configuration and enqueues its
//! launch sequence on a `kplace_cudakit::queue::Queue` without knowing CUDA, and a state that
//! holds the device, the plan's uploads (windows, weights, taps) and cuFFT plan. The tests run
//! the plans on the host simulator (`kplace-cuda-hostsim`) against the CPU library, and NVRTC
//! (which needs no GPU) compiles every source.

#![warn(missing_docs)]

pub mod beams;
pub mod binary;
pub mod convert;
pub mod detect;
pub mod fft;
pub mod fir;
pub mod gpu;
pub mod mean;
pub mod source;
pub mod transpose;
pub mod window;

pub use beams::{Beamform, Combine};
pub use binary::{Add, Multiply};
pub use convert::Convert;
pub use detect::{Magnitude, Power};
pub use fft::Fft;
pub use fir::Fir;
pub use kplace_cudakit::probe;
pub use mean::Mean;
pub use transpose::Transpose;
pub use window::Window;

kplace_abi::export_library!(
    c"kplace-blocks-gpu",
    [
        Convert, Window, Fft, Power, Magnitude, Mean, Beamform, Fir, Combine, Transpose, Add,
        Multiply
    ]
);

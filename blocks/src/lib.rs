//! kplace's standard block library on the CPU: the building blocks a DSP graph is written
//! with, so that a graph needs no kernel library of its own for the common steps.
//!
//! Built as a `cdylib` this crate is `libkplace_blocks.so` (library name `kplace-blocks`),
//! loaded like any kernel library. Every block runs on the calling thread over host memory,
//! takes one input (the combiner, the sum and the product two) and writes one output, of any
//! rank the ABI allows:
//!
//! | block               | input            | output         | what                                  |
//! |---------------------|------------------|----------------|---------------------------------------|
//! | `blocks.convert`    | any number `[..]`| `cf32`, `f32`  | to single precision, times `scale`    |
//! | `blocks.window`     | `cf32 [.., N]`   | `cf32 [.., N]` | a window along the last axis          |
//! | `blocks.fft`        | `cf32 [..]`      | `cf32 [..]`    | FFT or inverse FFT along one axis     |
//! | `blocks.power`      | `cf32 [..]`      | `f32 [..]`     | `re² + im²` (or its mean along `axis`)|
//! | `blocks.magnitude`  | `cf32 [..]`      | `f32 [..]`     | `sqrt(re² + im²)` (or its mean)       |
//! | `blocks.mean`       | `f32 [.., M, ..]`| `f32 [..]`     | mean along `axis`, times `scale`      |
//! | `blocks.transpose`  | any `[..]`       | same dtype     | the axes reordered by `axes`          |
//! | `blocks.add`        | `cf32`/`f32 [..]`, `w` | same dtype | `x + w`, `w` repeated over the leading axes |
//! | `blocks.multiply`   | `cf32`/`f32 [..]`, `w` | same dtype | `x * w` or `x * conj(w)`, as the sum  |
//! | `blocks.beamform`   | `cf32 [.., C]`   | `cf32 [.., B]` | delay-and-sum beams at given angles   |
//! | `blocks.combine`    | `cf32 [.., C]`, `cf32 [B, C]` | `cf32 [.., B]` | beams with given weights |
//! | `blocks.fir`        | `cf32`/`f32 [..]`| same dtype     | decimating FIR over the whole stream  |
//! | `blocks.channelize` | `cf32 [..]`      | `cf32 [.., M]` | polyphase channelizer, M channels     |
//!
//! Each block's module states its parameters and its arithmetic. What the blocks share with
//! each other and with their CUDA variant (`libkplace_blocks_gpu.so`, crate
//! `kplace-blocks-gpu`) is crate `kplace_blocks_contract`: names, parameters and their
//! checks, port layouts. Ports are checked at create and again at launch; every block but the
//! stream blocks and the transpose may be split along axis 0 in tiles that divide it (unless
//! axis 0 is the axis it works along), and a launch reads and writes only its tile's rows;
//! mutable scratch lives in the runtime's workspace, so no launch allocates and tiles of one
//! state may run at once; every
//! value is computed in double precision and rounded once, except the FFT's (FFTW, single
//! precision) and the FIR's (single precision, in a stated order) and the channelizer's (the
//! same, then FFTW). The FIR and the channelizer are stateful: each carries every lane's
//! history from frame to frame in the carry the runtime keeps (ABI version 2), so its stage
//! runs whole, one frame at a time.
//!
//! Built as an `rlib`, the blocks are plain Rust types implementing
//! [`kplace_abi::export::KernelImpl`].

#![warn(missing_docs)]

pub mod beamform;
pub mod binary;
pub mod channelize;
pub mod convert;
pub mod detect;
pub mod fft;
pub mod fir;
mod history;
mod layout;
pub mod mean;
pub mod transpose;
pub mod window;

pub use beamform::{Beamform, Combine};
pub use binary::{Add, Multiply};
pub use channelize::Channelize;
pub use convert::Convert;
pub use detect::{Magnitude, Power};
pub use fft::Fft;
pub use fir::Fir;
pub use mean::Mean;
pub use transpose::Transpose;
pub use window::Window;

kplace_abi::export_library!(
    c"kplace-blocks",
    [
        Convert, Window, Fft, Power, Magnitude, Mean, Beamform, Fir, Channelize, Combine,
        Transpose, Add, Multiply
    ]
);

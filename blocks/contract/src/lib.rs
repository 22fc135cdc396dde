//! What kplace's two block libraries share: `libkplace_blocks.so` on the CPU and
//! `libkplace_blocks_gpu.so` on CUDA.
//!
//! A block has one name, one set of parameters with one set of defaults, one set of checks
//! and messages, and one arithmetic, on either device, so a placement swap is a YAML edit and
//! a graph checked on one device is checked on the other. This crate holds what a block's
//! `create` decides, on any device: the ports and how a launch's tile covers them
//! ([`ports`]), the time axis and history of a stream block ([`stream`]), the window shapes
//! ([`window`]), the beamformers' weights and ports ([`beams`]), the reductions' ports (the
//! mean, and a detector's with an axis: [`reduce`]), the FFT's parameters ([`fft`]), the
//! converter's types ([`convert`]), the transpose's permutation ([`transpose`]) and the
//! two-input element-wise blocks' ([`binary`]). Each
//! check takes the [`Ports`](kplace_abi::export::ports::Ports) rule of the library asking:
//! host memory on the CPU, device memory on CUDA.
//!
//! What a block computes, per element and in which order, is stated once in the CPU
//! library's module docs; the CUDA kernels compute the same operations in the same order.

#![warn(missing_docs)]

pub mod beams;
pub mod binary;
pub mod choice;
pub mod convert;
pub mod fft;
pub mod names;
pub mod ports;
pub mod reduce;
pub mod stream;
pub mod transpose;
pub mod window;

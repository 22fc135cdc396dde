//! The radar kernels' contract, once: what every kplace backend must agree on for a graph to
//! run the same on any placement and for "the same bits on CPU and GPU" to hold by
//! construction rather than by copied code.
//!
//! - [`names`]: the kernels' logical names (`radar.range_fft`, ...), as C strings and as text.
//! - [`fft`]: the FFT stages' `planner` parameter.
//! - [`split`]: which kernels may be split, and `radar.range_fft`'s tiles.
//! - [`cfar`]: CFAR parameters, defaults and validation; training cells, alpha for a pfa, the
//!   threshold factor, the window's bounds.
//! - [`window`]: the Hann window's f32 coefficients.
//! - [`detection`]: the record CFAR and clustering write in their record lists.
//! - `config` (feature `abi`): each kernel's `create`-time checks on a `Config`, into typed
//!   values.
//!
//! Guarantees: every rule is a plain function of its inputs (no device, no global state), so
//! two backends that call it compute the same values bit for bit, and refuse the same
//! configurations with the same message ([`ParamError`]'s `Display`, the text users see). A
//! backend keeps only what is truly its own: plans, tiling, workspace sizing and launch.
//!
//! # Why the split between pure rules and `abi`
//!
//! The rules (names, parameters, defaults, the CFAR arithmetic, the window) depend on nothing:
//! they take numbers and text, so the runtime can read a default ([`cfar::DEFAULT_PFA`]) and a
//! reference model could check them without linking any ABI types, and with default features
//! this crate has no dependencies at all. Reading each radar kernel's `Config` into typed
//! values (`config`) needs `kplace-abi`'s `Config` and `KernelError`, so it sits behind the
//! `abi` feature, which both backends enable. The port checks any kernel library needs
//! (dtype, rank, memory, bytes, alignment, 32-bit cell counts, a record list's capacity)
//! are not the radar's: they are `kplace_abi::export::ports`, beside the ABI's other export
//! helpers.

#![warn(missing_docs)]

pub mod cfar;
pub mod detection;
mod error;
pub mod fft;
pub mod names;
pub mod split;
pub mod window;

#[cfg(feature = "abi")]
pub mod config;
#[cfg(all(test, feature = "abi"))]
mod test_ports;

pub use detection::Detection;
pub use error::ParamError;

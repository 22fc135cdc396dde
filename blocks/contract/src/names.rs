//! The blocks' names, as graphs name them: the same on every device.

use std::ffi::CStr;

/// `blocks.convert`.
pub const CONVERT: &CStr = c"blocks.convert";
/// `blocks.window`.
pub const WINDOW: &CStr = c"blocks.window";
/// `blocks.fft`.
pub const FFT: &CStr = c"blocks.fft";
/// `blocks.power`.
pub const POWER: &CStr = c"blocks.power";
/// `blocks.magnitude`.
pub const MAGNITUDE: &CStr = c"blocks.magnitude";
/// `blocks.mean`.
pub const MEAN: &CStr = c"blocks.mean";
/// `blocks.beamform`.
pub const BEAMFORM: &CStr = c"blocks.beamform";
/// `blocks.combine`.
pub const COMBINE: &CStr = c"blocks.combine";
/// `blocks.fir`.
pub const FIR: &CStr = c"blocks.fir";
/// `blocks.channelize`.
pub const CHANNELIZE: &CStr = c"blocks.channelize";
/// `blocks.transpose`.
pub const TRANSPOSE: &CStr = c"blocks.transpose";
/// `blocks.add`.
pub const ADD: &CStr = c"blocks.add";
/// `blocks.multiply`.
pub const MULTIPLY: &CStr = c"blocks.multiply";

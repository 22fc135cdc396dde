//! `blocks.convert`: numbers of any type to single-precision floats.
//!
//! - Input 0: any numeric dtype (`ci8`, `ci16`, `cf16`, `cf32`, `cf64`, `i8`, `i16`, `i32`,
//!   `f16`, `bf16`, `f32`, `f64`), any shape. Output 0: `cf32` or `f32`, the same dimensions: a complex
//!   input converts to `cf32`; a real one to `f32`, or to `cf32` with imaginary parts 0.
//! - `y = x * scale`, each part computed in double and rounded once (exact for the default
//!   scale, or any power of two, on integers up to 24 bits). Parameter `scale`: a finite
//!   number, default 1 (for full scale 1.0 from `ci16`, `3.0517578125e-5`, which is 2^-15).
//! - Split along axis 0 in tiles that divide it, or not split. No workspace.

use std::ffi::CStr;

use half::{bf16, f16};
use kplace_abi::export::{Config, KernelError, KernelImpl, Launch};
use kplace_abi::{DeviceKind, MemorySpace, Scalar, Tensor};
use kplace_blocks_contract::convert::ConvertPorts;
use kplace_blocks_contract::names;

use crate::layout::{PORTS, tile_slices};

/// The `blocks.convert` state.
#[derive(Debug)]
pub struct Convert(ConvertPorts);

impl Convert {
    /// Converts the tile's elements of `input`, values of type `T`, into `output`.
    fn convert<T: Copy + Into<f64>>(
        &self,
        input: &Tensor,
        output: &Tensor,
        elements: std::ops::Range<usize>,
    ) -> Result<(), KernelError> {
        let parts = (self.0.from.parts(), if self.0.complex { 2 } else { 1 });
        // SAFETY: the tile's rows of the input are complete and its rows of the output are
        // this launch's alone (the runtime's rule for tiles).
        let (x, y) = unsafe { tile_slices::<T, f32>(input, output, elements, parts)? };
        let scaled = |v: T| (v.into() * self.0.scale) as f32;
        if parts.0 == parts.1 {
            for (y, &x) in y.iter_mut().zip(x) {
                *y = scaled(x);
            }
        } else {
            // Real to complex: the imaginary parts are 0.
            for (y, &x) in y.chunks_exact_mut(2).zip(x) {
                y[0] = scaled(x);
                y[1] = 0.0;
            }
        }
        Ok(())
    }
}

impl KernelImpl for Convert {
    const NAME: &'static CStr = names::CONVERT;
    const DEVICE: DeviceKind = DeviceKind::CPU;
    const MEMORY: MemorySpace = MemorySpace::HOST;
    const N_INPUTS: u32 = 1;
    const N_OUTPUTS: u32 = 1;
    const NAMES_ITS_ERRORS: bool = true;

    fn create(config: &Config<'_>) -> Result<Self, KernelError> {
        ConvertPorts::check(config, &PORTS).map(Self)
    }

    fn workspace_bytes(&self) -> u64 {
        0
    }

    fn launch(&self, launch: &Launch<'_>) -> Result<(), KernelError> {
        let (input, output) = self.0.rows.tensors(launch)?;
        let elements = self.0.rows.elements(launch.tile())?;
        match self.0.from.scalar {
            Scalar::I8 => self.convert::<i8>(input, output, elements),
            Scalar::I16 => self.convert::<i16>(input, output, elements),
            Scalar::I32 => self.convert::<i32>(input, output, elements),
            Scalar::F16 => self.convert::<f16>(input, output, elements),
            Scalar::BF16 => self.convert::<bf16>(input, output, elements),
            Scalar::F32 => self.convert::<f32>(input, output, elements),
            Scalar::F64 => self.convert::<f64>(input, output, elements),
        }
    }
}

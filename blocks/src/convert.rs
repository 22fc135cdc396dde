//! `blocks.convert`: complex integers to complex floats.
//!
//! - Input 0: `ci16`, any shape. Output 0: `cf32`, the same dimensions.
//! - `y = x * scale`, each part computed in double and rounded once (exact for the default
//!   scale and any power of two). Parameter `scale`: a finite number, default 1 (for
//!   full-scale 1.0, `3.0517578125e-5`, which is 2^-15).
//! - Split along axis 0 in tiles that divide it, or not split. No workspace.

use std::ffi::CStr;

use kplace_abi::export::{Config, KernelError, KernelImpl, Launch};
use kplace_abi::{DeviceKind, Dtype, MemorySpace};

use crate::layout::{Rows, finite, named, tile_slices};

/// The `blocks.convert` state.
#[derive(Debug)]
pub struct Convert {
    ports: Rows,
    scale: f64,
}

impl KernelImpl for Convert {
    const NAME: &'static CStr = c"blocks.convert";
    const DEVICE: DeviceKind = DeviceKind::CPU;
    const MEMORY: MemorySpace = MemorySpace::HOST;
    const N_INPUTS: u32 = 1;
    const N_OUTPUTS: u32 = 1;

    fn create(config: &Config<'_>) -> Result<Self, KernelError> {
        (|| {
            config.reject_unknown_params(&["scale"])?;
            Ok(Self {
                ports: Rows::check(config, Dtype::CI16, Dtype::CF32, false)?,
                scale: finite(config, "scale", 1.0)?,
            })
        })()
        .map_err(|e| named(Self::NAME, e))
    }

    fn workspace_bytes(&self) -> u64 {
        0
    }

    fn launch(&self, launch: &Launch<'_>) -> Result<(), KernelError> {
        (|| {
            let (input, output) = self.ports.tensors(launch)?;
            let elements = self.ports.elements(launch.tile())?;
            // SAFETY: the tile's rows of the input are complete and its rows of the output are
            // this launch's alone (the runtime's rule for tiles).
            let (x, y) = unsafe { tile_slices::<i16, f32>(input, output, elements, (2, 2))? };
            for (y, &x) in y.iter_mut().zip(x) {
                *y = (f64::from(x) * self.scale) as f32;
            }
            Ok(())
        })()
        .map_err(|e| named(Self::NAME, e))
    }
}

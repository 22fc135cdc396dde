//! `blocks.window`: multiplies every row along the last axis by a window.
//!
//! - Input 0: `cf32 [.., N]`. Output 0: `cf32`, the same dimensions.
//! - `y[.., n] = x[.., n] * w[n]`, each part computed in double and rounded once, with the
//!   periodic (DFT-even) window over N, `t = 2 pi n / N`:
//!   `hann` 0.5 - 0.5 cos t (the default); `hamming` 0.54 - 0.46 cos t;
//!   `blackman` 0.42 - 0.5 cos t + 0.08 cos 2t; `rect` 1.
//! - Parameter `window`: the window's name. Split along axis 0 in tiles that divide it (a
//!   tensor of rank 2 or more), or not split. No workspace.

use kplace_abi::export::{Config, KernelError, KernelImpl, Launch};
use kplace_abi::{DeviceKind, Dtype, MemorySpace};
use kplace_blocks_contract::names;
use std::ffi::CStr;

use kplace_blocks_contract::ports::Rows;
use kplace_blocks_contract::window::Shape;

use crate::layout::{PORTS, tile_slices};

/// The `blocks.window` state: the window over the last axis.
#[derive(Debug)]
pub struct Window {
    ports: Rows,
    coefficients: Vec<f64>,
}

impl KernelImpl for Window {
    const NAME: &'static CStr = names::WINDOW;
    const DEVICE: DeviceKind = DeviceKind::CPU;
    const MEMORY: MemorySpace = MemorySpace::HOST;
    const N_INPUTS: u32 = 1;
    const N_OUTPUTS: u32 = 1;
    const NAMES_ITS_ERRORS: bool = true;

    fn create(config: &Config<'_>) -> Result<Self, KernelError> {
        config.reject_unknown_params(&["window"])?;
        let shape: Shape = config.parse_param("window")?.unwrap_or_default();
        let ports = Rows::check(config, &PORTS, Dtype::CF32, Dtype::CF32, true)?;
        Ok(Self {
            coefficients: shape.coefficients(ports.last),
            ports,
        })
    }

    fn workspace_bytes(&self) -> u64 {
        0
    }

    fn launch(&self, launch: &Launch<'_>) -> Result<(), KernelError> {
        let (input, output) = self.ports.tensors(launch)?;
        let elements = self.ports.elements(launch.tile())?;
        // SAFETY: as every tile: its input rows are complete, its output rows its own.
        let (x, y) = unsafe { tile_slices::<f32, f32>(input, output, elements, (2, 2))? };
        let row = 2 * self.ports.last;
        for (y, x) in y.chunks_exact_mut(row).zip(x.chunks_exact(row)) {
            for ((y, x), &w) in y
                .chunks_exact_mut(2)
                .zip(x.chunks_exact(2))
                .zip(&self.coefficients)
            {
                y[0] = (f64::from(x[0]) * w) as f32;
                y[1] = (f64::from(x[1]) * w) as f32;
            }
        }
        Ok(())
    }
}

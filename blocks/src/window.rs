//! `blocks.window`: multiplies every row along the last axis by a window.
//!
//! - Input 0: `cf32 [.., N]`. Output 0: `cf32`, the same dimensions.
//! - `y[.., n] = x[.., n] * w[n]`, each part computed in double and rounded once, with the
//!   periodic (DFT-even) window over N, `t = 2 pi n / N`:
//!   `hann` 0.5 - 0.5 cos t (the default); `hamming` 0.54 - 0.46 cos t;
//!   `blackman` 0.42 - 0.5 cos t + 0.08 cos 2t; `rect` 1.
//! - Parameter `window`: the window's name. Split along axis 0 in tiles that divide it (a
//!   tensor of rank 2 or more), or not split. No workspace.

use std::ffi::CStr;
use std::str::FromStr;

use kplace_abi::export::{Config, KernelError, KernelImpl, Launch};
use kplace_abi::{DeviceKind, Dtype, MemorySpace};

use crate::layout::{Rows, tile_slices};

/// A window's shape.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Shape {
    /// Rectangular: every coefficient 1.
    Rect,
    /// Hann.
    #[default]
    Hann,
    /// Hamming.
    Hamming,
    /// Blackman.
    Blackman,
}

impl FromStr for Shape {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "rect" => Ok(Shape::Rect),
            "hann" => Ok(Shape::Hann),
            "hamming" => Ok(Shape::Hamming),
            "blackman" => Ok(Shape::Blackman),
            _ => Err("expected rect, hann, hamming or blackman".into()),
        }
    }
}

impl Shape {
    /// The periodic window of length `n`, in double.
    pub fn coefficients(self, n: usize) -> Vec<f64> {
        (0..n)
            .map(|i| {
                let t = 2.0 * std::f64::consts::PI * i as f64 / n as f64;
                match self {
                    Shape::Rect => 1.0,
                    Shape::Hann => 0.5 - 0.5 * t.cos(),
                    Shape::Hamming => 0.54 - 0.46 * t.cos(),
                    Shape::Blackman => 0.42 - 0.5 * t.cos() + 0.08 * (2.0 * t).cos(),
                }
            })
            .collect()
    }
}

/// The `blocks.window` state: the window over the last axis.
#[derive(Debug)]
pub struct Window {
    ports: Rows,
    coefficients: Vec<f64>,
}

impl KernelImpl for Window {
    const NAME: &'static CStr = c"blocks.window";
    const DEVICE: DeviceKind = DeviceKind::CPU;
    const MEMORY: MemorySpace = MemorySpace::HOST;
    const N_INPUTS: u32 = 1;
    const N_OUTPUTS: u32 = 1;
    const NAMES_ITS_ERRORS: bool = true;

    fn create(config: &Config<'_>) -> Result<Self, KernelError> {
        config.reject_unknown_params(&["window"])?;
        let shape: Shape = config.parse_param("window")?.unwrap_or_default();
        let ports = Rows::check(config, Dtype::CF32, Dtype::CF32, true)?;
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

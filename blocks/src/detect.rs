//! `blocks.power` and `blocks.magnitude`: complex values to their power or magnitude.
//!
//! - Input 0: `cf32`, any shape. Output 0: `f32`, the same dimensions.
//! - `blocks.power`: `re² + im²`; `blocks.magnitude`: `sqrt(re² + im²)`; both computed in
//!   double and rounded once.
//! - Split along axis 0 in tiles that divide it, or not split. No workspace.
//! - Parameter `axis` (absent by default): the mean of those values along that axis instead,
//!   as `blocks.mean` takes it ([`crate::mean`]): output 0 `f32` without the axis, each value
//!   `1 / M` times the sum of the doubles above in the order of the axis, rounded once (so
//!   one stage rather than two, and no rounding between them). Split as the mean is; the
//!   workspace holds its running sums.

use std::ffi::CStr;
use std::marker::PhantomData;

use kplace_abi::export::{Config, KernelError, KernelImpl, Launch};
use kplace_abi::{DeviceKind, MemorySpace};
use kplace_blocks_contract::names;
use kplace_blocks_contract::reduce::Detector;

use crate::layout::{PORTS, tile_slices};
use crate::mean::{reduce, sums_bytes};

/// What a detector computes of each complex value.
pub trait Law: Send + Sync + 'static {
    /// The block's name.
    const NAME: &'static CStr;
    /// The real value of `re + i im`, in double.
    fn of(re: f64, im: f64) -> f64;
}

/// The square law: power.
#[derive(Debug)]
pub enum Square {}

impl Law for Square {
    const NAME: &'static CStr = names::POWER;
    fn of(re: f64, im: f64) -> f64 {
        re * re + im * im
    }
}

/// The linear law: magnitude.
#[derive(Debug)]
pub enum Linear {}

impl Law for Linear {
    const NAME: &'static CStr = names::MAGNITUDE;
    fn of(re: f64, im: f64) -> f64 {
        (re * re + im * im).sqrt()
    }
}

/// A detector's state: complex values in, `L::of` each out.
#[derive(Debug)]
pub struct Detect<L> {
    ports: Detector,
    law: PhantomData<L>,
}

/// `blocks.power`.
pub type Power = Detect<Square>;
/// `blocks.magnitude`.
pub type Magnitude = Detect<Linear>;

impl<L: Law> KernelImpl for Detect<L> {
    const NAME: &'static CStr = L::NAME;
    const DEVICE: DeviceKind = DeviceKind::CPU;
    const MEMORY: MemorySpace = MemorySpace::HOST;
    const N_INPUTS: u32 = 1;
    const N_OUTPUTS: u32 = 1;
    const NAMES_ITS_ERRORS: bool = true;

    fn create(config: &Config<'_>) -> Result<Self, KernelError> {
        Ok(Self {
            ports: Detector::check(config, &PORTS)?,
            law: PhantomData,
        })
    }

    fn workspace_bytes(&self) -> u64 {
        match &self.ports {
            Detector::Each(_) => 0,
            Detector::Mean(r) => sums_bytes(r),
        }
    }

    fn launch(&self, launch: &Launch<'_>) -> Result<(), KernelError> {
        let rows = match &self.ports {
            Detector::Each(rows) => rows,
            Detector::Mean(r) => {
                return reduce::<2>(r, launch, |x| L::of(f64::from(x[0]), f64::from(x[1])));
            }
        };
        let (input, output) = rows.tensors(launch)?;
        let elements = rows.elements(launch.tile())?;
        // SAFETY: as every tile: its input rows are complete, its output rows its own.
        let (x, y) = unsafe { tile_slices::<f32, f32>(input, output, elements, (2, 1))? };
        for (y, x) in y.iter_mut().zip(x.chunks_exact(2)) {
            *y = L::of(f64::from(x[0]), f64::from(x[1])) as f32;
        }
        Ok(())
    }
}

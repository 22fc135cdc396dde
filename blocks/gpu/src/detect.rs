//! `blocks.power` and `blocks.magnitude` on CUDA: `re² + im²` and its square root, in double,
//! rounded once (the CPU library's arithmetic); with `axis`, their mean along it, as
//! `blocks.mean`'s launch sums (`crate::mean`). Split along axis 0 as on the CPU; no
//! workspace; one enqueue per launch.

use std::ffi::CStr;
use std::marker::PhantomData;

use kplace_abi::Tile;
use kplace_abi::export::{Config, KernelError, Launch};
use kplace_blocks_contract::names;
use kplace_blocks_contract::reduce::Detector;
use kplace_cudakit::queue::{CudaQueue, Queue, arg};

use crate::gpu::{PORTS, Plain, PlainPlan, address, grid};
use crate::mean::enqueue_reduce;
use crate::source::Function;

/// What a detector computes of each complex value.
pub trait Law: Send + Sync + 'static {
    /// The block's name.
    const NAME: &'static CStr;
    /// Its kernel.
    const FUNCTION: Function;
    /// Its kernel of the mean along an axis.
    const MEAN: Function;
}

/// The square law: power.
#[derive(Debug)]
pub enum Square {}

impl Law for Square {
    const NAME: &'static CStr = names::POWER;
    const FUNCTION: Function = Function::Power;
    const MEAN: Function = Function::PowerMean;
}

/// The linear law: magnitude.
#[derive(Debug)]
pub enum Linear {}

impl Law for Linear {
    const NAME: &'static CStr = names::MAGNITUDE;
    const FUNCTION: Function = Function::Magnitude;
    const MEAN: Function = Function::MagnitudeMean;
}

/// A detector's launch, independent of CUDA.
#[derive(Clone, Copy, Debug)]
pub struct DetectPlan<L> {
    ports: Detector,
    law: PhantomData<L>,
}

impl<L: Law> DetectPlan<L> {
    /// Enqueues `tile` of the input at `x` into the output at `y`.
    ///
    /// # Safety
    /// `x` and `y` must address the input and output, valid for the queue until the work
    /// completes, and no concurrent launch may write the tile's part of the output.
    pub unsafe fn enqueue(
        &self,
        queue: &impl Queue<Function>,
        x: u64,
        y: u64,
        tile: Tile,
    ) -> Result<(), KernelError> {
        let rows = match &self.ports {
            Detector::Each(rows) => rows,
            Detector::Mean(r) => {
                // SAFETY: the caller's promise.
                return unsafe { enqueue_reduce(queue, L::MEAN, r, (x, y), tile, 8) };
            }
        };
        let elements = rows.elements(tile)?;
        let (x, y) = (x + 8 * elements.start as u64, y + 4 * elements.start as u64);
        let count = elements.len() as u64;
        // SAFETY: the arguments of `(const kb_cf32 *, float *, kb_u64)`; the tile's part of
        // both tensors, as the caller promises.
        unsafe {
            queue.launch(
                L::FUNCTION,
                grid(count)?,
                &mut [arg(&x), arg(&y), arg(&count)],
            )
        }
    }
}

/// `blocks.power` on CUDA.
pub type Power = Plain<DetectPlan<Square>>;
/// `blocks.magnitude` on CUDA.
pub type Magnitude = Plain<DetectPlan<Linear>>;

impl<L: Law> PlainPlan for DetectPlan<L> {
    const NAME: &'static CStr = L::NAME;

    fn plan(config: &Config<'_>) -> Result<Self, KernelError> {
        Ok(Self {
            ports: Detector::check(config, &PORTS)?,
            law: PhantomData,
        })
    }

    fn enqueue_launch(
        &self,
        queue: &CudaQueue<'_, Function>,
        launch: &Launch<'_>,
    ) -> Result<(), KernelError> {
        let (input, output) = match &self.ports {
            Detector::Each(rows) => (&rows.input, &rows.output),
            Detector::Mean(r) => (&r.input, &r.output),
        };
        let x = address(launch.input(0), "input 0", input)?;
        let y = address(launch.output(0), "output 0", output)?;
        // SAFETY: the tensors were checked against the descriptors create accepted; the
        // runtime's rule for tiles gives this launch its part of the output.
        unsafe { self.enqueue(queue, x, y, launch.tile()) }
    }
}

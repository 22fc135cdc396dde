//! `blocks.mean` on CUDA: the mean along an axis, one thread per output value summing its
//! values in double in the order of the axis, rounded once (the CPU library's arithmetic);
//! and that launch for `blocks.power` and `blocks.magnitude` given an `axis`. Split along
//! axis 0 as on the CPU; no workspace (each sum lives in its thread); one enqueue per launch.

use std::ffi::CStr;

use kplace_abi::Tile;
use kplace_abi::export::{Config, KernelError, Launch};
use kplace_blocks_contract::names;
use kplace_blocks_contract::reduce::{self, Reduce};
use kplace_cudakit::queue::{CudaQueue, Queue, arg};

use crate::gpu::{PORTS, Plain, PlainPlan, address, grid};
use crate::source::Function;

/// Enqueues `function`, a reduction `(const T *, float *, kb_u64 count, kb_u64 inner, double
/// factor, kb_u64 n)`, over `tile` of the input at `x` (elements of `element_bytes`) into the
/// output at `y`.
///
/// # Safety
/// `x` and `y` must address the input and output, valid for the queue until the work
/// completes, and no concurrent launch may write the tile's part of the output.
pub(crate) unsafe fn enqueue_reduce(
    queue: &impl Queue<Function>,
    function: Function,
    r: &Reduce,
    (x, y): (u64, u64),
    tile: Tile,
    element_bytes: u64,
) -> Result<(), KernelError> {
    let blocks = r.blocks(tile)?;
    let (read, written) = (r.input_elements(&blocks), r.output_elements(&blocks));
    let x = x + element_bytes * read.start as u64;
    let y = y + 4 * written.start as u64;
    let (count, inner, n) = (r.count as u64, r.inner as u64, written.len() as u64);
    let factor = r.factor;
    // SAFETY: the arguments of the reduction's signature; the tile's part of both tensors,
    // as the caller promises.
    unsafe {
        queue.launch(
            function,
            grid(n)?,
            &mut [
                arg(&x),
                arg(&y),
                arg(&count),
                arg(&inner),
                arg(&factor),
                arg(&n),
            ],
        )
    }
}

/// The mean's launch, independent of CUDA.
#[derive(Clone, Copy, Debug)]
pub struct MeanPlan {
    ports: Reduce,
}

impl MeanPlan {
    /// Enqueues `tile` of the mean of the input at `x` into the output at `y`.
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
        // SAFETY: the caller's promise.
        unsafe { enqueue_reduce(queue, Function::Mean, &self.ports, (x, y), tile, 4) }
    }
}

/// `blocks.mean` on CUDA.
pub type Mean = Plain<MeanPlan>;

impl PlainPlan for MeanPlan {
    const NAME: &'static CStr = names::MEAN;

    fn plan(config: &Config<'_>) -> Result<Self, KernelError> {
        Ok(Self {
            ports: reduce::mean(config, &PORTS)?,
        })
    }

    fn enqueue_launch(
        &self,
        queue: &CudaQueue<'_, Function>,
        launch: &Launch<'_>,
    ) -> Result<(), KernelError> {
        let x = address(launch.input(0), "input 0", &self.ports.input)?;
        let y = address(launch.output(0), "output 0", &self.ports.output)?;
        // SAFETY: both checked against the descriptors create accepted; the runtime's rule
        // for tiles gives this launch its part of the output.
        unsafe { self.enqueue(queue, x, y, launch.tile()) }
    }
}

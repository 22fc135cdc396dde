//! `blocks.mean` on CUDA: the mean over axis 0, one thread per output value summing its column
//! in double in the order of the rows, rounded once (the CPU library's arithmetic). Not split;
//! no workspace (each sum lives in its thread); one enqueue per launch.

use std::ffi::CStr;

use kplace_abi::export::{Config, KernelError, Launch};
use kplace_blocks_contract::mean::MeanPorts;
use kplace_blocks_contract::names;
use kplace_cudakit::queue::{CudaQueue, Queue, arg};

use crate::gpu::{PORTS, Plain, PlainPlan, address, grid};
use crate::source::Function;

/// The mean's launch, independent of CUDA.
#[derive(Clone, Copy, Debug)]
pub struct MeanPlan {
    ports: MeanPorts,
}

impl MeanPlan {
    /// Enqueues the mean of the input at `x` into the output at `y`.
    ///
    /// # Safety
    /// `x` and `y` must address the input and output, valid for the queue until the work
    /// completes, and no concurrent launch may write the output.
    pub unsafe fn enqueue(
        &self,
        queue: &impl Queue<Function>,
        x: u64,
        y: u64,
    ) -> Result<(), KernelError> {
        let (rows, row_len) = (self.ports.rows as u64, self.ports.row_len as u64);
        let factor = self.ports.factor;
        // SAFETY: the arguments of `(const float *, float *, kb_u64, kb_u64, double)`.
        unsafe {
            queue.launch(
                Function::Mean,
                grid(row_len)?,
                &mut [arg(&x), arg(&y), arg(&rows), arg(&row_len), arg(&factor)],
            )
        }
    }
}

/// `blocks.mean` on CUDA.
pub type Mean = Plain<MeanPlan>;

impl PlainPlan for MeanPlan {
    const NAME: &'static CStr = names::MEAN;

    fn plan(config: &Config<'_>) -> Result<Self, KernelError> {
        Ok(Self {
            ports: MeanPorts::check(config, &PORTS)?,
        })
    }

    fn enqueue_launch(
        &self,
        queue: &CudaQueue<'_, Function>,
        launch: &Launch<'_>,
    ) -> Result<(), KernelError> {
        let x = address(launch.input(0), "input 0", &self.ports.input)?;
        let y = address(launch.output(0), "output 0", &self.ports.output)?;
        // SAFETY: both checked against the descriptors create accepted; an unsplit stage
        // writes its whole output alone.
        unsafe { self.enqueue(queue, x, y) }
    }
}

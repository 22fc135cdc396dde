//! `blocks.mean` on CUDA: the mean over axis 0, one thread per output value summing its column
//! in double in the order of the rows, rounded once (the CPU library's arithmetic). Not split;
//! no workspace (each sum lives in its thread); one enqueue per launch.

use std::ffi::CStr;

use kplace_abi::export::{Config, KernelError, KernelImpl, Launch};
use kplace_abi::{DeviceKind, MemorySpace};
use kplace_blocks_contract::mean::MeanPorts;
use kplace_blocks_contract::names;
use kplace_cudakit::queue::{Queue, arg};

use crate::gpu::{Gpu, PORTS, address, grid};
use crate::source::Function;

/// The mean's launch, independent of CUDA.
#[derive(Clone, Copy, Debug)]
pub struct MeanPlan {
    ports: MeanPorts,
}

impl MeanPlan {
    /// Validates a configuration as `create` does.
    pub fn from_config(config: &Config<'_>) -> Result<Self, KernelError> {
        Ok(Self {
            ports: MeanPorts::check(config, &PORTS)?,
        })
    }

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
#[derive(Debug)]
pub struct Mean {
    plan: MeanPlan,
    gpu: Gpu,
}

impl KernelImpl for Mean {
    const NAME: &'static CStr = names::MEAN;
    const DEVICE: DeviceKind = DeviceKind::CUDA;
    const MEMORY: MemorySpace = MemorySpace::DEVICE;
    const N_INPUTS: u32 = 1;
    const N_OUTPUTS: u32 = 1;
    const NAMES_ITS_ERRORS: bool = true;

    fn create(config: &Config<'_>) -> Result<Self, KernelError> {
        let plan = MeanPlan::from_config(config)?;
        Ok(Self {
            plan,
            gpu: Gpu::open(config)?,
        })
    }

    fn workspace_bytes(&self) -> u64 {
        0
    }

    fn launch(&self, launch: &Launch<'_>) -> Result<(), KernelError> {
        let ports = &self.plan.ports;
        let x = address(launch.input(0), "input 0", &ports.input)?;
        let y = address(launch.output(0), "output 0", &ports.output)?;
        // SAFETY: both checked against the descriptors create accepted; an unsplit stage
        // writes its whole output alone.
        unsafe { self.plan.enqueue(&self.gpu.queue(launch, None), x, y) }
    }
}

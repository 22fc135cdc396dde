//! `blocks.transpose` on CUDA: one thread per output element, which finds its input element
//! through the index table (the output's dimensions and the input's strides along them,
//! computed by the contract and uploaded at create) and copies its bits. Not split; no
//! workspace; one enqueue per launch.

use std::ffi::CStr;

use kplace_abi::export::{Config, KernelError, KernelImpl, Launch};
use kplace_abi::{DeviceKind, MemorySpace};
use kplace_blocks_contract::names;
use kplace_blocks_contract::transpose::Transpose as Spec;
use kplace_cudakit::driver::DeviceBuffer;
use kplace_cudakit::queue::{Queue, arg};

use crate::gpu::{Gpu, PORTS, address, grid};
use crate::source::Function;

/// The transpose's launch, independent of CUDA.
#[derive(Clone, Debug)]
pub struct TransposePlan {
    spec: Spec,
}

impl TransposePlan {
    /// Validates a configuration as `create` does.
    pub fn from_config(config: &Config<'_>) -> Result<Self, KernelError> {
        Ok(Self {
            spec: Spec::check(config, &PORTS)?,
        })
    }

    /// The index table `create` uploads.
    pub fn table(&self) -> Vec<u64> {
        self.spec.table()
    }

    /// Enqueues the copy of the input at `x` into the output at `y`, with the index table at
    /// `table`.
    ///
    /// # Safety
    /// `x`, `y` and `table` must address the input, the output and the table, valid for the
    /// queue until the work completes; no concurrent launch may write the output.
    pub unsafe fn enqueue(
        &self,
        queue: &impl Queue<Function>,
        x: u64,
        y: u64,
        table: u64,
    ) -> Result<(), KernelError> {
        let function = match self.spec.element_bytes {
            1 => Function::Transpose1,
            2 => Function::Transpose2,
            4 => Function::Transpose4,
            8 => Function::Transpose8,
            _ => Function::Transpose16,
        };
        let rank = self.spec.dims().len() as u64;
        let count = self.spec.elements as u64;
        // SAFETY: the arguments of `(const T *, T *, const kb_u64 *, kb_u64, kb_u64)`, as
        // the caller promises.
        unsafe {
            queue.launch(
                function,
                grid(count)?,
                &mut [arg(&x), arg(&y), arg(&table), arg(&rank), arg(&count)],
            )
        }
    }
}

/// `blocks.transpose` on CUDA: the plan and its index table on the device.
#[derive(Debug)]
pub struct Transpose {
    plan: TransposePlan,
    table: DeviceBuffer,
    gpu: Gpu,
}

impl KernelImpl for Transpose {
    const NAME: &'static CStr = names::TRANSPOSE;
    const DEVICE: DeviceKind = DeviceKind::CUDA;
    const MEMORY: MemorySpace = MemorySpace::DEVICE;
    const N_INPUTS: u32 = 1;
    const N_OUTPUTS: u32 = 1;
    const NAMES_ITS_ERRORS: bool = true;

    fn create(config: &Config<'_>) -> Result<Self, KernelError> {
        let plan = TransposePlan::from_config(config)?;
        let gpu = Gpu::open(config)?;
        let table = DeviceBuffer::upload(&gpu.device, &plan.table())?;
        Ok(Self { plan, table, gpu })
    }

    fn workspace_bytes(&self) -> u64 {
        0
    }

    fn launch(&self, launch: &Launch<'_>) -> Result<(), KernelError> {
        let x = address(launch.input(0), "input 0", &self.plan.spec.input)?;
        let y = address(launch.output(0), "output 0", &self.plan.spec.output)?;
        // SAFETY: both checked against the descriptors create accepted; the table lives as
        // long as the state; an unsplit stage writes its whole output alone.
        unsafe {
            self.plan
                .enqueue(&self.gpu.queue(launch, None), x, y, self.table.address())
        }
    }
}

//! What every CUDA block holds and checks: device memory ports, the device and the library's
//! functions there, the launch geometry, and the state of a block that is only its plan
//! ([`Plain`]).

use std::ffi::CStr;
use std::sync::Arc;

use kplace_abi::export::ports::Ports;
use kplace_abi::export::{Config, KernelError, KernelImpl, Launch};
use kplace_abi::{DeviceKind, MemorySpace, Tensor, TensorDesc};
use kplace_cudakit::cufft::Fft;
use kplace_cudakit::driver::Device;
use kplace_cudakit::program::{self, Functions};
use kplace_cudakit::queue::{CudaQueue, Grid};

use crate::source::Function;

/// What the CUDA blocks require of their ports: device memory, data aligned for the 8-byte
/// (cf32, f64) accesses the kernels make (the ABI promises 64). Counts are 64-bit, so any
/// size the ABI allows.
pub const PORTS: Ports = Ports {
    memory: MemorySpace::DEVICE,
    data_align: 8,
    u32_cells: false,
};

/// Threads per block of every kernel (each thread computes one output value).
const THREADS: u32 = 256;

/// One thread per item of `items`.
pub fn grid(items: u64) -> Result<Grid, KernelError> {
    Grid::linear(items, THREADS)
}

/// The device address of a launch tensor, checked against the descriptor `create` accepted.
pub fn address(
    tensor: Result<&Tensor, KernelError>,
    what: &str,
    expected: &TensorDesc,
) -> Result<u64, KernelError> {
    Ok(PORTS.launch(tensor, what, expected)?.data as u64)
}

/// A state's hold on its device: the primary context (retained while the state lives) and
/// the library's functions there.
#[derive(Debug)]
pub struct Gpu {
    /// The device the state was created on.
    pub device: Arc<Device>,
    functions: &'static Functions<Function>,
}

impl Gpu {
    /// Opens the configuration's device and loads the library's functions there (compiled by
    /// NVRTC at the first create on the device).
    pub fn open(config: &Config<'_>) -> Result<Self, KernelError> {
        let device = Device::open(config.device_ordinal())?;
        let _bound = device.bind()?;
        let functions = program::functions::<Function>(&device)?;
        Ok(Self { device, functions })
    }

    /// The queue of a launch: its stream, with the state's cuFFT plan if it has one.
    pub fn queue<'a>(&self, launch: &Launch<'_>, fft: Option<&'a Fft>) -> CudaQueue<'a, Function> {
        CudaQueue {
            stream: launch.stream().cast(),
            functions: self.functions,
            fft,
        }
    }
}

/// A CUDA block whose state is its plan and its device: nothing uploaded at create, no
/// workspace. [`Plain`] is its kernel.
pub trait PlainPlan: Sized + Send + Sync + 'static {
    /// The block's name.
    const NAME: &'static CStr;
    /// Its inputs (it writes one output).
    const N_INPUTS: u32 = 1;

    /// Validates a configuration as `create` does.
    fn plan(config: &Config<'_>) -> Result<Self, KernelError>;

    /// Checks the launch's ports against what `plan` accepted and enqueues its work on `queue`.
    fn enqueue_launch(
        &self,
        queue: &CudaQueue<'_, Function>,
        launch: &Launch<'_>,
    ) -> Result<(), KernelError>;
}

/// The state of a [`PlainPlan`] block on its device.
#[derive(Debug)]
pub struct Plain<P> {
    plan: P,
    gpu: Gpu,
}

impl<P: PlainPlan> KernelImpl for Plain<P> {
    const NAME: &'static CStr = P::NAME;
    const DEVICE: DeviceKind = DeviceKind::CUDA;
    const MEMORY: MemorySpace = MemorySpace::DEVICE;
    const N_INPUTS: u32 = P::N_INPUTS;
    const N_OUTPUTS: u32 = 1;
    const NAMES_ITS_ERRORS: bool = true;

    fn create(config: &Config<'_>) -> Result<Self, KernelError> {
        let plan = P::plan(config)?;
        Ok(Self {
            plan,
            gpu: Gpu::open(config)?,
        })
    }

    fn workspace_bytes(&self) -> u64 {
        0
    }

    fn launch(&self, launch: &Launch<'_>) -> Result<(), KernelError> {
        self.plan
            .enqueue_launch(&self.gpu.queue(launch, None), launch)
    }
}

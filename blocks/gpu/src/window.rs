//! `blocks.window` on CUDA: every row along the last axis times the window (the contract's
//! coefficients, in double, uploaded at create), each part in double, rounded once. Split
//! along axis 0 as on the CPU; no workspace; one enqueue per launch.

use std::ffi::CStr;

use kplace_abi::export::{Config, KernelError, KernelImpl, Launch};
use kplace_abi::{DeviceKind, Dtype, MemorySpace, Tile};
use kplace_blocks_contract::names;
use kplace_blocks_contract::ports::Rows;
use kplace_blocks_contract::window::Shape;
use kplace_cudakit::driver::DeviceBuffer;
use kplace_cudakit::queue::{Queue, arg};

use crate::gpu::{Gpu, PORTS, grid};
use crate::source::Function;

/// The window's launch, independent of CUDA.
#[derive(Clone, Debug)]
pub struct WindowPlan {
    rows: Rows,
    coefficients: Vec<f64>,
}

impl WindowPlan {
    /// Validates a configuration as `create` does and computes the coefficients.
    pub fn from_config(config: &Config<'_>) -> Result<Self, KernelError> {
        config.reject_unknown_params(&["window"])?;
        let shape: Shape = config.parse_param("window")?.unwrap_or_default();
        let rows = Rows::check(config, &PORTS, Dtype::CF32, Dtype::CF32, true)?;
        Ok(Self {
            coefficients: shape.coefficients(rows.last),
            rows,
        })
    }

    /// The window over the last axis, which `create` uploads.
    pub fn coefficients(&self) -> &[f64] {
        &self.coefficients
    }

    /// Enqueues `tile` of the input at `x` into the output at `y`, with the coefficients at
    /// `w`.
    ///
    /// # Safety
    /// `x`, `y` and `w` must address the input, the output and the coefficients, valid for
    /// the queue until the work completes; no concurrent launch may write the tile's part of
    /// the output.
    pub unsafe fn enqueue(
        &self,
        queue: &impl Queue<Function>,
        x: u64,
        y: u64,
        w: u64,
        tile: Tile,
    ) -> Result<(), KernelError> {
        let elements = self.rows.elements(tile)?;
        let offset = 8 * elements.start as u64;
        let (x, y) = (x + offset, y + offset);
        let (last, count) = (self.rows.last as u64, elements.len() as u64);
        // SAFETY: the arguments of `(const kb_cf32 *, kb_cf32 *, const double *, kb_u64,
        // kb_u64)`; the tile starts a row, as the caller's addresses do.
        unsafe {
            queue.launch(
                Function::Window,
                grid(count)?,
                &mut [arg(&x), arg(&y), arg(&w), arg(&last), arg(&count)],
            )
        }
    }
}

/// `blocks.window` on CUDA: the plan and its coefficients on the device.
#[derive(Debug)]
pub struct Window {
    plan: WindowPlan,
    coefficients: DeviceBuffer,
    gpu: Gpu,
}

impl KernelImpl for Window {
    const NAME: &'static CStr = names::WINDOW;
    const DEVICE: DeviceKind = DeviceKind::CUDA;
    const MEMORY: MemorySpace = MemorySpace::DEVICE;
    const N_INPUTS: u32 = 1;
    const N_OUTPUTS: u32 = 1;
    const NAMES_ITS_ERRORS: bool = true;

    fn create(config: &Config<'_>) -> Result<Self, KernelError> {
        let plan = WindowPlan::from_config(config)?;
        let gpu = Gpu::open(config)?;
        let coefficients = DeviceBuffer::upload(&gpu.device, plan.coefficients())?;
        Ok(Self {
            plan,
            coefficients,
            gpu,
        })
    }

    fn workspace_bytes(&self) -> u64 {
        0
    }

    fn launch(&self, launch: &Launch<'_>) -> Result<(), KernelError> {
        let (x, y) = self.plan.rows.tensors(launch)?;
        // SAFETY: the tensors were checked against the descriptors create accepted; the
        // coefficients live as long as the state; the tile's output is this launch's.
        unsafe {
            self.plan.enqueue(
                &self.gpu.queue(launch, None),
                x.data as u64,
                y.data as u64,
                self.coefficients.address(),
                launch.tile(),
            )
        }
    }
}

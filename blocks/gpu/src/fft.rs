//! `blocks.fft` on CUDA: the FFT, or inverse FFT, along one axis, with cuFFT.
//!
//! Parameters and ports are the CPU library's (`kplace_blocks_contract::fft::FftPorts`;
//! `planner` is accepted and unused: cuFFT has no rigor to choose). Three enqueues per launch:
//! `kb_fft_gather` copies the launch's transforms into contiguous rows of the workspace (a
//! strided copy along an axis other than the last), cuFFT transforms them in place (single
//! precision, any N), and `kb_fft_scatter` writes them to the output times `scale` in single
//! precision, as FFTW's result is on the CPU. So the input, which other stages may read, is
//! never written. Split along axis 0 as on the CPU. Workspace: the rows, then cuFFT's work
//! area; each state owns a cuFFT plan for one launch's batch.

use std::ffi::CStr;

use kplace_abi::export::{Config, KernelError, KernelImpl, Launch};
use kplace_abi::{DeviceKind, MemorySpace, Tile};
use kplace_blocks_contract::fft::{Direction, FftPorts};
use kplace_blocks_contract::names;
use kplace_cudakit::cufft;
use kplace_cudakit::fft_shape::{FftDirection, FftLayout, FftShape};
use kplace_cudakit::queue::{Queue, arg};
use kplace_cudakit::workspace::Layout;

use crate::gpu::{Gpu, PORTS, grid};
use crate::source::Function;

/// The FFT's launch sequence, independent of CUDA.
#[derive(Clone, Copy, Debug)]
pub struct FftPlan {
    ports: FftPorts,
}

impl FftPlan {
    /// Validates a configuration as `create` does.
    pub fn from_config(config: &Config<'_>) -> Result<Self, KernelError> {
        Ok(Self {
            ports: FftPorts::check(config, &PORTS)?,
        })
    }

    /// The batch cuFFT transforms per launch: the launch's transforms, contiguous, in place.
    pub fn fft_shape(&self) -> FftShape {
        FftShape {
            direction: match self.ports.direction {
                Direction::Forward => FftDirection::Forward,
                Direction::Inverse => FftDirection::Inverse,
            },
            len: self.ports.n,
            batch: self.ports.transforms,
            layout: FftLayout::InPlace,
        }
    }

    /// The workspace: the rows, then cuFFT's work area of `fft_work` bytes.
    pub fn layout(&self, fft_work: u64) -> Layout<2> {
        let values = (self.ports.transforms * self.ports.n) as u64;
        Layout::new([8 * values, fft_work])
    }

    /// Enqueues `tile` of the input at `x` into the output at `y`.
    ///
    /// # Safety
    /// `x` and `y` must address the input and output and `workspace` `workspace_bytes` bytes,
    /// all valid for the queue until the work completes; no concurrent launch may use the
    /// same workspace or write the tile's part of the output.
    pub unsafe fn enqueue(
        &self,
        queue: &impl Queue<Function>,
        (x, y): (u64, u64),
        (workspace, workspace_bytes): (u64, u64),
        fft_work: u64,
        tile: Tile,
    ) -> Result<(), KernelError> {
        let [rows, work] = self.layout(fft_work).carve(workspace, workspace_bytes)?;
        let elements = self.ports.rows.elements(tile)?;
        let offset = 8 * elements.start as u64;
        let (x, y) = (x + offset, y + offset);
        let (n, inner) = (self.ports.n as u64, self.ports.inner as u64);
        let count = elements.len() as u64;
        let scale = self.ports.scale;
        let grid = grid(count)?;
        // SAFETY: for each launch, the arguments of its CUDA C signature in order; the tile's
        // elements of both tensors are `count` transform values, the rows lie in the
        // workspace.
        unsafe {
            queue.launch(
                Function::FftGather,
                grid,
                &mut [arg(&x), arg(&rows), arg(&n), arg(&inner), arg(&count)],
            )?;
            queue.fft(self.fft_shape(), rows, rows, work)?;
            queue.launch(
                Function::FftScatter,
                grid,
                &mut [
                    arg(&rows),
                    arg(&y),
                    arg(&n),
                    arg(&inner),
                    arg(&scale),
                    arg(&count),
                ],
            )
        }
    }
}

/// `blocks.fft` on CUDA: the plan and its cuFFT plan.
#[derive(Debug)]
pub struct Fft {
    plan: FftPlan,
    fft: cufft::Fft,
    gpu: Gpu,
}

impl KernelImpl for Fft {
    const NAME: &'static CStr = names::FFT;
    const DEVICE: DeviceKind = DeviceKind::CUDA;
    const MEMORY: MemorySpace = MemorySpace::DEVICE;
    const N_INPUTS: u32 = 1;
    const N_OUTPUTS: u32 = 1;
    const NAMES_ITS_ERRORS: bool = true;

    fn create(config: &Config<'_>) -> Result<Self, KernelError> {
        let plan = FftPlan::from_config(config)?;
        let gpu = Gpu::open(config)?;
        let _bound = gpu.device.bind()?;
        let fft = cufft::Fft::new(&gpu.device, plan.fft_shape())?;
        Ok(Self { plan, fft, gpu })
    }

    fn workspace_bytes(&self) -> u64 {
        self.plan.layout(self.fft.work_bytes()).bytes()
    }

    fn launch(&self, launch: &Launch<'_>) -> Result<(), KernelError> {
        let (x, y) = self.plan.ports.rows.tensors(launch)?;
        // SAFETY: the tensors were checked against the descriptors create accepted, the
        // workspace is this launch's and its size is checked by the carving; the tile's output
        // is this launch's.
        unsafe {
            self.plan.enqueue(
                &self.gpu.queue(launch, Some(&self.fft)),
                (x.data as u64, y.data as u64),
                (launch.workspace() as u64, launch.workspace_bytes()),
                self.fft.work_bytes(),
                launch.tile(),
            )
        }
    }
}

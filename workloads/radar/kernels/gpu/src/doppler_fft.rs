//! `radar.doppler_fft` on CUDA: windowed FFT across chirps for every range bin, then power.
//!
//! - Input 0: `cf32 [N, M]` in device memory, range-major (the range FFT's output): row `k`
//!   holds range bin `k` of every chirp.
//! - Output 0: `f32 [N, M]` in device memory: `|X[k][d]|^2` of Doppler bin `d`, computed as
//!   `re * re + im * im` with every operation rounded to f32 (no fused multiply-add).
//! - Parameters: `planner`, accepted and validated by the contract both libraries share
//!   (`kplace_kernels::config::DopplerFftConfig`), otherwise unused.
//! - Not split.
//! - Workspace: the windowed map (N x M complex f32) and cuFFT's work area.
//!
//! Three steps on the launch's stream (three enqueues a frame): `kp_doppler_window` multiplies
//! every row by the Hann window over M (`kplace_kernels::window`) into the workspace (the
//! input is the previous stage's and is not modified); cuFFT transforms the N rows in place
//! (M points each, forward, unnormalised: negative velocities land in the upper bins);
//! `kp_power` writes the power.
//! (Fusing the window into the range stage would change that stage's output, which a CPU
//! Doppler stage may read; the power needs the finished transform. So three it stays.)

use std::ffi::CStr;
use std::sync::Arc;

use kplace_abi::export::{Config, KernelError, KernelImpl, Launch};
use kplace_abi::{DeviceKind, MemorySpace, TensorDesc};
use kplace_kernels::config::DopplerFftConfig;
use kplace_kernels::names::DOPPLER_FFT;
use kplace_kernels::window::hann;

use crate::ports::{PORTS, launch_address};
use crate::source::Function;
use kplace_cudakit::cufft::Fft;
use kplace_cudakit::driver::{Device, DeviceBuffer};
use kplace_cudakit::fft_shape::{FftDirection, FftLayout, FftShape};
use kplace_cudakit::program::{self, Functions};
use kplace_cudakit::queue::{CudaQueue, Grid, Queue, arg};
use kplace_cudakit::workspace::Layout;

/// Threads per block of the element-wise kernels.
const THREADS: u32 = 256;

/// The geometry and launch sequence of `radar.doppler_fft`, independent of CUDA.
#[derive(Clone, Debug)]
pub struct DopplerFftPlan {
    input: TensorDesc,
    output: TensorDesc,
    /// N: range bins (rows).
    rows: u32,
    /// M: chirps, which become Doppler bins (row length).
    chirps: u32,
    grid: Grid,
}

impl DopplerFftPlan {
    /// Validates a configuration (parameters, ports, split) as `create` does, without CUDA.
    pub fn from_config(config: &Config<'_>) -> Result<Self, KernelError> {
        // The planner is validated, then ignored: cuFFT has no rigor to choose.
        let DopplerFftConfig {
            input,
            output,
            rows,
            chirps,
            ..
        } = DopplerFftConfig::from_config(config, &PORTS)?;
        let grid = Grid::linear(rows * chirps, THREADS)?;
        Ok(Self {
            input,
            output,
            // Both fit u32: their product does (`PORTS` counts cells in 32 bits).
            rows: rows as u32,
            chirps: chirps as u32,
            grid,
        })
    }

    /// The input descriptor accepted.
    pub fn input(&self) -> &TensorDesc {
        &self.input
    }

    /// The output descriptor accepted.
    pub fn output(&self) -> &TensorDesc {
        &self.output
    }

    /// The batch of FFTs: M points, one per range bin.
    pub fn fft_shape(&self) -> FftShape {
        FftShape {
            direction: FftDirection::Forward,
            len: self.chirps as usize,
            batch: self.rows as usize,
            layout: FftLayout::InPlace,
        }
    }

    fn cells(&self) -> u64 {
        u64::from(self.rows) * u64::from(self.chirps)
    }

    /// The workspace: the windowed map, then cuFFT's work area of `fft_work` bytes.
    pub fn layout(&self, fft_work: u64) -> Layout<2> {
        Layout::new([self.cells() * 8, fft_work])
    }

    /// The device addresses of a launch's input and output, checked against the descriptors
    /// accepted.
    pub fn ports(&self, launch: &Launch<'_>) -> Result<(u64, u64), KernelError> {
        Ok((
            launch_address(launch.input(0), "input 0", &self.input)?,
            launch_address(launch.output(0), "output 0", &self.output)?,
        ))
    }

    /// Enqueues one launch: window, FFT, power.
    ///
    /// # Safety
    /// `map` and `power` must address the input and output, `window` M f32 Hann coefficients
    /// and `workspace` `workspace_bytes` bytes, all valid for the queue until the work
    /// completes; no concurrent launch may use the same workspace or output.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn enqueue(
        &self,
        queue: &impl Queue<Function>,
        map: u64,
        power: u64,
        window: u64,
        workspace: u64,
        workspace_bytes: u64,
        fft_work: u64,
    ) -> Result<(), KernelError> {
        let [spectrum, work] = self.layout(fft_work).carve(workspace, workspace_bytes)?;
        let total = self.cells();
        // SAFETY: for all three launches, arguments in the order and types of the CUDA C signatures; the
        // addresses are the caller's promise, the spectrum lies in the workspace.
        unsafe {
            queue.launch(
                Function::DopplerWindow,
                self.grid,
                &mut [
                    arg(&map),
                    arg(&window),
                    arg(&spectrum),
                    arg(&self.chirps),
                    arg(&total),
                ],
            )?;
            queue.fft(self.fft_shape(), spectrum, spectrum, work)?;
            queue.launch(
                Function::Power,
                self.grid,
                &mut [arg(&spectrum), arg(&power), arg(&total)],
            )
        }
    }
}

/// The `radar.doppler_fft` kernel state: plan, window and cuFFT plan for one frame slot.
#[derive(Debug)]
pub struct DopplerFft {
    plan: DopplerFftPlan,
    functions: &'static Functions<Function>,
    window: DeviceBuffer,
    fft: Fft,
    /// Dropped last: holds the primary context the buffers and plan live in.
    _device: Arc<Device>,
}

impl DopplerFft {
    /// The launch sequence.
    pub fn plan(&self) -> &DopplerFftPlan {
        &self.plan
    }
}

impl KernelImpl for DopplerFft {
    const NAME: &'static CStr = DOPPLER_FFT.c_str();
    const DEVICE: DeviceKind = DeviceKind::CUDA;
    const MEMORY: MemorySpace = MemorySpace::DEVICE;
    const N_INPUTS: u32 = 1;
    const N_OUTPUTS: u32 = 1;

    fn create(config: &Config<'_>) -> Result<Self, KernelError> {
        let plan = DopplerFftPlan::from_config(config)?;
        let device = Device::open(config.device_ordinal())?;
        let _bound = device.bind()?;
        let functions = program::functions(&device)?;
        let window = DeviceBuffer::upload(&device, &hann(plan.chirps as usize))?;
        let fft = Fft::new(&device, plan.fft_shape())?;
        Ok(Self {
            plan,
            functions,
            window,
            fft,
            _device: device,
        })
    }

    fn workspace_bytes(&self) -> u64 {
        self.plan.layout(self.fft.work_bytes()).bytes()
    }

    fn launch(&self, launch: &Launch<'_>) -> Result<(), KernelError> {
        let (map, power) = self.plan.ports(launch)?;
        let queue = CudaQueue {
            stream: launch.stream().cast(),
            functions: self.functions,
            fft: Some(&self.fft),
        };
        // SAFETY: the ports were checked against the descriptors create accepted; the
        // workspace is this launch's alone and its size is checked by the carving; the window
        // lives as long as the state.
        unsafe {
            self.plan.enqueue(
                &queue,
                map,
                power,
                self.window.address(),
                launch.workspace() as u64,
                launch.workspace_bytes(),
                self.fft.work_bytes(),
            )
        }
    }
}

//! `radar.range_fft` on CUDA: windowed FFT of every chirp, written corner-turned.
//!
//! - Input 0: `ci16 [M, N]` in device memory, chirp-major: element `m * N + n` is sample `n`
//!   of chirp `m`.
//! - Output 0: `cf32 [N, M]` in device memory, range-major: element `k * M + m` is bin `k` of
//!   chirp `m`'s FFT (the layout the Doppler stage reads row by row).
//! - Parameters: `planner` = `estimate` | `measure` | `patient`, accepted (and validated by the
//!   contract, `kplace_kernels::config::RangeFftConfig`) so that one graph file serves both
//!   backends; cuFFT has no planning rigor to choose.
//! - Split: along input axis 0 (chirps), any tile that divides M, or not at all.
//! - Workspace: one FFT batch of complex f32 (tile x N, or M x N unsplit) and cuFFT's work
//!   area.
//!
//! Per batch of chirps, two steps on the launch's stream (so a frame costs two enqueues per
//! tile): `kp_range_window` converts the int16 samples to f32 (exactly) and multiplies them by
//! the Hann window over N (the CPU library's f32 coefficients, `kplace_kernels::window`) into the
//! workspace, chirp after chirp; cuFFT transforms the batch out of place (N points, forward,
//! unnormalised) straight into the range-major output through its advanced data layout: input
//! stride 1 and distance N (the workspace's rows), output stride M and distance 1 from the
//! batch's first column, so bin `k` of chirp `m` lands at element `k * M + m` and no corner
//! turn is needed. A launch writes only its tile's columns (cuFFT writes only the elements
//! its output layout names), so tiles of one state may be enqueued concurrently (each has its
//! own workspace; the cuFFT plan is shared under a lock, see `kplace_cudakit::cufft`).

use std::ffi::CStr;
use std::sync::Arc;

use kplace_abi::export::{Config, KernelError, KernelImpl, Launch};
use kplace_abi::{DeviceKind, MemorySpace, TensorDesc, Tile};
use kplace_kernels::config::RangeFftConfig;
use kplace_kernels::names::RANGE_FFT;
use kplace_kernels::window::hann;

use crate::ports::{PORTS, launch_address};
use crate::source::Function;
use kplace_cudakit::cufft::Fft;
use kplace_cudakit::driver::{Device, DeviceBuffer};
use kplace_cudakit::fft_shape::{FftDirection, FftLayout, FftShape, FftStrides};
use kplace_cudakit::program::{self, Functions};
use kplace_cudakit::queue::{CudaQueue, Grid, Queue, arg};
use kplace_cudakit::workspace::Layout;

/// Threads per block of the element-wise kernels.
const THREADS: u32 = 256;

/// The geometry and launch sequence of `radar.range_fft`, independent of CUDA.
#[derive(Clone, Debug)]
pub struct RangeFftPlan {
    input: TensorDesc,
    output: TensorDesc,
    /// M: chirps per frame.
    chirps: u32,
    /// N: samples per chirp.
    samples: u32,
    /// Whether launches cover tiles (else always the whole frame).
    split: bool,
    /// Chirps per FFT batch: the tile, or M.
    batch: u32,
    window_grid: Grid,
}

impl RangeFftPlan {
    /// Validates a configuration (parameters, ports, split) as `create` does, without CUDA.
    pub fn from_config(config: &Config<'_>) -> Result<Self, KernelError> {
        // The planner is validated, then ignored: cuFFT has no rigor to choose.
        let RangeFftConfig {
            input,
            output,
            chirps,
            samples,
            tile,
            ..
        } = RangeFftConfig::from_config(config, &PORTS)?;
        // Both fit u32: their product does (`PORTS` counts cells in 32 bits); the tile divides
        // the chirps.
        let (chirps, samples) = (chirps as u32, samples as u32);
        let (split, batch) = match tile {
            None => (false, chirps),
            Some(tile) => (true, tile as u32),
        };
        let window_grid = Grid::linear(u64::from(batch) * u64::from(samples), THREADS)?;
        Ok(Self {
            input,
            output,
            chirps,
            samples,
            split,
            batch,
            window_grid,
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

    /// The batch of FFTs one step transforms: N points, one per chirp of the batch, from the
    /// workspace's contiguous rows into the output's columns (bin `k` of the batch's chirp `b`
    /// at element `k * M + b` from the batch's first column).
    pub fn fft_shape(&self) -> FftShape {
        FftShape {
            direction: FftDirection::Forward,
            len: self.samples as usize,
            batch: self.batch as usize,
            layout: FftLayout::OutOfPlace {
                input: FftStrides::contiguous(self.samples as usize),
                output: FftStrides {
                    stride: self.chirps as usize,
                    dist: 1,
                },
            },
        }
    }

    /// The workspace: the batch, then cuFFT's work area of `fft_work` bytes.
    pub fn layout(&self, fft_work: u64) -> Layout<2> {
        let batch_bytes = u64::from(self.batch) * u64::from(self.samples) * 8;
        Layout::new([batch_bytes, fft_work])
    }

    /// The device addresses of a launch's input and output, checked against the descriptors
    /// accepted.
    pub fn ports(&self, launch: &Launch<'_>) -> Result<(u64, u64), KernelError> {
        Ok((
            launch_address(launch.input(0), "input 0", &self.input)?,
            launch_address(launch.output(0), "output 0", &self.output)?,
        ))
    }

    /// The chirps `[begin, begin + count)` a launch over `tile` covers.
    pub fn chirps_of(&self, tile: Tile) -> Result<(u32, u32), KernelError> {
        if !self.split {
            return Ok((0, self.chirps));
        }
        let end = tile.begin.checked_add(tile.count);
        if end.is_none_or(|end| end > u64::from(self.chirps))
            || tile.count == 0
            || !tile.count.is_multiple_of(u64::from(self.batch))
        {
            return Err(KernelError::invalid(format!(
                "tile [{}, +{}) is not a whole number of {}-chirp tiles within the {} chirps",
                tile.begin, tile.count, self.batch, self.chirps
            )));
        }
        // Both are below `chirps`, a u32.
        Ok((tile.begin as u32, tile.count as u32))
    }

    /// Enqueues one launch: for each batch of the tile, window, then FFT into the output's
    /// columns.
    ///
    /// # Safety
    /// `iq` and `out` must address the frame's input and output, `window` N f32 Hann
    /// coefficients, and `workspace` `workspace_bytes` bytes, all valid for the queue until
    /// the work completes; no concurrent launch may use the same workspace or write the same
    /// output columns.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn enqueue(
        &self,
        queue: &impl Queue<Function>,
        iq: u64,
        out: u64,
        window: u64,
        workspace: u64,
        workspace_bytes: u64,
        fft_work: u64,
        tile: Tile,
    ) -> Result<(), KernelError> {
        let (begin, count) = self.chirps_of(tile)?;
        let [batch, work] = self.layout(fft_work).carve(workspace, workspace_bytes)?;
        let samples = self.samples;
        let total = u64::from(self.batch) * u64::from(samples);
        let shape = self.fft_shape();
        for first in (begin..begin + count).step_by(self.batch as usize) {
            // The batch's first column: bin 0 of chirp `first` (cf32, 8 bytes).
            let columns = out + u64::from(first) * 8;
            // SAFETY: for both launches, arguments in the order and types of the CUDA C signature; the
            // addresses are the caller's promise, the batch lies in the workspace, and the
            // FFT's output layout from `columns` stays within the output (chirps first ..
            // first + batch of every bin's row).
            unsafe {
                queue.launch(
                    Function::RangeWindow,
                    self.window_grid,
                    &mut [
                        arg(&iq),
                        arg(&window),
                        arg(&batch),
                        arg(&samples),
                        arg(&first),
                        arg(&total),
                    ],
                )?;
                queue.fft(shape, batch, columns, work)?;
            }
        }
        Ok(())
    }
}

/// The `radar.range_fft` kernel state: plan, window and cuFFT plan for one frame slot.
#[derive(Debug)]
pub struct RangeFft {
    plan: RangeFftPlan,
    functions: &'static Functions<Function>,
    window: DeviceBuffer,
    fft: Fft,
    /// Dropped last: holds the primary context the buffers and plan live in.
    _device: Arc<Device>,
}

impl RangeFft {
    /// The launch sequence.
    pub fn plan(&self) -> &RangeFftPlan {
        &self.plan
    }
}

impl KernelImpl for RangeFft {
    const NAME: &'static CStr = RANGE_FFT.c_str();
    const DEVICE: DeviceKind = DeviceKind::CUDA;
    const MEMORY: MemorySpace = MemorySpace::DEVICE;
    const N_INPUTS: u32 = 1;
    const N_OUTPUTS: u32 = 1;

    fn create(config: &Config<'_>) -> Result<Self, KernelError> {
        let plan = RangeFftPlan::from_config(config)?;
        let device = Device::open(config.device_ordinal())?;
        let _bound = device.bind()?;
        let functions = program::functions(&device)?;
        let window = DeviceBuffer::upload(&device, &hann(plan.samples as usize))?;
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
        let (iq, out) = self.plan.ports(launch)?;
        let queue = CudaQueue {
            stream: launch.stream().cast(),
            functions: self.functions,
            fft: Some(&self.fft),
        };
        // SAFETY: the ports were checked against the descriptors create accepted; the
        // workspace is this launch's alone and its size is checked by the carving; the window
        // lives as long as the state, which outlives its launches' work (ABI rule).
        unsafe {
            self.plan.enqueue(
                &queue,
                iq,
                out,
                self.window.address(),
                launch.workspace() as u64,
                launch.workspace_bytes(),
                self.fft.work_bytes(),
                launch.tile(),
            )
        }
    }
}

//! `radar.doppler_fft`: windowed FFT across chirps for every range bin, then power.
//!
//! - Input 0: `cf32 [N, M]`, range-major (the range FFT's output): row `k` holds range bin
//!   `k` of every chirp.
//! - Output 0: `f32 [N, M]`: `|X[k][d]|^2` (re² + im², in f32) of Doppler bin `d`.
//! - Parameters: `planner` = `estimate` | `measure` | `patient` (default `estimate`, deterministic).
//! - Not split.
//!
//! Parameters, ports and split are checked by the contract
//! (`kplace_kernels::config::DopplerFftConfig`). Each row is multiplied by the Hann window
//! over M (`kplace_kernels::window`) and transformed by an M-point forward FFT (unnormalised,
//! no shift: negative velocities land in the upper bins).
//!
//! Because the range FFT already corner-turned the data, every transform reads a contiguous
//! row. Rows are processed in blocks of about 64 KiB: window a block into the workspace, run
//! one batched in-place plan on it, write its power. The workspace thus stays in L1/L2, and a
//! second plan covers the last block when the block size does not divide N.

use std::ffi::CStr;

use kplace_abi::export::{Config, KernelError, KernelImpl, Launch};
use kplace_abi::{DeviceKind, MemorySpace, TensorDesc};
use kplace_kernels::config::DopplerFftConfig;
use kplace_kernels::names::DOPPLER_FFT;
use kplace_kernels::window::hann_interleaved;

use kplace_fftw::{BatchedFft, Complex32, as_f32_mut};

use crate::rigor;
use crate::tensor::{PORTS, workspace};

/// Target workspace bytes per block of rows.
const BLOCK_BYTES: usize = 64 * 1024;

/// The `radar.doppler_fft` kernel state: plans and window for one map shape.
#[derive(Debug)]
pub struct DopplerFft {
    input: TensorDesc,
    output: TensorDesc,
    /// N: range bins (rows).
    rows: usize,
    /// M: chirps, which become Doppler bins (row length).
    chirps: usize,
    /// Hann over M, each coefficient twice (for interleaved re, im).
    window: Vec<f32>,
    /// Transforms a full block of rows.
    block: BatchedFft,
    /// Transforms the last `N % block` rows, when there are any.
    tail: Option<BatchedFft>,
}

impl DopplerFft {
    /// Rows per FFT batch.
    pub fn block_rows(&self) -> usize {
        self.block.batch()
    }
}

impl KernelImpl for DopplerFft {
    const NAME: &'static CStr = DOPPLER_FFT.c_str();
    const DEVICE: DeviceKind = DeviceKind::CPU;
    const MEMORY: MemorySpace = MemorySpace::HOST;
    const N_INPUTS: u32 = 1;
    const N_OUTPUTS: u32 = 1;

    fn create(config: &Config<'_>) -> Result<Self, KernelError> {
        let DopplerFftConfig {
            planner,
            input,
            output,
            rows,
            chirps,
        } = DopplerFftConfig::from_config(config, &PORTS)?;
        let rigor = rigor(planner);
        // Both sizes were checked to fit in memory, hence in usize.
        let (rows, chirps) = (rows as usize, chirps as usize);

        let block_rows = (BLOCK_BYTES / (chirps * size_of::<Complex32>())).clamp(1, rows);
        let block = BatchedFft::forward(chirps, block_rows, chirps, rigor)?;
        let tail = match rows % block_rows {
            0 => None,
            tail_rows => Some(BatchedFft::forward(chirps, tail_rows, chirps, rigor)?),
        };
        Ok(Self {
            input,
            output,
            rows,
            chirps,
            window: hann_interleaved(chirps),
            block,
            tail,
        })
    }

    fn workspace_bytes(&self) -> u64 {
        (self.block.buffer_len() * size_of::<Complex32>()) as u64
    }

    fn launch(&self, launch: &Launch<'_>) -> Result<(), KernelError> {
        let input = PORTS.launch(launch.input(0), "input 0", &self.input)?;
        let output = PORTS.launch(launch.output(0), "output 0", &self.output)?;
        let cells = self.rows * self.chirps;
        // SAFETY: checked against the descriptors create accepted; nothing writes the input
        // while the stage runs, and an unsplit stage's output is this launch's alone.
        let (map, power) = unsafe {
            (
                &input.host_slice::<f32>()?[..2 * cells],
                &mut output.host_slice_mut::<f32>()?[..cells],
            )
        };
        // SAFETY: the workspace is this launch's alone (ABI rule); its size was checked.
        let ws = unsafe { workspace::<Complex32>(launch, self.block.buffer_len()) }?;

        let row_floats = 2 * self.chirps;
        for (map_block, power_block) in map
            .chunks(self.block.batch() * row_floats)
            .zip(power.chunks_mut(self.block.batch() * self.chirps))
        {
            let rows = power_block.len() / self.chirps;
            let plan = if rows == self.block.batch() {
                &self.block
            } else {
                self.tail.as_ref().unwrap_or(&self.block)
            };
            let ws = &mut ws[..rows * self.chirps];
            let ws_floats = as_f32_mut(ws);
            for (dst, src) in ws_floats
                .chunks_exact_mut(row_floats)
                .zip(map_block.chunks_exact(row_floats))
            {
                for ((d, &s), &w) in dst.iter_mut().zip(src).zip(&self.window) {
                    *d = s * w;
                }
            }
            plan.execute(ws)?;
            for (p, x) in power_block.iter_mut().zip(ws.iter()) {
                *p = x.re * x.re + x.im * x.im;
            }
        }
        Ok(())
    }
}

//! `blocks.fft`: the FFT, or inverse FFT, along one axis (the last by default).
//!
//! - Input 0: `cf32`, any shape; N is the extent of the transformed axis. Output 0: `cf32`, the
//!   same dimensions.
//! - `forward`: `X[k] = scale * sum_n x[n] exp(-2 pi i k n / N)`; `inverse`: the same with
//!   `+2 pi i`, unnormalised unless `scale` says so (`scale: 1/N` for the true inverse). No
//!   shift: negative frequencies are in the upper half.
//! - Parameters: `axis`, the axis transformed (default the last); `direction` = `forward`
//!   (default) | `inverse`; `scale`, a finite number, default 1; `planner` = `estimate`
//!   (default, deterministic) | `measure` | `patient`, FFTW's planning rigor.
//! - Split along axis 0 in tiles that divide it, unless axis 0 is the axis transformed; or not
//!   split.
//! - Workspace: one block of transforms (about 64 KiB). A launch gathers a block of its
//!   transforms into the workspace (a contiguous copy along the last axis, a strided one along
//!   another), transforms it in place with one batched FFTW plan (single precision, N of any
//!   size), and scatters it out scaled; a second plan takes the launch's last, shorter block.

use std::ffi::CStr;

use kplace_abi::export::{Config, KernelError, KernelImpl, Launch};
use kplace_abi::{DeviceKind, MemorySpace};
use kplace_blocks_contract::names;
use kplace_fftw::{BatchedFft, Complex32, Direction, Rigor};

use kplace_blocks_contract::fft::{self, FftPorts, Planner};
use kplace_blocks_contract::ports::Rows;

use crate::layout::{PORTS, tile_slices};

/// Target workspace bytes per block of rows.
const BLOCK_BYTES: usize = 64 * 1024;

/// The `blocks.fft` state: plans for one row length and tile.
#[derive(Debug)]
pub struct Fft {
    ports: Rows,
    scale: f32,
    /// The transformed axis's extent.
    n: usize,
    /// Elements between two successive values of one transform: the product of the extents
    /// after the transformed axis (1 along the last).
    inner: usize,
    /// Transforms a full block of transforms.
    block: BatchedFft,
    /// Transforms a launch's last `transforms % block`, when there are any.
    tail: Option<BatchedFft>,
}

impl Fft {
    /// Transforms per batched plan.
    pub fn block_transforms(&self) -> usize {
        self.block.batch()
    }
}

impl KernelImpl for Fft {
    const NAME: &'static CStr = names::FFT;
    const DEVICE: DeviceKind = DeviceKind::CPU;
    const MEMORY: MemorySpace = MemorySpace::HOST;
    const N_INPUTS: u32 = 1;
    const N_OUTPUTS: u32 = 1;
    const NAMES_ITS_ERRORS: bool = true;

    fn create(config: &Config<'_>) -> Result<Self, KernelError> {
        let FftPorts {
            rows: ports,
            direction,
            planner,
            scale,
            n,
            inner,
            transforms,
        } = FftPorts::check(config, &PORTS)?;
        let direction = match direction {
            fft::Direction::Forward => Direction::Forward,
            fft::Direction::Inverse => Direction::Inverse,
        };
        let rigor = match planner {
            Planner::Estimate => Rigor::Estimate,
            Planner::Measure => Rigor::Measure,
            Planner::Patient => Rigor::Patient,
        };
        let block_len = (BLOCK_BYTES / (n * size_of::<Complex32>())).clamp(1, transforms);
        let block = BatchedFft::new(n, block_len, n, direction, rigor)?;
        let tail = match transforms % block_len {
            0 => None,
            tail => Some(BatchedFft::new(n, tail, n, direction, rigor)?),
        };
        Ok(Self {
            ports,
            scale,
            n,
            inner,
            block,
            tail,
        })
    }

    fn workspace_bytes(&self) -> u64 {
        (self.block.buffer_len() * size_of::<Complex32>()) as u64
    }

    fn launch(&self, launch: &Launch<'_>) -> Result<(), KernelError> {
        let (input, output) = self.ports.tensors(launch)?;
        let elements = self.ports.elements(launch.tile())?;
        // SAFETY: as every tile: its input rows are complete, its output rows its own.
        let (x, y) = unsafe { tile_slices::<f32, f32>(input, output, elements, (2, 2))? };
        // SAFETY: the workspace is this launch's alone (the ABI's rule) and complex
        // floats are plain data; it is written before it is read.
        let ws: &mut [Complex32] = unsafe { launch.workspace_slice(self.block.buffer_len()) }?;
        // Transform t of the launch: column t % inner of group t / inner, each group N
        // values along the axis, `inner` apart.
        let (n, inner) = (self.n, self.inner);
        let base = |t: usize| (t / inner) * n * inner + t % inner;
        let total = x.len() / (2 * n);
        let mut first = 0;
        while first < total {
            let count = (total - first).min(self.block.batch());
            let plan = if count == self.block.batch() {
                &self.block
            } else {
                self.tail
                    .as_ref()
                    .filter(|tail| tail.batch() == count)
                    .ok_or_else(|| {
                        KernelError::internal(format!("{count} transforms have no plan"))
                    })?
            };
            let ws = &mut ws[..count * n];
            if inner == 1 {
                // Along the last axis the transforms are contiguous: copy them whole.
                let span = 2 * first * n..2 * (first + count) * n;
                for (w, x) in ws.iter_mut().zip(x[span.clone()].chunks_exact(2)) {
                    *w = Complex32::new(x[0], x[1]);
                }
                plan.execute(ws)?;
                for (y, w) in y[span].chunks_exact_mut(2).zip(ws.iter()) {
                    y[0] = w.re * self.scale;
                    y[1] = w.im * self.scale;
                }
            } else {
                for (b, row) in ws.chunks_exact_mut(n).enumerate() {
                    let base = base(first + b);
                    for (k, w) in row.iter_mut().enumerate() {
                        let e = 2 * (base + k * inner);
                        *w = Complex32::new(x[e], x[e + 1]);
                    }
                }
                plan.execute(ws)?;
                for (b, row) in ws.chunks_exact(n).enumerate() {
                    let base = base(first + b);
                    for (k, w) in row.iter().enumerate() {
                        let e = 2 * (base + k * inner);
                        y[e] = w.re * self.scale;
                        y[e + 1] = w.im * self.scale;
                    }
                }
            }
            first += count;
        }
        Ok(())
    }
}

//! `blocks.fft`: the FFT, or inverse FFT, of every row along the last axis.
//!
//! - Input 0: `cf32 [.., N]`. Output 0: `cf32`, the same dimensions.
//! - `forward`: `X[k] = scale * sum_n x[n] exp(-2 pi i k n / N)`; `inverse`: the same with
//!   `+2 pi i`, unnormalised unless `scale` says so (`scale: 1/N` for the true inverse). No
//!   shift: negative frequencies are in the upper half.
//! - Parameters: `direction` = `forward` (default) | `inverse`; `scale`, a finite number,
//!   default 1; `planner` = `estimate` (default, deterministic) | `measure` | `patient`,
//!   FFTW's planning rigor.
//! - Split along axis 0 in tiles that divide it (a tensor of rank 2 or more), or not split.
//! - Workspace: one block of rows (about 64 KiB). A launch copies a block of its rows into
//!   the workspace, transforms it in place with one batched FFTW plan (single precision, N of
//!   any size), and writes it out scaled; a second plan takes the launch's last, shorter block.

use std::ffi::CStr;
use std::str::FromStr;

use kplace_abi::export::{Config, KernelError, KernelImpl, Launch};
use kplace_abi::{DeviceKind, Dtype, MemorySpace};
use kplace_fftw::{BatchedFft, Complex32, Direction, Rigor};

use crate::layout::{Rows, finite, named, tile_slices};

/// Target workspace bytes per block of rows.
const BLOCK_BYTES: usize = 64 * 1024;

/// The `direction` parameter.
struct Way(Direction);

impl FromStr for Way {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "forward" => Ok(Way(Direction::Forward)),
            "inverse" => Ok(Way(Direction::Inverse)),
            _ => Err("expected forward or inverse".into()),
        }
    }
}

/// The `planner` parameter.
struct Planner(Rigor);

impl FromStr for Planner {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "estimate" => Ok(Planner(Rigor::Estimate)),
            "measure" => Ok(Planner(Rigor::Measure)),
            "patient" => Ok(Planner(Rigor::Patient)),
            _ => Err("expected estimate, measure or patient".into()),
        }
    }
}

/// The `blocks.fft` state: plans for one row length and tile.
#[derive(Debug)]
pub struct Fft {
    ports: Rows,
    scale: f32,
    /// Transforms a full block of rows.
    block: BatchedFft,
    /// Transforms a launch's last `rows % block` rows, when there are any.
    tail: Option<BatchedFft>,
}

impl Fft {
    /// Rows per batched transform.
    pub fn block_rows(&self) -> usize {
        self.block.batch()
    }
}

impl KernelImpl for Fft {
    const NAME: &'static CStr = c"blocks.fft";
    const DEVICE: DeviceKind = DeviceKind::CPU;
    const MEMORY: MemorySpace = MemorySpace::HOST;
    const N_INPUTS: u32 = 1;
    const N_OUTPUTS: u32 = 1;

    fn create(config: &Config<'_>) -> Result<Self, KernelError> {
        (|| {
            config.reject_unknown_params(&["direction", "scale", "planner"])?;
            let Way(direction) = config
                .parse_param("direction")?
                .unwrap_or(Way(Direction::Forward));
            let Planner(rigor) = config
                .parse_param("planner")?
                .unwrap_or(Planner(Rigor::Estimate));
            let scale = finite(config, "scale", 1.0)? as f32;
            let ports = Rows::check(config, Dtype::CF32, Dtype::CF32, true)?;
            let n = ports.last;
            // Rows one launch transforms: its tile's, or the whole tensor's (a tensor of rank 1
            // is one row, its axis 0 the last).
            let tile = config.split().map_or(ports.rows, |(_, tile)| tile) as usize;
            let rows = tile * ports.row_len / n;
            let block_rows = (BLOCK_BYTES / (n * size_of::<Complex32>())).clamp(1, rows);
            let block = BatchedFft::new(n, block_rows, n, direction, rigor)?;
            let tail = match rows % block_rows {
                0 => None,
                tail => Some(BatchedFft::new(n, tail, n, direction, rigor)?),
            };
            Ok(Self {
                ports,
                scale,
                block,
                tail,
            })
        })()
        .map_err(|e| named(Self::NAME, e))
    }

    fn workspace_bytes(&self) -> u64 {
        (self.block.buffer_len() * size_of::<Complex32>()) as u64
    }

    fn launch(&self, launch: &Launch<'_>) -> Result<(), KernelError> {
        (|| {
            let (input, output) = self.ports.tensors(launch)?;
            let elements = self.ports.elements(launch.tile())?;
            // SAFETY: as every tile: its input rows are complete, its output rows its own.
            let (x, y) = unsafe { tile_slices::<f32, f32>(input, output, elements, (2, 2))? };
            // SAFETY: the workspace is this launch's alone (the ABI's rule) and complex
            // floats are plain data; it is written before it is read.
            let ws: &mut [Complex32] = unsafe { launch.workspace_slice(self.block.buffer_len()) }?;
            let block_floats = 2 * self.block.buffer_len();
            for (x, y) in x.chunks(block_floats).zip(y.chunks_mut(block_floats)) {
                let plan = if x.len() == block_floats {
                    &self.block
                } else {
                    self.tail
                        .as_ref()
                        .filter(|tail| 2 * tail.buffer_len() == x.len())
                        .ok_or_else(|| {
                            KernelError::internal(format!(
                                "a block of {} values has no plan",
                                x.len() / 2
                            ))
                        })?
                };
                let ws = &mut ws[..x.len() / 2];
                for (w, x) in ws.iter_mut().zip(x.chunks_exact(2)) {
                    *w = Complex32::new(x[0], x[1]);
                }
                plan.execute(ws)?;
                for (y, w) in y.chunks_exact_mut(2).zip(ws.iter()) {
                    y[0] = w.re * self.scale;
                    y[1] = w.im * self.scale;
                }
            }
            Ok(())
        })()
        .map_err(|e| named(Self::NAME, e))
    }
}

//! `radar.cfar` on CUDA: two-dimensional cell-averaging CFAR with exact training sums and a
//! deterministic detection list.
//!
//! - Input 0: `f32 [N, M]` power map in device memory (range rows, Doppler columns).
//! - Output 0: `detections [capacity]` in device memory: every cell that crosses its
//!   threshold, in row-major order (range ascending, then Doppler); the first `capacity` are
//!   kept and the rest counted in `overflow`. The header is written on the device.
//! - Parameters: `guard` (default 2), `train` (default 8, at least 1), and at most one of
//!   `pfa` (default 1e-6, in (0, 1)) or `scale` (a raw alpha, in [0, 1e12]); validated by the
//!   contract both libraries share (`kplace_kernels::config::CfarConfig`), with the same
//!   messages.
//! - Not split.
//! - Workspace: 33 bytes per cell (four 64-bit sums and a flag) plus 8 bytes per 256 cells.
//!
//! # The detection rule
//!
//! Exactly the CPU library's (see `workloads/radar/kernels/cpu/src/cfar.rs`), so CPU and GPU placements
//! report identical detections for the same map: `q(p) = floor(p * 2^8)` as an integer (0 for
//! NaN and negative values, `2^86` from `2^78` up and for +inf); `S` = the exact integer sum of
//! `q` over the training cells (the `(2h+1)²` window around the cell, `h = guard + train`,
//! minus the `(2 guard + 1)²` guard square, wrapping on both axes); detect iff
//! `(p as f64) > (S as f64) * scale`, where `S as f64` rounds to nearest (ties to even) and
//! `scale = alpha / K / 2^8` (`kplace_kernels::cfar::threshold_scale`, as the CPU library's)
//! is computed once, here on the host.
//!
//! # How the GPU computes it
//!
//! Four kernels a frame. Every `q` is split into two 43-bit limbs summed separately in 64-bit
//! integers, so every sum is exact and independent of the order the hardware adds in. The box
//! sums are separable: `kp_cfar_rows` writes, per cell, the horizontal sums over the window's
//! and over the guard's columns (and zeroes the per-chunk counts); `kp_cfar_detect` sums those
//! vertically over the window's and the guard's rows, one thread per column and strip of rows,
//! sliding down the strip with one addition and one subtraction per sum and row; the
//! difference is `S`, converted to f64 with an integer-only round-to-nearest-even and compared
//! as the rule says, into one flag per cell, and each detection is counted in its chunk of
//! [`CHUNK`] cells with an integer `atomicAdd` (exact whatever the order).
//!
//! Compaction keeps row-major order: `kp_cfar_scan`, one block of [`SCAN_THREADS`] threads,
//! computes every chunk's offset (an exclusive scan, parallel across the block: each thread
//! sums a run of consecutive chunks, the block scans the runs' sums in shared memory, each
//! thread writes its run's offsets) and writes the header (count, capacity, overflow,
//! reserved = 0); then `kp_cfar_scatter`, one thread per chunk, writes the chunk's detections
//! in order from its offset. The list is therefore the same bytes on every run.

use std::ffi::CStr;
use std::sync::Arc;

use kplace_abi::export::{Config, KernelError, KernelImpl, Launch};
use kplace_abi::{DeviceKind, MemorySpace, TensorDesc};
use kplace_kernels::config::CfarConfig;
use kplace_kernels::names::CFAR;

use crate::ports::{PORTS, launch_address};
use crate::source::Function;
use kplace_cudakit::driver::Device;
use kplace_cudakit::program::{self, Functions};
use kplace_cudakit::queue::{CudaQueue, Grid, Queue, arg};
use kplace_cudakit::workspace::Layout;

/// Cells per compaction chunk: detections are counted, and written, per chunk.
pub const CHUNK: u32 = 256;
/// Threads of the scan's one block (`KP_SCAN_THREADS` in `kernels/cfar.cu`).
pub const SCAN_THREADS: u32 = 1024;

/// Threads per block of the one-dimensional kernels.
const THREADS: u32 = 256;

/// The geometry and launch sequence of `radar.cfar`, independent of CUDA.
#[derive(Clone, Debug)]
pub struct CfarPlan {
    input: TensorDesc,
    output: TensorDesc,
    /// N: range rows.
    rows: u32,
    /// M: Doppler columns.
    cols: u32,
    guard: u32,
    /// `guard + train`: the window's half width.
    half: u32,
    alpha: f64,
    scale: f64,
    capacity: u32,
    /// Rows per thread of the vertical pass.
    strip: u32,
    chunks: u32,
    cell_grid: Grid,
    detect_grid: Grid,
    scan_grid: Grid,
    chunk_grid: Grid,
}

impl CfarPlan {
    /// Validates a configuration (parameters, ports, split) as `create` does, without CUDA.
    pub fn from_config(config: &Config<'_>) -> Result<Self, KernelError> {
        let CfarConfig {
            params,
            input,
            output,
            rows,
            cols,
            capacity,
        } = CfarConfig::from_config(config, &PORTS)?;
        let window = params.window();
        let cells = rows * cols;
        // About 64k threads in the vertical pass on large maps, with strips long enough that
        // the first window's sum (2h + 1 + 2 guard + 1 rows) is paid off.
        let strip = (cells >> 16).clamp(4, 32);
        let chunks = cells.div_ceil(u64::from(CHUNK));
        Ok(Self {
            input,
            output,
            // All fit u32: their product does (`PORTS` counts cells in 32 bits).
            rows: rows as u32,
            cols: cols as u32,
            guard: window.guard(),
            half: window.half(),
            alpha: params.alpha(),
            scale: params.scale(),
            capacity,
            strip: strip as u32,
            chunks: chunks as u32,
            cell_grid: Grid::linear(cells, THREADS)?,
            // A warp covers 32 consecutive columns of one strip: coalesced rows.
            detect_grid: Grid::planar([cols, rows.div_ceil(strip)], [32, 8])?,
            // Exactly one block: the scan's shared arrays are sized for it.
            scan_grid: Grid::linear(u64::from(SCAN_THREADS), SCAN_THREADS)?,
            chunk_grid: Grid::linear(chunks, THREADS)?,
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

    /// The CFAR multiplier in use (from `pfa` or `scale`).
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// The factor applied to exact training sums (`kplace_kernels::cfar::threshold_scale`).
    pub fn scale(&self) -> f64 {
        self.scale
    }

    fn cells(&self) -> u64 {
        u64::from(self.rows) * u64::from(self.cols)
    }

    /// The workspace: box and guard sums of both limbs, flags, chunk counts and offsets.
    pub fn layout(&self) -> Layout<7> {
        let cells = self.cells();
        let chunks = u64::from(self.chunks) * 4;
        Layout::new([
            cells * 8,
            cells * 8,
            cells * 8,
            cells * 8,
            cells,
            chunks,
            chunks,
        ])
    }

    /// The device addresses of a launch's input and output, checked against the descriptors
    /// accepted.
    pub fn ports(&self, launch: &Launch<'_>) -> Result<(u64, u64), KernelError> {
        Ok((
            launch_address(launch.input(0), "input 0", &self.input)?,
            launch_address(launch.output(0), "output 0", &self.output)?,
        ))
    }

    /// Enqueues one launch, four kernels: sums, rule and counts, scan and header, records.
    ///
    /// # Safety
    /// `power` must address the input map, `list` the output list and `workspace`
    /// `workspace_bytes` bytes, all valid for the queue until the work completes; no
    /// concurrent launch may use the same workspace or list.
    pub unsafe fn enqueue(
        &self,
        queue: &impl Queue<Function>,
        power: u64,
        list: u64,
        workspace: u64,
        workspace_bytes: u64,
    ) -> Result<(), KernelError> {
        let [box_hi, box_lo, guard_hi, guard_lo, flags, counts, offsets] =
            self.layout().carve(workspace, workspace_bytes)?;
        let (rows, cols, half, guard) = (self.rows, self.cols, self.half, self.guard);
        let (cells, chunk, chunks, capacity) = (self.cells(), CHUNK, self.chunks, self.capacity);
        // SAFETY: for every launch below, arguments in the order and types of the CUDA C signatures;
        // the map and list are the caller's promise, every other address a region of the
        // workspace sized for it by `layout`.
        unsafe {
            queue.launch(
                Function::CfarRows,
                self.cell_grid,
                &mut [
                    arg(&power),
                    arg(&box_hi),
                    arg(&box_lo),
                    arg(&guard_hi),
                    arg(&guard_lo),
                    arg(&counts),
                    arg(&rows),
                    arg(&cols),
                    arg(&half),
                    arg(&guard),
                    arg(&chunks),
                ],
            )?;
            queue.launch(
                Function::CfarDetect,
                self.detect_grid,
                &mut [
                    arg(&box_hi),
                    arg(&box_lo),
                    arg(&guard_hi),
                    arg(&guard_lo),
                    arg(&power),
                    arg(&flags),
                    arg(&counts),
                    arg(&rows),
                    arg(&cols),
                    arg(&half),
                    arg(&guard),
                    arg(&self.strip),
                    arg(&chunk),
                    arg(&self.scale),
                ],
            )?;
            queue.launch(
                Function::CfarScan,
                self.scan_grid,
                &mut [
                    arg(&counts),
                    arg(&offsets),
                    arg(&chunks),
                    arg(&list),
                    arg(&capacity),
                ],
            )?;
            queue.launch(
                Function::CfarScatter,
                self.chunk_grid,
                &mut [
                    arg(&flags),
                    arg(&power),
                    arg(&counts),
                    arg(&offsets),
                    arg(&list),
                    arg(&cells),
                    arg(&cols),
                    arg(&chunk),
                    arg(&chunks),
                    arg(&capacity),
                ],
            )
        }
    }
}

/// The `radar.cfar` kernel state: the plan for one map shape and the device's functions.
#[derive(Debug)]
pub struct Cfar {
    plan: CfarPlan,
    functions: &'static Functions<Function>,
    /// Holds the primary context the functions live in.
    _device: Arc<Device>,
}

impl Cfar {
    /// The launch sequence.
    pub fn plan(&self) -> &CfarPlan {
        &self.plan
    }
}

impl KernelImpl for Cfar {
    const NAME: &'static CStr = CFAR.c_str();
    const DEVICE: DeviceKind = DeviceKind::CUDA;
    const MEMORY: MemorySpace = MemorySpace::DEVICE;
    const N_INPUTS: u32 = 1;
    const N_OUTPUTS: u32 = 1;

    fn create(config: &Config<'_>) -> Result<Self, KernelError> {
        let plan = CfarPlan::from_config(config)?;
        let device = Device::open(config.device_ordinal())?;
        let _bound = device.bind()?;
        let functions = program::functions(&device)?;
        Ok(Self {
            plan,
            functions,
            _device: device,
        })
    }

    fn workspace_bytes(&self) -> u64 {
        self.plan.layout().bytes()
    }

    fn launch(&self, launch: &Launch<'_>) -> Result<(), KernelError> {
        let (power, list) = self.plan.ports(launch)?;
        let queue = CudaQueue {
            stream: launch.stream().cast(),
            functions: self.functions,
            fft: None,
        };
        // SAFETY: the ports were checked against the descriptors create accepted; the
        // workspace is this launch's alone and its size is checked by the carving.
        unsafe {
            self.plan.enqueue(
                &queue,
                power,
                list,
                launch.workspace() as u64,
                launch.workspace_bytes(),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::CFAR_CU;

    #[test]
    fn the_scan_block_is_the_size_the_source_declares() {
        let text = CFAR_CU.text().to_str().expect("UTF-8");
        let define = format!("#define KP_SCAN_THREADS {SCAN_THREADS}\n");
        assert!(text.contains(&define), "kernels/cfar.cu lacks {define:?}");
    }
}

//! `radar.range_fft`: windowed FFT of every chirp, written corner-turned.
//!
//! - Input 0: `ci16 [M, N]`, chirp-major: element `m * N + n` is sample `n` of chirp `m`.
//! - Output 0: `cf32 [N, M]`, range-major: element `k * M + m` is bin `k` of chirp `m`'s FFT.
//! - Parameters: `planner` = `estimate` | `measure` | `patient` (default `estimate`, deterministic).
//! - Split: along input axis 0 (chirps), any tile that divides M, or not at all.
//!
//! Parameters, ports and split are checked by the contract
//! (`kplace_kernels::config::RangeFftConfig`). Each chirp is converted to complex f32,
//! multiplied by the Hann window over N (`kplace_kernels::window`), and transformed by an
//! N-point forward FFT (unnormalised, no shift).
//!
//! A launch processes its tile's chirps in chunks sized to stay in the L2 cache: window the
//! chunk into the workspace, run one batched in-place FFTW plan on it, then write the chunk's
//! columns of the output (the corner turn), range bin by range bin, each bin's chunk of chirps
//! as whole cache lines. Workspace rows are padded by 64 bytes: with power-of-two N the rows
//! would otherwise map to the same L1 sets and the column reads of the corner turn would
//! thrash. When the output is larger than the caches (8 MiB and more, as at 4096 x 512) the
//! corner turn writes with streaming stores on x86-64: every line would be evicted before the
//! Doppler stage reads it anyway, and streaming skips reading each line in before writing it.
//!
//! Tiles of one state may run concurrently: each launch uses only its own workspace and writes
//! only its tile's columns of the output, through raw pointers (never overlapping `&mut`).

use std::ffi::CStr;

use kplace_abi::export::{Config, KernelError, KernelImpl, Launch};
use kplace_abi::{DeviceKind, MemorySpace, TensorDesc};
use kplace_kernels::config::RangeFftConfig;
use kplace_kernels::names::RANGE_FFT;
use kplace_kernels::window::hann_interleaved;

use kplace_fftw::{BatchedFft, Complex32, as_f32_mut};

use crate::rigor;
use crate::tensor::{PORTS, workspace};

/// Most workspace bytes one chunk of chirps may take: half a typical L2 cache...
const CHUNK_BYTES: usize = 256 * 1024;

/// ...but at least this many chirps, when the tile allows: the corner turn then writes at
/// least four whole cache lines of every output row at once. Fewer, and each line would be
/// written in pieces by successive chunks, long after it left the cache, and every output row
/// (a page apart at 4096 x 512) would be revisited more often.
const MIN_CHUNK: usize = 32;

/// Output bytes from which the corner turn uses streaming stores (see the module docs).
const STREAM_BYTES: u64 = 8 << 20;

/// Range bins per block of the corner turn: 16 complex values are two cache lines.
const TURN_BLOCK: usize = 16;

/// The `radar.range_fft` kernel state: its plan and window for one frame shape.
#[derive(Debug)]
pub struct RangeFft {
    input: TensorDesc,
    output: TensorDesc,
    /// M: chirps per frame.
    chirps: usize,
    /// N: samples per chirp.
    samples: usize,
    /// Chirps per launch when the stage is split.
    tile: Option<usize>,
    /// Chirps per FFT batch: divides the tile.
    chunk: usize,
    /// Complex elements between workspace rows: N padded to 64 bytes, plus 64 bytes.
    stride: usize,
    /// Hann over N, each coefficient twice (for interleaved I, Q).
    window: Vec<f32>,
    fft: BatchedFft,
    /// Whether the corner turn uses streaming stores.
    stream: bool,
}

impl RangeFft {
    /// Chirps per FFT batch (a divisor of the tile).
    pub fn chunk(&self) -> usize {
        self.chunk
    }
}

/// The largest divisor of `n` that is at most `limit` (at least 1).
pub(crate) fn largest_divisor_at_most(n: usize, limit: usize) -> usize {
    (1..=limit.clamp(1, n.max(1)))
        .rev()
        .find(|d| n.is_multiple_of(*d))
        .unwrap_or(1)
}

impl KernelImpl for RangeFft {
    const NAME: &'static CStr = RANGE_FFT.c_str();
    const DEVICE: DeviceKind = DeviceKind::CPU;
    const MEMORY: MemorySpace = MemorySpace::HOST;
    const N_INPUTS: u32 = 1;
    const N_OUTPUTS: u32 = 1;

    fn create(config: &Config<'_>) -> Result<Self, KernelError> {
        let RangeFftConfig {
            planner,
            input,
            output,
            chirps,
            samples,
            tile,
        } = RangeFftConfig::from_config(config, &PORTS)?;
        let rigor = rigor(planner);
        // Both sizes were checked to fit in memory, hence in usize; the tile divides chirps.
        let (chirps, samples) = (chirps as usize, samples as usize);
        let tile = tile.map(|tile| tile as usize);
        let per_launch = tile.unwrap_or(chirps);
        let stride = samples.next_multiple_of(8) + 8;
        let fit = CHUNK_BYTES / (stride * size_of::<Complex32>());
        let chunk = largest_divisor_at_most(per_launch, fit.max(MIN_CHUNK));
        let fft = BatchedFft::forward(samples, chunk, stride, rigor)?;
        // Streaming stores go out two values at a time, 16-byte aligned.
        let stream = cfg!(target_arch = "x86_64")
            && output.bytes >= STREAM_BYTES
            && chirps.is_multiple_of(2)
            && chunk.is_multiple_of(2);
        Ok(Self {
            input,
            output,
            chirps,
            samples,
            tile,
            chunk,
            stride,
            window: hann_interleaved(samples),
            fft,
            stream,
        })
    }

    fn workspace_bytes(&self) -> u64 {
        (self.chunk * self.stride * size_of::<Complex32>()) as u64
    }

    fn launch(&self, launch: &Launch<'_>) -> Result<(), KernelError> {
        let (begin, count) = match self.tile {
            None => (0, self.chirps),
            Some(_) => {
                let tile = launch.tile();
                let end = tile.begin.checked_add(tile.count);
                if end.is_none_or(|end| end > self.chirps as u64)
                    || tile.count % self.chunk as u64 != 0
                {
                    return Err(KernelError::invalid(format!(
                        "tile [{}, +{}) is not a whole number of {}-chirp chunks within the {} chirps",
                        tile.begin, tile.count, self.chunk, self.chirps
                    )));
                }
                (tile.begin as usize, tile.count as usize)
            }
        };
        let input = PORTS.launch(launch.input(0), "input 0", &self.input)?;
        let output = PORTS.launch(launch.output(0), "output 0", &self.output)?;
        let (n, m) = (self.samples, self.chirps);
        // SAFETY: checked against the descriptor create accepted (host, aligned, large
        // enough); nothing writes a stage's input while it runs.
        let iq = &unsafe { input.host_slice::<i16>() }?[..2 * m * n];
        let out = output.data.cast::<Complex32>();
        // SAFETY: the workspace is this launch's alone (ABI rule); its size was checked.
        let ws = unsafe { workspace::<Complex32>(launch, self.chunk * self.stride) }?;

        let stream = self.stream && begin.is_multiple_of(2) && (out as usize).is_multiple_of(16);
        for first in (begin..begin + count).step_by(self.chunk) {
            for (j, row) in ws.chunks_exact_mut(self.stride).enumerate() {
                let chirp = &iq[(first + j) * 2 * n..][..2 * n];
                window_chirp(chirp, &self.window, as_f32_mut(&mut row[..n]));
            }
            self.fft.execute(ws)?;
            let turn = Turn {
                ws,
                stride: self.stride,
                rows: self.chunk,
                n,
                out,
                m,
                first,
            };
            // SAFETY: `out` holds N x M complex values (checked above); this launch writes
            // only columns first..first + chunk, inside its own tile, which no concurrent
            // launch writes. Streaming needs even columns and a 16-byte-aligned output, checked
            // above and in create (M and the chunk even, hence `first` too).
            unsafe {
                if stream {
                    turn.streaming();
                } else {
                    turn.cached();
                }
            }
        }
        if stream {
            // Streaming stores are weakly ordered: make them visible before the runtime tells
            // the next stage that the output is ready.
            fence_streaming_stores();
        }
        Ok(())
    }
}

/// Converts one chirp's interleaved I, Q samples to f32 and applies the interleaved window.
#[inline]
fn window_chirp(iq: &[i16], window: &[f32], out: &mut [f32]) {
    for ((o, &x), &w) in out.iter_mut().zip(iq).zip(window) {
        *o = f32::from(x) * w;
    }
}

/// One corner turn: `rows` transformed chirps (row `j` at `ws[j * stride..]`, N bins)
/// become columns `first..first + rows` of the `[n, m]` output at `out`.
struct Turn<'a> {
    ws: &'a [Complex32],
    stride: usize,
    rows: usize,
    n: usize,
    out: *mut Complex32,
    m: usize,
    first: usize,
}

impl Turn<'_> {
    /// Writes through the caches, bin by bin; a block of bins is read from L1.
    ///
    /// # Safety
    /// `out` must be valid for writes of `n * m` values, with no other thread accessing
    /// columns `first..first + rows`, which must lie within the `m` columns.
    unsafe fn cached(&self) {
        let Self {
            ws,
            stride,
            rows,
            n,
            out,
            m,
            first,
        } = *self;
        for k0 in (0..n).step_by(TURN_BLOCK) {
            for k in k0..(k0 + TURN_BLOCK).min(n) {
                // SAFETY: k < n and first + rows <= m: the row segment is in bounds and in
                // this launch's columns.
                let dst = unsafe { out.add(k * m + first) };
                for j in 0..rows {
                    // SAFETY: as above, j < rows.
                    unsafe { dst.add(j).write(ws[j * stride + k]) };
                }
            }
        }
    }

    /// Writes with streaming (non-temporal) stores, two values at a time. Falls back to
    /// [`cached`](Self::cached) off x86-64.
    ///
    /// # Safety
    /// As for [`cached`](Self::cached); also `rows`, `m` and `first` must be even and `out`
    /// 16-byte aligned, so every pair lands on a 16-byte boundary.
    unsafe fn streaming(&self) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{__m128i, _mm_set_epi64x, _mm_stream_si128};
            let Self {
                ws,
                stride,
                rows,
                n,
                out,
                m,
                first,
            } = *self;
            let bits = |c: Complex32| {
                (u64::from(c.re.to_bits()) | (u64::from(c.im.to_bits()) << 32)) as i64
            };
            for k0 in (0..n).step_by(TURN_BLOCK) {
                for k in k0..(k0 + TURN_BLOCK).min(n) {
                    // SAFETY: as in `cached`; k * m + first is even, so with `out` 16-byte
                    // aligned the destination is too.
                    let dst = unsafe { out.add(k * m + first) }.cast::<__m128i>();
                    for j in (0..rows).step_by(2) {
                        let (lo, hi) = (bits(ws[j * stride + k]), bits(ws[(j + 1) * stride + k]));
                        // SAFETY: SSE2 is part of the x86-64 baseline; j + 1 < rows (rows
                        // even), so both values are in this launch's segment.
                        unsafe { _mm_stream_si128(dst.add(j / 2), _mm_set_epi64x(hi, lo)) };
                    }
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        // SAFETY: forwarded.
        unsafe {
            self.cached()
        }
    }
}

/// Orders earlier streaming stores before later stores.
fn fence_streaming_stores() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: sfence has no preconditions (SSE is part of the x86-64 baseline).
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
}

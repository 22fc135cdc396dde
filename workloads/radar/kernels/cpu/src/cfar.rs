//! `radar.cfar`: two-dimensional cell-averaging CFAR with exact, order-free training sums.
//!
//! - Input 0: `f32 [N, M]` power map (range rows, Doppler columns).
//! - Output 0: `detections [capacity]`: every cell that crosses its threshold, in row-major
//!   order (range ascending, then Doppler); the first `capacity` are kept and the rest
//!   counted in `overflow`.
//! - Parameters: `guard` (default 2), `train` (default 8, at least 1), and at most one of
//!   `pfa` (default 1e-6, in (0, 1)) or `scale` (a raw alpha, in [0, 1e12]).
//! - Not split.
//!
//! Parameters, ports and the window's bounds are the contract's (`kplace_kernels::cfar`,
//! checked by `kplace_kernels::config::CfarConfig`), as are `K`, alpha and the threshold
//! factor `scale` below, so the GPU library starts from the same numbers.
//!
//! # The detection rule
//!
//! With `h = guard + train`, the window of cell `(r, d)` is the `(2h+1)²` square around it,
//! wrapping on both axes; its training cells are the window minus the `(2 guard + 1)²` guard
//! square, `K = (2h+1)² - (2 guard+1)²` of them (416 by default). The window must fit the map,
//! `2h + 1 <= min(N, M)`, so no cell is counted twice (and `2h + 1 <= 1023`).
//!
//! Powers are summed EXACTLY, in fixed point, so the result cannot depend on the order of
//! summation and every backend (this one, a GPU, a reference model) reports identical
//! detections for the same map:
//!
//! 1. `q(p) = floor(p * 2^8)` as an integer for finite `p >= 0`; 0 for NaN and negative
//!    values (-0 included); `2^86` for `p >= 2^78` and +inf ([`fixed_point`]). Eight fraction
//!    bits resolve 1/256 of an ADC count squared, far below any noise floor, and leave room
//!    for every power an int16 frame can produce: at most `(2^15 sqrt 2 N M)^2`, below 2^74
//!    for 4096 x 512, below 2^78 up to 8192 x 1024.
//! 2. `S = sum of q over the K training cells`, an exact integer below `2^106`.
//! 3. With `scale = alpha / K as f64 / 2f64.powi(8)` (computed once, in `create`:
//!    `kplace_kernels::cfar::threshold_scale`), where `alpha = K * (pfa^(-1/K) - 1)`
//!    (`f64::powf`, `kplace_kernels::cfar::alpha_for_pfa`) or the `scale` parameter, detect iff
//!    `(p as f64) > (S as f64) * scale`: `S` rounded to the nearest f64 (ties to even), then
//!    one f64 multiply, no fused multiply-add ([`detects`]).
//!
//! # How this kernel computes it
//!
//! Almost no cell is anywhere near its threshold. The kernel proves most cells negative with a
//! cheap lower bound on `S` shared by a 2x2 tile of cells, and evaluates the rule exactly only
//! for the cells of the few tiles the bound cannot clear.
//!
//! *The bound.* Per frame, the kernel picks a shift `s` that puts the map's median non-zero
//! power (from a fixed sample of 255 cells) near 2^13, and bounds every cell by
//! `b = min(floor(q / 2^s), cap)`, with `cap = 2^21` for the default window (in general the
//! largest power of two up to 2^23 that keeps a window's sum of `b` within 2^30). `b` comes straight from
//! the f32 bit pattern, branch free, in 32-bit lanes; clamping only weakens the bound, so
//! `2^s b <= q` always. For a 2x2 tile, `U` is a set of whole tiles inside the training set of
//! all four of its cells: the square of `2 hb + 1` tiles a side around it (`hb = (h - 1) / 2`)
//! minus the `2 gb + 1` square covering the four guard squares (`gb = ceil(guard / 2)`), 288
//! cells for the default window. Then `S >= 2^s B`, with `B` the sum of `b` over `U`. The
//! threshold `t(S) = RN(RN(S) * scale)` never decreases as `S` grows (rounding, and
//! multiplying by `scale >= 0`, are monotone) and `2^s B` is an exact f64, so a tile whose
//! largest power is at most `RN(B * (scale * 2^s)) = t(2^s B)` holds no detection. On noise
//! this clears all but about one tile in 4000.
//!
//! *The sums.* The `U` sums are computed separably on the tile grid (a quarter of the cells):
//! per new row of tiles, wrapping prefix sums (extended by `hb` wrapped tiles on each side) give
//! the horizontal box and guard sums at every column as differences of two prefix sums; those
//! enter a ring of `2 hb + 1` rows, and running vertical sums add the row entering the window
//! and subtract the row leaving it. Only the ring lives in the workspace, so it stays
//! cache-resident whatever N is. (A map with an odd dimension, or a window too small for
//! whole-tile bounds, uses 1x1 tiles: `U` is then the cell's whole training set.)
//!
//! *The exact path.* For a candidate tile, each of the `(2h + 2)²` powers around it is split
//! into two 43-bit limbs of `q`, which are added into `u64` column sums over the rows of each
//! cell's window and guard; a cell's `S` is its window's columns less its guard's, and the
//! rule is then applied literally ([`detects`]).
//!
//! The per-row passes are written for the compiler to vectorise, and compiled three times:
//! for the baseline target and, selected at run time, for AVX2 and AVX-512. All three give
//! the same detections: every sum is an exact integer and every floating-point operation a
//! single correctly rounded one.

use std::ffi::CStr;

use kplace_abi::export::{Config, KernelError, KernelImpl, Launch};
use kplace_abi::{DeviceKind, MemorySpace, TensorDesc};
use kplace_kernels::Detection;
use kplace_kernels::cfar::FRACTION_BITS;
use kplace_kernels::config::CfarConfig;
use kplace_kernels::names::CFAR;

use crate::detections::ListWriter;
use crate::tensor::{PORTS, workspace};

mod passes;

use passes::{Bound, Prefix, RowScan, Slide, Tiles, accumulate, horizontal, prefix_row, tile_tops};

/// Bits of the largest fixed-point value.
const SATURATION_BITS: u32 = 86;
/// The largest fixed-point value: powers at or above `2^(86 - FRACTION_BITS)` (and +inf) map
/// to it.
pub const SATURATION: u128 = 1 << SATURATION_BITS;

/// The f32 bit pattern of `2^(86 - FRACTION_BITS)`, the smallest power that saturates.
const SATURATING_BITS: u32 = (127 + SATURATION_BITS - FRACTION_BITS) << 23;
/// The f32 bit pattern of +inf: larger patterns are NaNs or negative.
const INF_BITS: u32 = 0x7f80_0000;
/// Bits of the low limb of an exact value: `q = hi * 2^LO_BITS + lo`, both at most 2^43.
const LO_BITS: u32 = 43;
const LO_MASK: u64 = (1 << LO_BITS) - 1;
/// A window's sum of bound values stays below 2^SUM_BITS, so it converts from i32.
const SUM_BITS: u32 = 30;
/// The largest cap on bound values: `2^23`.
const MAX_CAP_BITS: u32 = 23;
/// Bits between the median's bound value and the cap: the range of powers bounded unclamped.
const HEADROOM_BITS: u32 = 8;
/// Cells sampled for the median power.
const SAMPLES: usize = 255;
/// Tiles per group when looking for candidates: clear groups are skipped in one test.
const GROUP: usize = 16;
/// u64 values per vector in the exact path's loops (a 512-bit register's worth).
const LANES: usize = 8;

/// The fixed-point value of a power: `floor(p * 2^8)`, 0 for NaN and negative values,
/// [`SATURATION`] from `2^78` up. The reference definition (see the module docs).
pub fn fixed_point(p: f32) -> u128 {
    let (hi, lo) = limbs(p.to_bits());
    (u128::from(hi) << LO_BITS) + u128::from(lo)
}

/// The reference decision: whether power `p` crosses the threshold set by the exact training
/// sum `training_sum` (of [`fixed_point`] values) and `scale`
/// (`kplace_kernels::cfar::threshold_scale`).
pub fn detects(p: f32, training_sum: u128, scale: f64) -> bool {
    f64::from(p) > (training_sum as f64) * scale
}

/// `x << n`, or 0 when `n` is negative or at least 64 (the semantics of `vpsllvq`).
#[inline(always)]
fn shl_or_zero(x: u64, n: i64) -> u64 {
    if (n as u64) < 64 { x << n } else { 0 }
}

/// `x >> n`, or 0 when `n` is negative or at least 64 (the semantics of `vpsrlvq`).
#[inline(always)]
fn shr_or_zero(x: u64, n: i64) -> u64 {
    if (n as u64) < 64 { x >> n } else { 0 }
}

/// `x >> n`, or 0 when `n` is negative or at least 32 (the semantics of `vpsrlvd`).
#[inline(always)]
fn shr32_or_zero(x: u32, n: i32) -> u32 {
    if (n as u32) < 32 { x >> n } else { 0 }
}

/// Mantissa (with its implicit bit) and exponent (subnormals taking that of the smallest
/// normal) of a non-negative f32 bit pattern, such that
/// `p * 2^FRACTION_BITS = mantissa * 2^exponent`.
#[inline(always)]
fn decompose(bits: u32) -> (u32, i32) {
    let biased = (bits >> 23) as i32 & 0xff;
    let mantissa = (bits & 0x7f_ffff) | (u32::from(biased != 0) << 23);
    // p = mantissa * 2^(biased - 127 - 23).
    (mantissa, biased.max(1) - 150 + FRACTION_BITS as i32)
}

/// The limbs `(hi, lo)` of `q(p)` for the f32 bit pattern `bits`: `q = hi * 2^43 + lo`.
#[inline(always)]
fn limbs(bits: u32) -> (u64, u64) {
    let (mantissa, s) = decompose(bits);
    let (mantissa, s, top) = (u64::from(mantissa), i64::from(s), i64::from(LO_BITS));
    let lo = (shl_or_zero(mantissa, s) & LO_MASK) | shr_or_zero(mantissa, -s);
    let hi = shl_or_zero(mantissa, s - top) | shr_or_zero(mantissa, top - s);
    if bits > INF_BITS {
        (0, 0)
    } else if bits >= SATURATING_BITS {
        (1 << LO_BITS, 0)
    } else {
        (hi, lo)
    }
}

/// The f32 bit pattern of a power for comparisons by integer order: itself when the power is
/// finite or +inf and non-negative (such patterns order like their values), 0 for NaNs and
/// negatives, which never cross a threshold.
#[inline(always)]
fn orderable(p: f32) -> u32 {
    let bits = p.to_bits();
    if bits <= INF_BITS { bits } else { 0 }
}

/// The per-frame constants of the bound.
#[derive(Clone, Copy, Debug)]
struct Level {
    /// `s`: a power's bound value is `min(floor(q / 2^s), cap)`.
    shift: i32,
    /// The largest bound value.
    cap: u32,
    /// The bound value of a saturated power: `min(2^86 / 2^s, cap)`.
    saturated: u32,
    /// `scale * 2^s` (exact): turns a sum of bound values into a threshold.
    k: f64,
}

impl Level {
    /// The bound value of the power with bit pattern `bits`: at most `q / 2^s`.
    #[inline(always)]
    fn bound(&self, bits: u32) -> u32 {
        let (mantissa, s) = decompose(bits);
        let t = s - self.shift;
        // t >= 0 keeps all 24 mantissa bits, at least 2^23, the largest cap; subnormals never
        // get there (s = -117, shift >= 0).
        let value = if t >= 0 {
            self.cap
        } else {
            shr32_or_zero(mantissa, -t).min(self.cap)
        };
        if bits > INF_BITS {
            0
        } else if bits >= SATURATING_BITS {
            self.saturated
        } else {
            value
        }
    }

    /// Whether a tile whose largest power has pattern `top` may hold a detection, given the
    /// sum `sum` of bound values over its `U`.
    #[inline(always)]
    fn may_cross(&self, top: u32, sum: u32) -> bool {
        // sum < 2^30: exact through i32, which converts in every vector instruction set.
        f64::from(f32::from_bits(top)) > f64::from(sum as i32) * self.k
    }
}

/// Which compiled copy of the frame to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Isa {
    Baseline,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Isa {
    fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            if has!("avx512f") && has!("avx512vl") && has!("avx512dq") && has!("avx512bw") {
                return Isa::Avx512;
            }
            if has!("avx2") {
                return Isa::Avx2;
            }
        }
        Isa::Baseline
    }
}

/// The window in tiles: how the map is cut into tiles and what part of every window the
/// bound of a tile covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Tiling {
    /// Tile side in cells: 2, or 1 when the map has an odd dimension or the window is too
    /// small for 2x2 tiles to keep any whole training tile.
    side: usize,
    /// Tiles per map column and per map row.
    rows: usize,
    cols: usize,
    /// Half width, in tiles, of the square of tiles inside every window of a tile's cells.
    half: usize,
    /// Half width, in tiles, of the square of tiles covering every guard square of them.
    guard: usize,
}

impl Tiling {
    fn new(rows: usize, cols: usize, half: usize, guard: usize) -> Self {
        let by = |side: usize| Self {
            side,
            rows: rows / side,
            cols: cols / side,
            half: (half + 1 - side) / side,
            guard: guard.div_ceil(side),
        };
        let pairs = by(2);
        if rows.is_multiple_of(2) && cols.is_multiple_of(2) && pairs.half > pairs.guard {
            pairs
        } else {
            by(1)
        }
    }

    fn window(&self) -> usize {
        2 * self.half + 1
    }

    /// Length of one extended prefix-sum row of tiles.
    fn prefix_len(&self) -> usize {
        self.cols + 2 * self.half + 1
    }
}

/// The `radar.cfar` kernel state: window geometry and threshold for one map shape.
#[derive(Debug)]
pub struct Cfar {
    input: TensorDesc,
    output: TensorDesc,
    /// N: range rows.
    rows: usize,
    /// M: Doppler columns.
    cols: usize,
    guard: usize,
    /// `guard + train`: the window's half width.
    half: usize,
    tiling: Tiling,
    /// Bits of the largest bound value: a window of them sums below 2^30.
    cap_bits: u32,
    alpha: f64,
    scale: f64,
    capacity: u32,
    isa: Isa,
}

impl Cfar {
    /// The CFAR multiplier in use (from `pfa` or `scale`).
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// The factor applied to exact training sums (`kplace_kernels::cfar::threshold_scale`).
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// The side, in cells, of the tiles sharing one bound (2, or 1; see the module docs).
    pub fn tile_side(&self) -> usize {
        self.tiling.side
    }

    /// Runs the portable code even where a vector unit was detected (for tests comparing
    /// the compiled copies, and for benchmarks).
    pub fn portable(mut self) -> Self {
        self.isa = Isa::Baseline;
        self
    }

    /// Runs the AVX2 copy even where AVX-512 was detected, if the CPU has AVX2; otherwise
    /// changes nothing.
    pub fn avx2(mut self) -> Self {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            self.isa = Isa::Avx2;
        }
        self
    }

    fn window(&self) -> usize {
        2 * self.half + 1
    }

    /// Side of the square of powers the exact path reads around a tile.
    fn span(&self) -> usize {
        self.window() + self.tiling.side - 1
    }

    /// Columns the exact path works on: the span, rounded up to whole vectors when the map is
    /// wide enough (the extra columns are read and summed but never used).
    fn exact_width(&self) -> usize {
        let padded = self.span().next_multiple_of(LANES);
        if padded <= self.cols {
            padded
        } else {
            self.span()
        }
    }

    /// Workspace of the exact path, in u64 words: both limbs of a row of the span, and box
    /// and guard column sums of both limbs per tile row.
    fn exact_words(&self) -> usize {
        (2 + 4 * self.tiling.side) * self.exact_width()
    }

    /// Workspace of the bound, in u32 words: a prefix row, the ring (box and guard sums of
    /// `2 hb + 1` tile rows), the two running vertical sums, the flags and candidates among
    /// the tiles of the row under test, and a map row of scratch.
    fn bound_words(&self) -> usize {
        let t = &self.tiling;
        t.prefix_len() + 2 * t.cols * t.window() + 4 * t.cols + self.cols
    }

    fn workspace_words(&self) -> usize {
        self.exact_words() + self.bound_words().div_ceil(2)
    }
}

impl KernelImpl for Cfar {
    const NAME: &'static CStr = CFAR.c_str();
    const DEVICE: DeviceKind = DeviceKind::CPU;
    const MEMORY: MemorySpace = MemorySpace::HOST;
    const N_INPUTS: u32 = 1;
    const N_OUTPUTS: u32 = 1;

    fn create(config: &Config<'_>) -> Result<Self, KernelError> {
        let CfarConfig {
            params,
            input,
            output,
            rows,
            cols,
            capacity,
        } = CfarConfig::from_config(config, &PORTS)?;
        let window = params.window();
        // Both fit u32 (checked), hence usize; guard + train is at most 511.
        let (rows, cols) = (rows as usize, cols as usize);
        let (guard, half) = (window.guard() as usize, window.half() as usize);
        // Whole windows of bound values must sum within 2^30: cap them at 2^30 / window²
        // rounded down to a power of two, and at 2^23, below any value with all 24 mantissa
        // bits (see `Level::bound`).
        let cells = window.side() * window.side();
        let cap_bits = (SUM_BITS - (u64::BITS - (cells - 1).leading_zeros())).min(MAX_CAP_BITS);
        Ok(Self {
            input,
            output,
            rows,
            cols,
            guard,
            half,
            tiling: Tiling::new(rows, cols, half, guard),
            cap_bits,
            alpha: params.alpha(),
            scale: params.scale(),
            capacity,
            isa: Isa::detect(),
        })
    }

    fn workspace_bytes(&self) -> u64 {
        (self.workspace_words() * size_of::<u64>()) as u64
    }

    fn launch(&self, launch: &Launch<'_>) -> Result<(), KernelError> {
        let input = PORTS.launch(launch.input(0), "input 0", &self.input)?;
        let output = PORTS.launch(launch.output(0), "output 0", &self.output)?;
        // SAFETY: checked against the descriptor create accepted; nothing writes the input
        // while the stage runs.
        let map = &unsafe { input.host_slice::<f32>() }?[..self.rows * self.cols];
        // SAFETY: the workspace is this launch's alone (ABI rule); its size was checked.
        let ws = unsafe { workspace::<u64>(launch, self.workspace_words()) }?;
        let (exact, bound) = ws.split_at_mut(self.exact_words());
        let bound = &mut as_words(bound)[..self.bound_words()];
        // SAFETY: the output was checked to hold a header and `capacity` records; an unsplit
        // stage's output is this launch's alone.
        let mut list = unsafe { ListWriter::new(output, self.capacity) };
        let scratch = Scratch { bound, exact };
        match self.isa {
            Isa::Baseline => self.frame(map, scratch, &mut list),
            // SAFETY: chosen only when the CPU reports AVX2.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => unsafe { self.frame_avx2(map, scratch, &mut list) },
            // SAFETY: chosen only when the CPU reports these AVX-512 subsets.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => unsafe { self.frame_avx512(map, scratch, &mut list) },
        }
        list.finish();
        Ok(())
    }
}

/// Views u64 words as twice as many u32 words.
fn as_words(words: &mut [u64]) -> &mut [u32] {
    // SAFETY: a u64 is two u32 without padding, and u64 alignment exceeds u32's; every bit
    // pattern is a valid u32.
    unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u32>(), words.len() * 2) }
}

/// A launch's workspace, split by use.
struct Scratch<'a> {
    /// The bound's tile-grid arrays ([`Cfar::bound_words`]).
    bound: &'a mut [u32],
    /// The exact path's row prefix sums ([`Cfar::exact_words`]).
    exact: &'a mut [u64],
}

impl Cfar {
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn frame_avx2(&self, map: &[f32], scratch: Scratch<'_>, list: &mut ListWriter<'_>) {
        self.frame(map, scratch, list);
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw")]
    fn frame_avx512(&self, map: &[f32], scratch: Scratch<'_>, list: &mut ListWriter<'_>) {
        self.frame(map, scratch, list);
    }

    #[inline(always)]
    fn frame(&self, map: &[f32], scratch: Scratch<'_>, list: &mut ListWriter<'_>) {
        match self.tiling.side {
            2 => self.frame_tiled::<2>(map, scratch, list),
            _ => self.frame_tiled::<1>(map, scratch, list),
        }
    }

    /// Chooses the frame's shift: the median non-zero power of a fixed sample of cells gets a
    /// bound value of about `cap / 2^8`, so typical powers are bounded to a few parts in 10^4
    /// and only powers 2^8 times the median or more are clamped.
    #[inline(always)]
    fn level(&self, map: &[f32]) -> Level {
        let mut sample = [0u32; SAMPLES];
        for (i, s) in sample.iter_mut().enumerate() {
            *s = orderable(map[i * map.len() / SAMPLES]);
        }
        // The median of the non-zero powers: a sparse map's zeros say nothing about its scale.
        sample.sort_unstable();
        let zeros = sample.partition_point(|&bits| bits == 0);
        let median = sample[(zeros + (SAMPLES - 1)) / 2];
        let median_bits = u128::BITS - fixed_point(f32::from_bits(median)).leading_zeros();
        let shift = median_bits.saturating_sub(self.cap_bits - HEADROOM_BITS);
        let cap = 1u32 << self.cap_bits;
        Level {
            shift: shift as i32,
            cap,
            saturated: u32::try_from(SATURATION >> shift).map_or(cap, |s| s.min(cap)),
            k: self.scale * 2f64.powi(shift as i32),
        }
    }

    /// Detects over the whole map with tiles of `T x T` cells (`T` = the tiling's side).
    #[inline(always)]
    fn frame_tiled<const T: usize>(
        &self,
        map: &[f32],
        scratch: Scratch<'_>,
        list: &mut ListWriter<'_>,
    ) {
        let t = self.tiling;
        let (n, m, h, g, w) = (t.rows, t.cols, t.half, t.guard, t.window());
        let level = self.level(map);
        let (prefix, rest) = scratch.bound.split_at_mut(t.prefix_len());
        let (ring, rest) = rest.split_at_mut(2 * m * w);
        let (total_box, rest) = rest.split_at_mut(m);
        let (total_guard, rest) = rest.split_at_mut(m);
        let (flags, rest) = rest.split_at_mut(m);
        let (candidates, rest) = rest.split_at_mut(m);
        let cells = &mut rest[..self.cols];
        let rows = |a: usize| -> [&[f32]; T] {
            std::array::from_fn(|i| &map[(T * a + i) * self.cols..][..self.cols])
        };
        let mut row_scan = RowScan {
            map,
            flags,
            candidates,
            cells,
            exact: scratch.exact,
        };

        // Prime the ring with virtual tile rows -h..=h (slot i holds tile row i - h, wrapped:
        // its box sums, then its guard sums) and the vertical sums of tile row 0.
        total_box.fill(0);
        total_guard.fill(0);
        for (i, slot) in ring.chunks_exact_mut(2 * m).enumerate() {
            prefix_row::<T>(rows((i + n - h) % n), h, &level, row_scan.cells, prefix);
            let (slot_box, slot_guard) = slot.split_at_mut(m);
            horizontal(prefix, h, g, slot_box, slot_guard);
            accumulate(total_box, slot_box);
            if (h - g..=h + g).contains(&i) {
                accumulate(total_guard, slot_guard);
            }
        }
        let first = Bound {
            total_box,
            total_guard,
            level: &level,
        };
        self.scan_row::<T>(0, rows(0), first, &mut row_scan, list);

        for a in 1..n {
            // Tile row a + h enters the box and takes the slot of row a - 1 - h, which leaves
            // it; row a + g enters the guard and row a - 1 - g leaves it (both already in the
            // ring since h > g).
            prefix_row::<T>(rows((a + h) % n), h, &level, row_scan.cells, prefix);
            let slot_new = (a - 1) % w;
            let slot_in = (a + g + h) % w;
            let slot_out = (a + h - 1 - g) % w;
            let Ok([new, enter, leave]) = ring.get_disjoint_mut([
                2 * m * slot_new..2 * m * (slot_new + 1),
                2 * m * slot_in + m..2 * m * (slot_in + 1),
                2 * m * slot_out + m..2 * m * (slot_out + 1),
            ]) else {
                unreachable!("ring slots of distinct rows within one window are distinct");
            };
            let (new_box, new_guard) = new.split_at_mut(m);
            let slide = Slide {
                prefix: Prefix::new(prefix, m, h, g),
                new_box,
                new_guard,
                enter,
                leave,
                total_box,
                total_guard,
                level: &level,
            };
            self.scan_row::<T>(a, rows(a), slide, &mut row_scan, list);
        }
    }

    /// Tests every tile of tile row `a` (map rows `rows`) with `tiles`, then decides exactly
    /// the cells of the tiles the bound does not clear, appending detections in row-major
    /// order.
    #[inline(always)]
    fn scan_row<const T: usize>(
        &self,
        a: usize,
        rows: [&[f32]; T],
        mut tiles: impl Tiles,
        scan: &mut RowScan<'_>,
        list: &mut ListWriter<'_>,
    ) {
        tile_tops(rows, scan.cells, scan.flags);
        tiles.run(scan.flags);
        // Candidates are rare: skip whole groups of clear tiles with one vectorised test.
        let mut found = 0;
        for (g, group) in scan.flags.chunks(GROUP).enumerate() {
            if group.iter().fold(0, |any, &f| any | f) != 0 {
                for (i, _) in group.iter().enumerate().filter(|(_, f)| **f != 0) {
                    scan.candidates[found] = (g * GROUP + i) as u32;
                    found += 1;
                }
            }
        }
        if found == 0 {
            return;
        }
        // Decide every candidate tile's cells (flags now keep each tile's detection mask),
        // then append them by map row.
        for &b in &scan.candidates[..found] {
            scan.flags[b as usize] = self.exact_tile::<T>(scan.map, a, b as usize, scan.exact);
        }
        for i in 0..T {
            let r = T * a + i;
            for &b in &scan.candidates[..found] {
                let detected = scan.flags[b as usize];
                for l in 0..T {
                    if detected >> (i * T + l) & 1 != 0 {
                        let d = T * b as usize + l;
                        let power = scan.map[r * self.cols + d];
                        list.push(Detection {
                            range_bin: r as u32,
                            doppler_bin: d as u32,
                            power,
                        });
                    }
                }
            }
        }
    }
}

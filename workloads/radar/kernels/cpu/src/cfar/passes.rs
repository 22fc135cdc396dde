//! The CFAR kernel's inner loops: the per-row passes of the bound on the tile grid, and the
//! exact path for the tiles the bound cannot clear (see the parent module's docs for what
//! they compute). They are written for the compiler to vectorise: flat elementwise loops over
//! slices passed as separate parameters, so they are known not to alias, every one
//! `#[inline(always)]` so that each compiled copy of the frame (baseline, AVX2, AVX-512) gets
//! its own.

use super::{Cfar, LANES, LO_BITS, Level, detects, limbs, orderable};

impl Cfar {
    /// Decides the cells of tile `(a, b)` exactly: bit `i T + l` of the result is set when
    /// cell `(T a + i, T b + l)` detects.
    ///
    /// The tile's windows cover a square of `span` powers a side. Row by row, the limbs of
    /// its powers are added into column sums per tile row `i`: over the window's rows for the
    /// box, over the guard's rows for the guard. Each cell's training sum is then its window's
    /// columns of the box sums less its guard's columns of the guard sums.
    #[inline(always)]
    pub(super) fn exact_tile<const T: usize>(
        &self,
        map: &[f32],
        a: usize,
        b: usize,
        exact: &mut [u64],
    ) -> u32 {
        let (n, m, h, g) = (self.rows, self.cols, self.half, self.guard);
        let w = self.window();
        let width = self.exact_width();
        let mut arrays = exact.chunks_exact_mut(width);
        let mut next = || arrays.next().unwrap_or_default();
        let (row_hi, row_lo) = (next(), next());
        let mut sums: [[&mut [u64]; 4]; T] =
            std::array::from_fn(|_| [next(), next(), next(), next()]);
        for [box_hi, box_lo, guard_hi, guard_lo] in &mut sums {
            for column_sums in [box_hi, box_lo, guard_hi, guard_lo] {
                column_sums.fill(0);
            }
        }
        let first_col = (T * b + m - h) % m;
        for ri in 0..self.span() {
            let row = &map[(T * a + n + ri - h) % n * m..][..m];
            row_limbs(row, first_col, row_hi, row_lo);
            for (i, [box_hi, box_lo, guard_hi, guard_lo]) in sums.iter_mut().enumerate() {
                if (i..i + w).contains(&ri) {
                    add_columns(box_hi, row_hi);
                    add_columns(box_lo, row_lo);
                }
                if (i + h - g..=i + h + g).contains(&ri) {
                    add_columns(guard_hi, row_hi);
                    add_columns(guard_lo, row_lo);
                }
            }
        }
        let mut detected = 0;
        for (i, [box_hi, box_lo, guard_hi, guard_lo]) in sums.iter().enumerate() {
            for l in 0..T {
                let (window, guard) = (l..l + w, l + h - g..l + h + g + 1);
                let hi =
                    column_total(&box_hi[window.clone()]) - column_total(&guard_hi[guard.clone()]);
                let lo = column_total(&box_lo[window]) - column_total(&guard_lo[guard]);
                let sum = (u128::from(hi) << LO_BITS) + u128::from(lo);
                if detects(map[(T * a + i) * m + T * b + l], sum, self.scale) {
                    detected |= 1 << (i * T + l);
                }
            }
        }
        detected
    }
}

/// Writes the limbs of `q` of `hi.len()` (at most the row's length) cells of `row` from
/// column `first`, wrapping at the row's end.
#[inline(always)]
fn row_limbs(row: &[f32], first: usize, hi: &mut [u64], lo: &mut [u64]) {
    let len = hi.len();
    let head = &row[first..(first + len).min(row.len())];
    let tail = &row[..len - head.len()];
    let (head_hi, tail_hi) = hi.split_at_mut(head.len());
    let (head_lo, tail_lo) = lo.split_at_mut(head.len());
    for (cells, hi, lo) in [(head, head_hi, head_lo), (tail, tail_hi, tail_lo)] {
        for ((h, l), p) in hi.iter_mut().zip(lo.iter_mut()).zip(cells) {
            (*h, *l) = limbs(p.to_bits());
        }
    }
}

/// `sums += row`, elementwise. Limb sums of at most 1023² cells stay below 2^64.
#[inline(always)]
fn add_columns(sums: &mut [u64], row: &[u64]) {
    let (sum_chunks, sum_rest) = sums.as_chunks_mut::<LANES>();
    let (row_chunks, row_rest) = row.as_chunks::<LANES>();
    for (s, x) in sum_chunks.iter_mut().zip(row_chunks) {
        for (s, x) in s.iter_mut().zip(x) {
            *s += x;
        }
    }
    for (s, x) in sum_rest.iter_mut().zip(row_rest) {
        *s += x;
    }
}

/// The sum of some column sums.
#[inline(always)]
fn column_total(sums: &[u64]) -> u64 {
    sums.iter().sum()
}

/// What the scan of a row needs besides the bound: the map, and room for the row's flags,
/// candidates and cells and for the exact path.
pub(super) struct RowScan<'a> {
    pub(super) map: &'a [f32],
    pub(super) flags: &'a mut [u32],
    pub(super) candidates: &'a mut [u32],
    /// A map row of scratch.
    pub(super) cells: &'a mut [u32],
    pub(super) exact: &'a mut [u64],
}

/// Per-tile work of a row's scan: update what the row needs and test every tile's bound.
/// `flags` holds each tile's largest power ([`tile_tops`]) on entry and, on return, 1 for a
/// tile whose bound does not clear all its cells and 0 otherwise.
///
/// Implementations pass their arrays to a free function as separate slices: as parameters
/// they are known not to alias, which lets the compiler vectorise the loop.
pub(super) trait Tiles {
    fn run(&mut self, flags: &mut [u32]);
}

/// Writes the largest power of every tile of a tile row (its `T` map rows), as orderable
/// bit patterns. `cells` is scratch of one map row.
#[inline(always)]
pub(super) fn tile_tops<const T: usize>(rows: [&[f32]; T], cells: &mut [u32], tops: &mut [u32]) {
    let cells = &mut cells[..rows[0].len()];
    for (c, p) in cells.iter_mut().zip(rows[0]) {
        *c = orderable(*p);
    }
    for row in &rows[1..] {
        for (c, p) in cells.iter_mut().zip(*row) {
            *c = (*c).max(orderable(*p));
        }
    }
    for (top, pair) in tops.iter_mut().zip(cells.as_chunks::<T>().0) {
        *top = pair.iter().fold(0, |t, &c| t.max(c));
    }
}

/// Tests tile row 0, whose vertical sums the priming computed.
pub(super) struct Bound<'a> {
    pub(super) total_box: &'a [u32],
    pub(super) total_guard: &'a [u32],
    pub(super) level: &'a Level,
}

impl Tiles for Bound<'_> {
    #[inline(always)]
    fn run(&mut self, flags: &mut [u32]) {
        bound_tiles(flags, self.total_box, self.total_guard, self.level);
    }
}

#[inline(always)]
fn bound_tiles(flags: &mut [u32], total_box: &[u32], total_guard: &[u32], level: &Level) {
    let n = flags.len();
    let (total_box, total_guard) = (&total_box[..n], &total_guard[..n]);
    for i in 0..n {
        flags[i] = u32::from(level.may_cross(flags[i], total_box[i].wrapping_sub(total_guard[i])));
    }
}

/// The entering tile row's prefix sums, viewed at the starts and ends of its box and guard
/// windows.
pub(super) struct Prefix<'a> {
    box_start: &'a [u32],
    box_end: &'a [u32],
    guard_start: &'a [u32],
    guard_end: &'a [u32],
}

impl<'a> Prefix<'a> {
    #[inline(always)]
    pub(super) fn new(prefix: &'a [u32], m: usize, h: usize, g: usize) -> Self {
        let w = 2 * h + 1;
        Self {
            box_start: &prefix[..m],
            box_end: &prefix[w..w + m],
            guard_start: &prefix[h - g..h - g + m],
            guard_end: &prefix[h + g + 1..h + g + 1 + m],
        }
    }
}

/// One step of the sliding window: the entering tile row's sums go into the leaving row's ring
/// slot, the vertical sums move down one tile row, and the row's tiles are tested.
pub(super) struct Slide<'a> {
    pub(super) prefix: Prefix<'a>,
    /// The entering row's box sums (over the leaving row's).
    pub(super) new_box: &'a mut [u32],
    /// The entering row's guard sums.
    pub(super) new_guard: &'a mut [u32],
    /// Guard sums of the row entering the guard.
    pub(super) enter: &'a [u32],
    /// Guard sums of the row leaving the guard.
    pub(super) leave: &'a [u32],
    /// Vertical sums of box sums.
    pub(super) total_box: &'a mut [u32],
    /// Vertical sums of guard sums.
    pub(super) total_guard: &'a mut [u32],
    pub(super) level: &'a Level,
}

impl Tiles for Slide<'_> {
    #[inline(always)]
    fn run(&mut self, flags: &mut [u32]) {
        let p = &self.prefix;
        slide_tiles(
            flags,
            [p.box_start, p.box_end, p.guard_start, p.guard_end],
            [self.enter, self.leave],
            [self.new_box, self.new_guard],
            [self.total_box, self.total_guard],
            self.level,
        );
    }
}

/// [`Slide`]'s work on every tile of the row.
#[inline(always)]
fn slide_tiles(
    flags: &mut [u32],
    [box_start, box_end, guard_start, guard_end]: [&[u32]; 4],
    [enter, leave]: [&[u32]; 2],
    [new_box, new_guard]: [&mut [u32]; 2],
    [total_box, total_guard]: [&mut [u32]; 2],
    level: &Level,
) {
    let n = flags.len();
    let (box_start, box_end, guard_start, guard_end) = (
        &box_start[..n],
        &box_end[..n],
        &guard_start[..n],
        &guard_end[..n],
    );
    let (enter, leave, new_box, new_guard) = (
        &enter[..n],
        &leave[..n],
        &mut new_box[..n],
        &mut new_guard[..n],
    );
    let (total_box, total_guard) = (&mut total_box[..n], &mut total_guard[..n]);
    for i in 0..n {
        let entering = box_end[i].wrapping_sub(box_start[i]);
        let sum_box = total_box[i].wrapping_add(entering).wrapping_sub(new_box[i]);
        total_box[i] = sum_box;
        new_box[i] = entering;
        let sum_guard = total_guard[i].wrapping_add(enter[i]).wrapping_sub(leave[i]);
        total_guard[i] = sum_guard;
        new_guard[i] = guard_end[i].wrapping_sub(guard_start[i]);
        flags[i] = u32::from(level.may_cross(flags[i], sum_box.wrapping_sub(sum_guard)));
    }
}

/// Writes the wrapping prefix sums of the tile sums of bound values of one tile row (its `T`
/// map rows), extended by `h` wrapped tiles on each side: `prefix[j]` sums extended tiles
/// `0..j`, extended tile `i` being tile column `(i - h) mod tiles per row`. `cells` is
/// scratch of one map row.
#[inline(always)]
pub(super) fn prefix_row<const T: usize>(
    rows: [&[f32]; T],
    h: usize,
    level: &Level,
    cells: &mut [u32],
    prefix: &mut [u32],
) {
    let m = rows[0].len() / T;
    let cells = &mut cells[..rows[0].len()];
    // Flat elementwise passes vectorise; the tile sums then add neighbours.
    for (c, p) in cells.iter_mut().zip(rows[0]) {
        *c = level.bound(p.to_bits());
    }
    for row in &rows[1..] {
        for (c, p) in cells.iter_mut().zip(*row) {
            *c += level.bound(p.to_bits());
        }
    }
    let tiles = &mut prefix[h + 1..h + 1 + m];
    for (tile, pair) in tiles.iter_mut().zip(cells.as_chunks::<T>().0) {
        *tile = pair.iter().sum();
    }
    // Extended tiles 0..h are columns m-h..m; tiles m+h..m+2h are columns 0..h.
    prefix.copy_within(m + 1..m + 1 + h, 1);
    prefix.copy_within(h + 1..2 * h + 1, m + h + 1);
    prefix[0] = 0;
    let mut acc = 0u32;
    for x in &mut prefix[1..m + 2 * h + 1] {
        acc = acc.wrapping_add(*x);
        *x = acc;
    }
}

/// Box (width 2h+1) and guard (width 2g+1) sums of one tile row at every column, from its
/// extended prefix sums.
#[inline(always)]
pub(super) fn horizontal(
    prefix: &[u32],
    h: usize,
    g: usize,
    box_out: &mut [u32],
    guard_out: &mut [u32],
) {
    let m = box_out.len();
    let p = Prefix::new(prefix, m, h, g);
    let guard_out = &mut guard_out[..m];
    for d in 0..m {
        box_out[d] = p.box_end[d].wrapping_sub(p.box_start[d]);
        guard_out[d] = p.guard_end[d].wrapping_sub(p.guard_start[d]);
    }
}

/// `total += row`, elementwise, wrapping.
#[inline(always)]
pub(super) fn accumulate(total: &mut [u32], row: &[u32]) {
    for (t, x) in total.iter_mut().zip(row) {
        *t = t.wrapping_add(*x);
    }
}

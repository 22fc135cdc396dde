//! Batched, in-place, single-precision FFTW plans behind a safe type, for kernel libraries
//! written in Rust (the radar's CPU kernels, the block library). FFTW is linked statically
//! (see `build.rs`), so a library built on this crate needs no libfftw3 at run time.
//!
//! Guarantees:
//! - Plans are created and destroyed only while holding [`PLANNER`], a process-wide lock:
//!   FFTW's planner is not thread-safe, and several kernel states (one per stage and frame
//!   slot) are built and dropped from different threads.
//! - Planning happens on scratch arrays from `fftwf_malloc`, never on caller data, so
//!   `FFTW_MEASURE` and `FFTW_PATIENT` (which overwrite their arrays while timing) are safe to
//!   use at any time, and the expensive planning happens once, in the kernel's `create`.
//! - [`BatchedFft::execute`] runs the plan on a caller's buffer with FFTW's new-array
//!   interface after checking its length and its SIMD alignment, so it is safe to call from
//!   several threads at once on distinct buffers.

use std::ffi::c_int;
use std::ptr::NonNull;
use std::sync::{Mutex, MutexGuard};

use fftw_sys as sys;
use kplace_abi::export::KernelError;

/// A single-precision complex number as FFTW stores it: real part, then imaginary part.
pub type Complex32 = sys::fftwf_complex;

/// Serialises every call into FFTW's planner (plan creation and destruction) in this process.
pub static PLANNER: Mutex<()> = Mutex::new(());

/// Takes [`PLANNER`]. A panic while planning leaves FFTW's state as valid as any failed plan
/// does, so a poisoned lock is still usable.
fn planner() -> MutexGuard<'static, ()> {
    PLANNER
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// How hard FFTW searches for a fast plan.
///
/// The default is `estimate` because it is deterministic: `measure` and `patient` choose
/// algorithms by timing them, so two kernel states in one run (one per frame slot), or two
/// runs, may pick different algorithms that round differently, and a run's output would then
/// depend on which slot processed a frame.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Rigor {
    /// `FFTW_ESTIMATE`: a heuristic plan, made instantly, the same every time.
    #[default]
    Estimate,
    /// `FFTW_MEASURE`: times candidate plans (up to about a second per new size).
    Measure,
    /// `FFTW_PATIENT`: times many more candidates (can take minutes for large sizes).
    Patient,
}

/// Which way a plan transforms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Direction {
    /// Sign -1: `X[k] = sum_n x[n] exp(-2 pi i k n / N)`.
    #[default]
    Forward,
    /// Sign +1, unnormalised: the forward transform's inverse times N.
    Inverse,
}

impl Direction {
    /// FFTW's sign of the exponent.
    fn sign(self) -> i32 {
        match self {
            Direction::Forward => sys::FFTW_FORWARD,
            // FFTW_BACKWARD is +1, bound as an unsigned constant.
            Direction::Inverse => 1,
        }
    }
}

impl Rigor {
    fn flags(self) -> u32 {
        match self {
            Rigor::Estimate => sys::FFTW_ESTIMATE,
            Rigor::Measure => sys::FFTW_MEASURE,
            Rigor::Patient => sys::FFTW_PATIENT,
        }
    }
}

/// An unnormalised, in-place plan for `batch` transforms of `len` points, transform `i`
/// starting at element `i * stride` of the buffer.
#[derive(Debug)]
pub struct BatchedFft {
    plan: NonNull<sys::fftwf_plan_s>,
    len: usize,
    batch: usize,
    stride: usize,
}

// SAFETY: the plan is immutable after creation. FFTW documents its execute functions, the
// new-array ones included, as thread-safe ("the only thread-safe routines in FFTW"), so one
// plan may run on distinct buffers from several threads at once; creation and destruction,
// which are not thread-safe, happen under PLANNER.
unsafe impl Send for BatchedFft {}
// SAFETY: see Send; `execute` takes `&self` and touches only the caller's buffer.
unsafe impl Sync for BatchedFft {}

impl BatchedFft {
    /// Plans forward transforms ([`BatchedFft::new`]).
    pub fn forward(
        len: usize,
        batch: usize,
        stride: usize,
        rigor: Rigor,
    ) -> Result<Self, KernelError> {
        Self::new(len, batch, stride, Direction::Forward, rigor)
    }

    /// Plans the transforms. Fails on sizes FFTW cannot take (zero, or beyond `c_int`) or
    /// when FFTW returns no plan.
    pub fn new(
        len: usize,
        batch: usize,
        stride: usize,
        direction: Direction,
        rigor: Rigor,
    ) -> Result<Self, KernelError> {
        if len == 0 || batch == 0 || stride < len {
            return Err(KernelError::internal(format!(
                "invalid FFT layout: {batch} transforms of {len} points, {stride} apart"
            )));
        }
        let elements = (batch - 1)
            .checked_mul(stride)
            .and_then(|n| n.checked_add(len))
            .filter(|&n| c_int::try_from(n).is_ok())
            .ok_or_else(|| {
                KernelError::invalid(format!(
                    "{batch} transforms of {len} points are too many for FFTW's int sizes"
                ))
            })?;
        // Every size is below `elements`, which fits c_int, so these casts are lossless.
        let (n, howmany, dist) = (len as c_int, batch as c_int, stride as c_int);

        let _lock = planner();
        // SAFETY: fftwf_malloc returns null or an allocation of the size asked for, aligned
        // as FFTW's SIMD code wants; it is freed below on every path.
        let scratch =
            unsafe { sys::fftwf_malloc(elements * size_of::<Complex32>()) }.cast::<Complex32>();
        if scratch.is_null() {
            return Err(KernelError::backend(format!(
                "fftwf_malloc failed for a {len}-point FFT batch of {batch}"
            )));
        }
        // SAFETY: `scratch` holds `elements` complex values, enough for `howmany` transforms
        // of `n` points `dist` apart; null embeds mean the arrays are exactly `n` long; the
        // planner lock is held.
        let plan = unsafe {
            sys::fftwf_plan_many_dft(
                1,
                &n,
                howmany,
                scratch,
                std::ptr::null(),
                1,
                dist,
                scratch,
                std::ptr::null(),
                1,
                dist,
                direction.sign(),
                rigor.flags(),
            )
        };
        // SAFETY: allocated above by fftwf_malloc; a plan does not keep its planning arrays.
        unsafe { sys::fftwf_free(scratch.cast()) };
        let plan = NonNull::new(plan).ok_or_else(|| {
            KernelError::backend(format!(
                "FFTW could not plan {batch} transforms of {len} points"
            ))
        })?;
        Ok(Self {
            plan,
            len,
            batch,
            stride,
        })
    }

    /// Points per transform.
    pub fn points(&self) -> usize {
        self.len
    }

    /// Transforms per execution.
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// Elements between the starts of consecutive transforms.
    pub fn stride(&self) -> usize {
        self.stride
    }

    /// The elements a buffer must hold: `(batch - 1) * stride + len`.
    pub fn buffer_len(&self) -> usize {
        (self.batch - 1) * self.stride + self.len
    }

    /// Transforms `data` in place. `data` must hold at least [`buffer_len`](Self::buffer_len)
    /// elements and start on FFTW's SIMD alignment (any 64-byte-aligned address does).
    pub fn execute(&self, data: &mut [Complex32]) -> Result<(), KernelError> {
        if data.len() < self.buffer_len() {
            return Err(KernelError::internal(format!(
                "FFT buffer of {} elements is smaller than the plan's {}",
                data.len(),
                self.buffer_len()
            )));
        }
        let ptr = data.as_mut_ptr();
        // SAFETY: fftwf_alignment_of only inspects the address. New-array execution requires
        // the buffer to share the alignment of the planning array (from fftwf_malloc, so 0).
        if unsafe { sys::fftwf_alignment_of(ptr.cast()) } != 0 {
            return Err(KernelError::internal(format!(
                "FFT buffer at {ptr:p} is not aligned for FFTW's SIMD code"
            )));
        }
        // SAFETY: the plan is in place and the buffer is exclusively borrowed, large enough
        // for the plan's layout and aligned like the planning array; execution is thread-safe.
        unsafe { sys::fftwf_execute_dft(self.plan.as_ptr(), ptr, ptr) };
        Ok(())
    }
}

impl Drop for BatchedFft {
    fn drop(&mut self) {
        let _lock = planner();
        // SAFETY: the plan came from fftwf_plan_many_dft and is destroyed once, under the lock.
        unsafe { sys::fftwf_destroy_plan(self.plan.as_ptr()) };
    }
}

/// Views complex values as their interleaved real and imaginary parts.
pub fn as_f32_mut(data: &mut [Complex32]) -> &mut [f32] {
    // SAFETY: Complex32 (num_complex::Complex<f32>) is #[repr(C)] { re: f32, im: f32 }: two
    // f32 without padding, so n values are 2n f32 with the same alignment.
    unsafe { std::slice::from_raw_parts_mut(data.as_mut_ptr().cast::<f32>(), data.len() * 2) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A buffer of `len` elements starting on a 64-byte boundary, carved from a longer vector.
    fn aligned(storage: &mut Vec<Complex32>, len: usize) -> &mut [Complex32] {
        storage.resize(len + 8, Complex32::new(0.0, 0.0));
        let skip = storage
            .iter()
            .position(|c| (c as *const Complex32 as usize).is_multiple_of(64))
            .expect("a 64-byte boundary within 8 elements");
        &mut storage[skip..skip + len]
    }

    /// Deterministic, irregular test data.
    fn signal(len: usize) -> Vec<(f64, f64)> {
        (0..len)
            .map(|i| {
                let x = i as f64;
                (
                    (0.37 * x).sin() + 0.1 * (x * x * 0.013).cos(),
                    (1.7 * x).cos() - 0.2,
                )
            })
            .collect()
    }

    /// The direct DFT in double precision, sign -1 (forward) or +1 (inverse, unnormalised).
    fn dft(x: &[(f64, f64)], sign: f64) -> Vec<(f64, f64)> {
        let n = x.len() as f64;
        (0..x.len())
            .map(|k| {
                x.iter()
                    .enumerate()
                    .fold((0.0, 0.0), |(re, im), (j, &(a, b))| {
                        let phase = sign * 2.0 * std::f64::consts::PI * (k * j) as f64 / n;
                        let (s, c) = phase.sin_cos();
                        (re + a * c - b * s, im + a * s + b * c)
                    })
            })
            .collect()
    }

    fn check(direction: Direction, sign: f64) {
        let (len, batch, stride) = (48, 3, 50);
        let plan = BatchedFft::new(len, batch, stride, direction, Rigor::Estimate).unwrap();
        let mut storage = Vec::new();
        let data = aligned(&mut storage, plan.buffer_len());
        let rows: Vec<Vec<(f64, f64)>> = (0..batch).map(|b| signal(len + b)).collect();
        for (b, row) in rows.iter().enumerate() {
            for (i, &(re, im)) in row.iter().take(len).enumerate() {
                data[b * stride + i] = Complex32::new(re as f32, im as f32);
            }
        }
        // The gap between rows is not part of any transform and must be left alone.
        data[len] = Complex32::new(7.0, -7.0);
        plan.execute(data).unwrap();
        for (b, row) in rows.iter().enumerate() {
            let want = dft(&row[..len], sign);
            for (i, &(re, im)) in want.iter().enumerate() {
                let got = data[b * stride + i];
                assert!(
                    (f64::from(got.re) - re).abs() < 1e-4 * len as f64
                        && (f64::from(got.im) - im).abs() < 1e-4 * len as f64,
                    "row {b} bin {i}: {got:?}, want ({re}, {im})"
                );
            }
        }
        assert_eq!(data[len], Complex32::new(7.0, -7.0));
    }

    #[test]
    fn forward_transforms_match_the_direct_dft() {
        check(Direction::Forward, -1.0);
    }

    #[test]
    fn inverse_transforms_match_the_direct_dft_unnormalised() {
        check(Direction::Inverse, 1.0);
    }

    #[test]
    fn bad_layouts_and_buffers_are_refused() {
        assert!(BatchedFft::forward(0, 1, 1, Rigor::Estimate).is_err());
        assert!(BatchedFft::forward(8, 2, 4, Rigor::Estimate).is_err());
        let plan = BatchedFft::forward(8, 2, 8, Rigor::Estimate).unwrap();
        let mut storage = Vec::new();
        let short = aligned(&mut storage, 15);
        assert!(plan.execute(short).is_err());
        let mut storage = Vec::new();
        let data = aligned(&mut storage, 17);
        assert!(
            plan.execute(&mut data[1..]).is_err(),
            "misaligned by 8 bytes"
        );
    }
}

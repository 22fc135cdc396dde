//! Batched, in-place, single-precision FFTW plans behind a safe type.
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
use kplace_kernels::fft::Planner;

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

/// How hard FFTW searches for a fast plan: the kernels' `planner` parameter
/// ([`Planner`], which the contract reads and validates).
///
/// The default is `estimate` because it is deterministic: `measure` and `patient` choose
/// algorithms by timing them, so two kernel states in one run (one per frame slot), or two
/// runs, may pick different algorithms that round differently, and a run's output would then
/// depend on which slot processed a frame. On this workload `measure` was not measurably
/// faster.
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

impl From<Planner> for Rigor {
    fn from(planner: Planner) -> Self {
        match planner {
            Planner::Estimate => Rigor::Estimate,
            Planner::Measure => Rigor::Measure,
            Planner::Patient => Rigor::Patient,
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

/// A forward (sign -1), unnormalised, in-place plan for `batch` transforms of `len` points,
/// transform `i` starting at element `i * stride` of the buffer.
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
    /// Plans the transforms. Fails on sizes FFTW cannot take (zero, or beyond `c_int`) or
    /// when FFTW returns no plan.
    pub fn forward(
        len: usize,
        batch: usize,
        stride: usize,
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
                sys::FFTW_FORWARD,
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

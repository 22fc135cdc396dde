//! cuFFT plans: one per state, with the work area in the runtime's workspace.
//!
//! A plan is made at create time (`cufftSetAutoAllocation(0)` first, so cuFFT allocates no
//! work area of its own) and executed at launch, in place, on the launch's stream with the
//! launch's workspace as its work area. Stream and work area are properties of the plan, and
//! tiles of one state may be launched from several threads at once, so setting them and
//! enqueueing the transform happen under a small lock: held for three enqueue calls, never
//! across GPU work.

use std::ffi::c_int;
use std::sync::{Arc, Mutex};

use cudarc::cufft::result::{self, CufftError};
use cudarc::cufft::sys::{self, cufftHandle, cufftType};
use cudarc::driver::sys::CUstream;
use kplace_abi::export::KernelError;

use crate::driver::Device;

/// `CUFFT_FORWARD` (cufft.h): the sign of the exponent of a forward transform.
const CUFFT_FORWARD: c_int = -1;
use crate::queue::FftShape;

fn cufft_error(call: &str, e: CufftError) -> KernelError {
    KernelError::backend(format!("{call} failed: {:?}", e.0))
}

/// Fails with a clear error unless libcufft can be loaded (cudarc would panic on first use).
/// libcufft is found where the machine keeps it (`kplace_cuda_libs`) and loaded first, so
/// cudarc's dlopen by name resolves to it.
pub fn probe() -> Result<(), KernelError> {
    let found = kplace_cuda_libs::find(kplace_cuda_libs::Library::Cufft);
    // SAFETY: only tries to load the library; runs no code from it.
    if unsafe { sys::is_culib_present() } {
        Ok(())
    } else {
        Err(KernelError::backend(format!(
            "libcufft could not be loaded: the GPU FFT stages need cuFFT (libcufft.so.12): {}",
            found.not_found_message()
        )))
    }
}

/// A batched, in-place, forward C2C plan without a work area of its own.
#[derive(Debug)]
pub struct Fft {
    device: Arc<Device>,
    handle: cufftHandle,
    shape: FftShape,
    work_bytes: u64,
    /// Serialises (set stream, set work area, execute) between concurrent launches.
    lock: Mutex<()>,
}

// SAFETY: a cuFFT handle may be used from any thread; concurrent use is serialised by `lock`,
// and the handle is destroyed once, in Drop.
unsafe impl Send for Fft {}
// SAFETY: as above.
unsafe impl Sync for Fft {}

impl Fft {
    /// Plans `shape` on `device` (whose context the caller has bound).
    pub(crate) fn new(device: &Arc<Device>, shape: FftShape) -> Result<Self, KernelError> {
        probe()?;
        let too_large = || {
            KernelError::invalid(format!(
                "an FFT batch of {} x {} points is too large for cuFFT's 32-bit plan sizes",
                shape.batch, shape.len
            ))
        };
        let len = c_int::try_from(shape.len).map_err(|_| too_large())?;
        let batch = c_int::try_from(shape.batch).map_err(|_| too_large())?;
        let handle = result::create().map_err(|e| cufft_error("cufftCreate", e))?;
        // From here on, Drop destroys the handle whatever fails.
        let mut fft = Self {
            device: Arc::clone(device),
            handle,
            shape,
            work_bytes: 0,
            lock: Mutex::new(()),
        };
        // SAFETY: a live handle, not yet planned (auto allocation must be set before).
        unsafe { result::set_auto_allocation(handle, false) }
            .map_err(|e| cufft_error("cufftSetAutoAllocation", e))?;
        let mut n = [len];
        // SAFETY: a live handle; `n` holds rank 1 sizes; null embeds select the basic
        // contiguous layout (strides and distances are then ignored).
        let work = unsafe {
            result::make_plan_many(
                handle,
                1,
                n.as_mut_ptr(),
                std::ptr::null_mut(),
                1,
                len,
                std::ptr::null_mut(),
                1,
                len,
                cufftType::CUFFT_C2C,
                batch,
            )
        }
        .map_err(|e| cufft_error("cufftMakePlanMany", e))?;
        fft.work_bytes = work as u64;
        Ok(fft)
    }

    /// Bytes of work area an execution needs.
    pub(crate) fn work_bytes(&self) -> u64 {
        self.work_bytes
    }

    /// Enqueues the planned batch in place at `data` on `stream`, with work area `work`.
    ///
    /// # Safety
    /// `data` must hold the batch and `work` [`work_bytes`](Self::work_bytes) bytes, both in
    /// the plan's context, until the transform completes; `stream` must belong to it.
    pub(crate) unsafe fn exec(
        &self,
        shape: FftShape,
        stream: CUstream,
        data: u64,
        work: u64,
    ) -> Result<(), KernelError> {
        if shape != self.shape {
            return Err(KernelError::internal(format!(
                "FFT of {shape:?} asked of a plan for {:?}",
                self.shape
            )));
        }
        // Poisoning means a panic elsewhere between these calls; the plan itself is intact,
        // since every call below sets what it needs.
        let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: a live plan; the stream and addresses are the caller's promise.
        unsafe {
            result::set_stream(self.handle, stream.cast())
                .map_err(|e| cufft_error("cufftSetStream", e))?;
            result::set_work_area(self.handle, work as *mut std::ffi::c_void)
                .map_err(|e| cufft_error("cufftSetWorkArea", e))?;
            // In place: the same pointer twice (the safe wrapper insists on two buffers).
            let data = data as *mut sys::cufftComplex;
            result::exec_c2c(self.handle, data, data, CUFFT_FORWARD)
                .map_err(|e| cufft_error("cufftExecC2C", e))
        }
    }
}

impl Drop for Fft {
    fn drop(&mut self) {
        // cufftDestroy frees the plan's device data in its context, so bind it: the runtime
        // may destroy states on any thread. Failures cannot be reported from a destructor.
        if let Ok(_bound) = self.device.bind() {
            // SAFETY: created in `new`, destroyed once.
            let _ = unsafe { result::destroy(self.handle) };
        }
    }
}

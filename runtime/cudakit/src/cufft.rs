//! cuFFT plans: one per state, with the work area in the runtime's workspace.
//!
//! A plan is made at create time for one [`FftShape`] (`cufftSetAutoAllocation(0)` first, so
//! cuFFT allocates no work area of its own), with the shape's data layout: in place and
//! contiguous (cuFFT's basic layout), or out of place with input and output strides and
//! distances (the advanced layout: `cufftMakePlanMany64` with non-null embeds). It is
//! executed at launch on the launch's stream, with the launch's workspace as its work area.
//!
//! Stream and work area are properties of the plan, and tiles of one state may be launched
//! from several threads at once, so setting them and enqueueing the transform happen under a
//! small lock: held for three enqueue calls, never across GPU work.

use std::ffi::{c_int, c_longlong};
use std::sync::{Arc, Mutex};

use cudarc::cufft::result::{self, CufftError};
use cudarc::cufft::sys::{self, cufftHandle, cufftType};
use cudarc::driver::sys::CUstream;
use kplace_abi::export::KernelError;

use crate::driver::Device;
use crate::fft_shape::{FftDirection, FftShape, FftStrides};

/// `CUFFT_FORWARD` and `CUFFT_INVERSE` (cufft.h): the sign of the exponent.
fn cufft_direction(direction: FftDirection) -> c_int {
    match direction {
        FftDirection::Forward => -1,
        FftDirection::Inverse => 1,
    }
}

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

/// A batched C2C plan for one [`FftShape`], without a work area of its own.
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

/// A layout's stride and distance as cuFFT's 64-bit plan arguments.
fn strides64(strides: FftStrides) -> Option<(c_longlong, c_longlong)> {
    Some((
        c_longlong::try_from(strides.stride).ok()?,
        c_longlong::try_from(strides.dist).ok()?,
    ))
}

impl Fft {
    /// Plans `shape` on `device` (whose context the caller has bound).
    pub fn new(device: &Arc<Device>, shape: FftShape) -> Result<Self, KernelError> {
        probe()?;
        let too_large = || {
            KernelError::invalid(format!(
                "an FFT batch of {} x {} points ({:?}) is too large for cuFFT's plan sizes",
                shape.batch, shape.len, shape.layout
            ))
        };
        let len = c_longlong::try_from(shape.len).map_err(|_| too_large())?;
        let batch = c_longlong::try_from(shape.batch).map_err(|_| too_large())?;
        let (istride, idist) = strides64(shape.input()).ok_or_else(too_large)?;
        let (ostride, odist) = strides64(shape.output()).ok_or_else(too_large)?;
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
        // Rank 1: an embed's one entry is the storage extent, not used by the indexing
        // (`b * dist + x * stride`), but non-null embeds are what select the advanced layout.
        let (mut in_extent, mut out_extent) = ([len], [len]);
        let (inembed, onembed) = if shape.in_place() {
            // Null embeds: the basic contiguous layout (strides and distances are ignored).
            (std::ptr::null_mut(), std::ptr::null_mut())
        } else {
            (in_extent.as_mut_ptr(), out_extent.as_mut_ptr())
        };
        // SAFETY: a live handle; `n` and the embeds hold rank-1 sizes and live for the call.
        let work = unsafe {
            result::make_plan_many64(
                handle,
                1,
                n.as_mut_ptr(),
                inembed,
                istride,
                idist,
                onembed,
                ostride,
                odist,
                cufftType::CUFFT_C2C,
                batch,
            )
        }
        .map_err(|e| cufft_error("cufftMakePlanMany64", e))?;
        fft.work_bytes = work as u64;
        Ok(fft)
    }

    /// Bytes of work area an execution needs.
    pub fn work_bytes(&self) -> u64 {
        self.work_bytes
    }

    /// Enqueues the planned batch from `input` to `output` (the same address in place) on
    /// `stream`, with work area `work`.
    ///
    /// # Safety
    /// `input` and `output` must hold what the shape's layouts span (not overlapping, out of
    /// place) and `work` [`work_bytes`](Self::work_bytes) bytes, all in the plan's context,
    /// until the transform completes; `stream` must belong to it.
    pub unsafe fn exec(
        &self,
        shape: FftShape,
        stream: CUstream,
        input: u64,
        output: u64,
        work: u64,
    ) -> Result<(), KernelError> {
        if shape != self.shape {
            return Err(KernelError::internal(format!(
                "FFT of {shape:?} asked of a plan for {:?}",
                self.shape
            )));
        }
        if shape.in_place() != (input == output) {
            return Err(KernelError::internal(format!(
                "FFT of {:?} given input {input:#x} and output {output:#x}",
                shape.layout
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
            result::exec_c2c(
                self.handle,
                input as *mut sys::cufftComplex,
                output as *mut sys::cufftComplex,
                cufft_direction(shape.direction),
            )
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

//! The CUDA driver, through cudarc's `result`/`sys` layers with raw handles.
//!
//! The runtime owns the streams and the memory and passes them as raw handles; this library
//! owns only what it creates: a reference on the device's primary context (so the context
//! outlives every state built in it), small device buffers made at create time (the windows),
//! modules and cuFFT plans. Every call's failure becomes a [`KernelError`] naming the call and
//! the CUDA error.

use std::marker::PhantomData;
use std::sync::Arc;

use cudarc::driver::result::{self, DriverError};
use cudarc::driver::sys::{self, CUcontext, CUdevice, CUdevice_attribute, CUdeviceptr};
use kplace_abi::Status;
use kplace_abi::export::KernelError;

use crate::nvrtc::Arch;

/// The error for a failed driver call: `cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY`.
pub fn driver_error(call: &str, e: DriverError) -> KernelError {
    let name = e
        .error_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("{:?}", e.0));
    let message = format!("{call} failed: {name}");
    if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
        KernelError {
            status: Status::OUT_OF_MEMORY,
            message,
        }
    } else {
        KernelError::backend(message)
    }
}

/// Attaches the failing call's name to a driver result.
pub trait Check<T> {
    /// `Ok` unchanged; an error as [`driver_error`] for `call`.
    fn check(self, call: &str) -> Result<T, KernelError>;
}

impl<T> Check<T> for Result<T, DriverError> {
    fn check(self, call: &str) -> Result<T, KernelError> {
        self.map_err(|e| driver_error(call, e))
    }
}

/// Fails with a clear error unless libcuda loads and initialises (cudarc would panic on first
/// use of a missing library). libcuda is found where the machine keeps it
/// (`kplace_cuda_libs`) and loaded first, so cudarc's dlopen by name resolves to it.
pub fn probe() -> Result<(), KernelError> {
    let found = kplace_cuda_libs::find(kplace_cuda_libs::Library::Cuda);
    // SAFETY: only tries to load the library; runs no code from it.
    if !unsafe { sys::is_culib_present() } {
        return Err(KernelError::backend(format!(
            "libcuda could not be loaded (no NVIDIA driver here, or none where kplace looks): {}",
            found.not_found_message()
        )));
    }
    // cuInit is idempotent and cheap after the first call.
    result::init().check("cuInit")
}

/// One device, holding a reference on its primary context for as long as it lives.
#[derive(Debug)]
pub struct Device {
    ordinal: u32,
    device: CUdevice,
    context: CUcontext,
}

// SAFETY: driver handles are plain identifiers, valid from any thread; the primary context
// reference is released exactly once, in Drop.
unsafe impl Send for Device {}
// SAFETY: as above; no method mutates the handles.
unsafe impl Sync for Device {}

impl Device {
    /// Opens device `ordinal` and retains its primary context.
    pub fn open(ordinal: u32) -> Result<Arc<Self>, KernelError> {
        probe()?;
        let index = i32::try_from(ordinal)
            .map_err(|_| KernelError::invalid(format!("device ordinal {ordinal} is too large")))?;
        let count = result::device::get_count().check("cuDeviceGetCount")?;
        if index >= count {
            return Err(KernelError::invalid(format!(
                "CUDA device {ordinal} does not exist ({count} device(s) found)"
            )));
        }
        let device = result::device::get(index).check("cuDeviceGet")?;
        // SAFETY: a device handle from cuDeviceGet; released in Drop.
        let context =
            unsafe { result::primary_ctx::retain(device) }.check("cuDevicePrimaryCtxRetain")?;
        Ok(Arc::new(Self {
            ordinal,
            device,
            context,
        }))
    }

    /// The device's ordinal.
    pub fn ordinal(&self) -> u32 {
        self.ordinal
    }

    /// The primary context's handle (the cache key of loaded modules).
    pub fn context(&self) -> CUcontext {
        self.context
    }

    /// The device's compute capability.
    pub fn arch(&self) -> Result<Arch, KernelError> {
        let attribute = |a| {
            // SAFETY: a device handle from cuDeviceGet.
            unsafe { result::device::get_attribute(self.device, a) }
                .check("cuDeviceGetAttribute")
                .map(|v| u32::try_from(v).unwrap_or(0))
        };
        Ok(Arch {
            major: attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            minor: attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        })
    }

    /// Makes the primary context current on this thread until the guard drops. The runtime
    /// already does so around create and launch; pushing it again is harmless, and it makes
    /// teardown (which the runtime may run on any thread) safe.
    pub fn bind(&self) -> Result<Bound, KernelError> {
        // SAFETY: a context retained by this Device, hence alive.
        unsafe { sys::cuCtxPushCurrent_v2(self.context) }
            .result()
            .check("cuCtxPushCurrent")?;
        Ok(Bound {
            _thread: PhantomData,
        })
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        // SAFETY: retained once in `open`. A failure leaves one reference behind; nothing
        // else can be done about it in a destructor.
        let _ = unsafe { result::primary_ctx::release(self.device) };
    }
}

/// A device's primary context pushed on this thread; popped on drop. Not `Send`: the pop
/// must happen on the thread that pushed. Callers keep the [`Device`] alive meanwhile.
pub struct Bound {
    _thread: PhantomData<*const ()>,
}

impl Drop for Bound {
    fn drop(&mut self) {
        let mut popped: CUcontext = std::ptr::null_mut();
        // SAFETY: pops the context pushed in `Device::bind` on this thread.
        let _ = unsafe { sys::cuCtxPopCurrent_v2(&mut popped) };
    }
}

/// Device memory allocated at create time (never at launch) and freed with its state.
#[derive(Debug)]
pub struct DeviceBuffer {
    device: Arc<Device>,
    ptr: CUdeviceptr,
}

// SAFETY: a device address is a plain number; freed exactly once, in Drop.
unsafe impl Send for DeviceBuffer {}
// SAFETY: as above; launches only read it.
unsafe impl Sync for DeviceBuffer {}

impl DeviceBuffer {
    /// Copies `data` into new device memory. Synchronous: create time only.
    pub fn upload<T: Copy>(device: &Arc<Device>, data: &[T]) -> Result<Self, KernelError> {
        let _bound = device.bind()?;
        let bytes = std::mem::size_of_val(data).max(1);
        // SAFETY: a current context; `bytes` > 0.
        let ptr = unsafe { result::malloc_sync(bytes) }.check("cuMemAlloc")?;
        let buffer = Self {
            device: Arc::clone(device),
            ptr,
        };
        // SAFETY: `ptr` holds at least size_of_val(data) bytes; the source is a live slice.
        unsafe { result::memcpy_htod_sync(ptr, data) }.check("cuMemcpyHtoD")?;
        // From pageable memory the copy returns once the bytes are staged, and the DMA runs on
        // the legacy default stream, which the runtime's non-blocking streams do not wait
        // for: wait for it here, so no launch can read the buffer before it lands.
        // SAFETY: the null stream is the context's legacy default stream.
        unsafe { result::stream::synchronize(std::ptr::null_mut()) }
            .check("cuStreamSynchronize(legacy stream)")?;
        Ok(buffer)
    }

    /// The device address.
    pub fn address(&self) -> u64 {
        self.ptr
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // The state is destroyed after its last launch completed (ABI rule), so nothing on
        // the device still reads this memory. Failures cannot be reported from here.
        if let Ok(_bound) = self.device.bind() {
            // SAFETY: allocated in `upload`, freed once.
            let _ = unsafe { result::free_sync(self.ptr) };
        }
    }
}

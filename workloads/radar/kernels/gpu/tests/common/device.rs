//! Device helpers for the GPU tests: the primary context and a stream, device buffers, and
//! launches built from the real ABI structs.

use std::ffi::c_void;

use cudarc::driver::result;
use cudarc::driver::sys::{CUcontext, CUdevice, CUstream};
use kplace_abi::export::{KernelError, KernelImpl, Launch};
use kplace_abi::{LaunchArgs, Tensor, TensorDesc, Tile};

/// Device 0's primary context, current on the creating thread, and a stream in it.
pub struct Gpu {
    device: CUdevice,
    context: CUcontext,
    pub stream: CUstream,
}

impl Gpu {
    /// The device, or `None` after printing why the test is skipped (a failure instead under
    /// `KPLACE_REQUIRE_GPU=1`).
    pub fn open() -> Option<Self> {
        if let Err(e) = kplace_gpu::probe() {
            kplace_testkit::gpu::skip_or_fail(e.message);
            return None;
        }
        let device = result::device::get(0).expect("cuDeviceGet");
        // SAFETY: a device from cuDeviceGet; released in Drop.
        let context = unsafe { result::primary_ctx::retain(device) }.expect("retain");
        // SAFETY: a retained context.
        unsafe { result::ctx::set_current(context) }.expect("set current");
        let stream =
            result::stream::create(result::stream::StreamKind::NonBlocking).expect("stream");
        Some(Self {
            device,
            context,
            stream,
        })
    }

    /// Makes the context current on the calling thread (as the runtime does for a worker).
    pub fn bind_here(&self) {
        // SAFETY: the context is retained while `self` lives.
        unsafe { result::ctx::set_current(self.context) }.expect("set current");
    }

    pub fn sync(&self) {
        // SAFETY: a live stream.
        unsafe { result::stream::synchronize(self.stream) }.expect("stream synchronize");
    }
}

// SAFETY: driver handles are identifiers usable from any thread; the tests only enqueue on the
// stream and make the context current from several threads.
unsafe impl Sync for Gpu {}

impl Drop for Gpu {
    fn drop(&mut self) {
        // SAFETY: created in `open`, destroyed once, after the tests synchronized.
        unsafe {
            let _ = result::stream::destroy(self.stream);
            let _ = result::primary_ctx::release(self.device);
        }
    }
}

/// Waits for the legacy default stream. A memset of device memory, or a copy from pageable
/// memory, may return before it lands, on a stream the tests' non-blocking stream does not
/// wait for: without this, a launch could read a buffer not yet zeroed or filled.
fn legacy_sync() {
    // SAFETY: the null stream is the current context's legacy default stream.
    unsafe { result::stream::synchronize(std::ptr::null_mut()) }.expect("cuStreamSynchronize");
}

/// Device memory for a test.
pub struct DevBuf {
    pub ptr: u64,
    pub len: usize,
}

impl DevBuf {
    pub fn zeroed(len: usize) -> Self {
        // SAFETY: a current context; at least one byte.
        let ptr = unsafe { result::malloc_sync(len.max(1)) }.expect("cuMemAlloc");
        // SAFETY: `len` bytes just allocated.
        unsafe { result::memset_d8_sync(ptr, 0, len.max(1)) }.expect("cuMemset");
        legacy_sync();
        Self { ptr, len }
    }

    pub fn from_slice<T: Copy>(values: &[T]) -> Self {
        let buf = Self::zeroed(std::mem::size_of_val(values));
        // SAFETY: the buffer holds the slice's bytes.
        unsafe { result::memcpy_htod_sync(buf.ptr, values) }.expect("cuMemcpyHtoD");
        legacy_sync();
        buf
    }

    pub fn to_vec<T: Copy + Default>(&self) -> Vec<T> {
        let mut out = vec![T::default(); self.len / size_of::<T>()];
        // SAFETY: the buffer holds at least the vector's bytes; work was synchronized.
        unsafe { result::memcpy_dtoh_sync(&mut out, self.ptr) }.expect("cuMemcpyDtoH");
        out
    }

    pub fn bytes(&self) -> Vec<u8> {
        self.to_vec::<u8>()
    }
}

impl Drop for DevBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed`; the tests synchronize before dropping.
        let _ = unsafe { result::free_sync(self.ptr) };
    }
}

pub fn tensor(desc: TensorDesc, buf: &DevBuf) -> Tensor {
    assert!(buf.len as u64 >= desc.bytes);
    Tensor {
        desc,
        data: buf.ptr as *mut c_void,
    }
}

/// Enqueues one launch of `kernel` on `stream` with workspace `ws`.
pub fn enqueue<K: KernelImpl>(
    kernel: &K,
    stream: CUstream,
    input: (TensorDesc, &DevBuf),
    output: (TensorDesc, &DevBuf),
    ws: &DevBuf,
    tile: Tile,
) -> Result<(), KernelError> {
    let inputs = [tensor(input.0, input.1)];
    let outputs = [tensor(output.0, output.1)];
    let args = LaunchArgs {
        inputs: inputs.as_ptr(),
        outputs: outputs.as_ptr(),
        n_inputs: 1,
        n_outputs: 1,
        workspace: ws.ptr as *mut c_void,
        workspace_bytes: ws.len as u64,
        stream: stream.cast(),
        tile,
        ..Default::default()
    };
    // SAFETY: every pointer in `args` is valid for the call; the buffers outlive the work
    // (the tests synchronize before dropping them).
    let launch = unsafe { Launch::from_raw(&args) };
    kernel.launch(&launch)
}

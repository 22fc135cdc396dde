//! A real CUDA device through the driver API, loaded at run time.
//!
//! # Layering
//! As in cudarc itself: `cudarc::driver::sys` (the raw, dynamically loaded `cu*` functions) ->
//! `cudarc::driver::result` (the same calls returning `Result`) -> this module, which turns
//! them into the [`Gpu`] seam. cudarc's safe layer (`CudaContext`, `CudaStream`, `CudaSlice`)
//! is deliberately not used: it panics when libcuda cannot be loaded, and it records its own
//! events around every buffer use, while this runtime orders all work with its own events and
//! owns every handle's lifetime (see the [parent module](super)).
//!
//! What the machine offers (driver, devices, libraries) is [`super::probe`]'s; this module
//! opens and uses a device.
//!
//! # What it guarantees
//! - libcuda is found by `kplace_cuda_libs` (where a machine keeps it, not only on the
//!   loader's path) and loaded before cudarc loads it by name.
//! - [`CudaGpu::open`] and [`CudaProvider`] return a [`GpuError`], never panic: without a driver the
//!   error says "no CUDA driver found", and for a missing device it names the ordinal and how
//!   many devices exist.
//! - Every [`Gpu`] call is one driver call (two for none; ending a capture three: end,
//!   instantiate, destroy the captured template), with no locks, allocation or formatting on
//!   success; errors name the device (`gpu:N`), the call with its key argument, and the
//!   driver's error name and text.
//! - Captures are thread-local (`CU_STREAM_CAPTURE_MODE_THREAD_LOCAL`): only the capturing
//!   thread is kept from calls that are unsafe during a capture, so other pipelines go on
//!   allocating and creating kernels meanwhile.
//! - Pinned memory is allocated with flags 0: page-locked but not write-combined, since the CPU
//!   reads the buffers the GPU writes.
//! - Streams are non-blocking (no implicit ordering with the legacy default stream), events
//!   have timing disabled (cheapest record and wait).
//! - A [`CudaGpu`] holds a reference on the device's primary context from `open` until it is
//!   dropped, so kernel libraries built with any CUDA toolchain share one context with the
//!   runtime.

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::panic::catch_unwind;
use std::ptr;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use cudarc::driver::result::{self, DriverError};
use cudarc::driver::sys;

use super::probe::{
    PriorityRange, describe, device_handle, device_name, libcuda_missing, panic_text,
    priority_range, with_current,
};
use super::{
    Event, Gpu, GpuError, GpuProvider, GraphExec, HostFn, LaunchFailure, LaunchRequest, Stream,
};

// Device addresses travel as pointer-sized values (`*mut u8`, as kernels receive them through
// the C ABI); CUdeviceptr is 64 bits, so only 64-bit hosts can carry them losslessly.
const _: () = assert!(size_of::<usize>() == size_of::<sys::CUdeviceptr>());

// ---------------------------------------------------------------------------------------------
// CudaGpu
// ---------------------------------------------------------------------------------------------

/// One CUDA device, used through its primary context. Holds a reference on that context from
/// [`open`](Self::open) until dropped. Implements the [`Gpu`] seam with one driver call per
/// operation and no hidden synchronisation or event tracking.
#[derive(Debug)]
pub struct CudaGpu {
    ordinal: u32,
    /// `gpu:N`, the device's name in errors.
    label: String,
    name: String,
    device: sys::CUdevice,
    context: sys::CUcontext,
    priorities: PriorityRange,
}

// SAFETY: the driver API is thread-safe and a context handle may be made current on any
// thread; CudaGpu never mutates its fields after open.
unsafe impl Send for CudaGpu {}
// SAFETY: as for Send: nothing in a CudaGpu changes after open.
unsafe impl Sync for CudaGpu {}

impl CudaGpu {
    /// Opens device `ordinal`: checks that libcuda loads, initialises the driver, and retains
    /// the device's primary context. Never panics. Errors say "no CUDA driver found" when
    /// libcuda cannot be loaded, and name the ordinal and the device count when the device
    /// does not exist. The calling thread's current context is left as it was: call
    /// [`Gpu::bind_thread`] on every thread that uses the device.
    pub fn open(ordinal: u32) -> Result<Arc<CudaGpu>, GpuError> {
        let label = format!("gpu:{ordinal}");
        // cudarc panics on the first driver call without libcuda, so this comes first.
        if let Some(reason) = libcuda_missing() {
            // Every place searched makes a long line: said with -v; `kplace devices` lists
            // them too.
            tracing::debug!("{label}: {reason}");
            return Err(GpuError::new(
                label,
                "open",
                "no CUDA driver found (no libcuda where kplace looks: `kplace devices` lists \
                 the places, -v says them here)"
                    .to_string(),
            ));
        }
        match catch_unwind(|| Self::open_loaded(ordinal, &label)) {
            Ok(opened) => opened,
            Err(panic) => Err(GpuError::new(
                label,
                "open",
                format!("cudarc panicked: {}", panic_text(&*panic)),
            )),
        }
    }

    fn open_loaded(ordinal: u32, label: &str) -> Result<Arc<CudaGpu>, GpuError> {
        let err =
            |call: &'static str| move |e: DriverError| GpuError::new(label, call, describe(e));
        result::init().map_err(err("cuInit"))?;
        let count = result::device::get_count().map_err(err("cuDeviceGetCount"))?;
        let count = u32::try_from(count).unwrap_or(0);
        if ordinal >= count {
            let seen = match count {
                0 => "no CUDA devices".to_string(),
                1 => "1 CUDA device (gpu:0)".to_string(),
                n => format!("{n} CUDA devices (gpu:0 to gpu:{})", n - 1),
            };
            return Err(GpuError::new(
                label,
                "open",
                format!("no such device: the driver shows this process {seen}"),
            ));
        }
        let device = device_handle(ordinal).map_err(err("cuDeviceGet"))?;
        let name = device_name(device).map_err(err("cuDeviceGetName"))?;
        // SAFETY: `device` came from cuDeviceGet.
        let context = unsafe { result::primary_ctx::retain(device) }
            .map_err(err("cuDevicePrimaryCtxRetain"))?;
        // From here on the retain is owned by `gpu`, whose Drop releases it on every path.
        let mut gpu = CudaGpu {
            ordinal,
            label: label.to_string(),
            name,
            device,
            context,
            priorities: PriorityRange {
                greatest: 0,
                least: 0,
            },
        };
        // SAFETY: the context is retained by `gpu`.
        gpu.priorities = unsafe { with_current(context, priority_range) }
            .map_err(err("cuCtxGetStreamPriorityRange"))?;
        Ok(Arc::new(gpu))
    }

    /// The stream priorities this device accepts; [`Gpu::create_stream`] clamps into it.
    pub fn priority_range(&self) -> PriorityRange {
        self.priorities
    }

    /// The raw primary context, for code that must name it (e.g. NVRTC module loading
    /// elsewhere); it stays valid while this `CudaGpu` lives.
    pub fn context(&self) -> *mut c_void {
        self.context.cast()
    }

    /// A [`GpuError`] for `call` failing with `e` on this device. Only built on failure, so the
    /// success path never formats.
    fn error(&self, call: String, e: DriverError) -> GpuError {
        GpuError::new(self.label.clone(), call, describe(e))
    }
}

impl Drop for CudaGpu {
    fn drop(&mut self) {
        // SAFETY: balances open's retain. The primary context is destroyed once its last
        // reference goes; a failure here could only leak that reference, and Drop cannot
        // report it.
        let _ = unsafe { result::primary_ctx::release(self.device) };
    }
}

fn raw_stream(stream: Stream) -> sys::CUstream {
    stream.0.cast()
}

fn raw_event(event: Event) -> sys::CUevent {
    event.0.cast()
}

fn raw_graph(graph: GraphExec) -> sys::CUgraphExec {
    graph.0.cast()
}

fn device_address(ptr: *const u8) -> sys::CUdeviceptr {
    // Lossless: see the size assertion at the top of this module.
    ptr.addr() as sys::CUdeviceptr
}

impl Gpu for CudaGpu {
    fn ordinal(&self) -> u32 {
        self.ordinal
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn total_memory(&self) -> Option<u64> {
        // SAFETY: `self.device` came from cuDeviceGet.
        unsafe { result::device::total_mem(self.device) }
            .ok()
            .map(|bytes| bytes as u64)
    }

    fn bind_thread(&self) -> Result<(), GpuError> {
        // SAFETY: the context is retained while self lives.
        unsafe { result::ctx::set_current(self.context) }
            .map_err(|e| self.error("cuCtxSetCurrent".into(), e))
    }

    fn alloc_device(&self, bytes: usize) -> Result<*mut u8, GpuError> {
        // SAFETY: allocates in the thread's current context (bind_thread's contract); the
        // memory is uninitialised, which raw bytes tolerate.
        let dptr = unsafe { result::malloc_sync(bytes) }
            .map_err(|e| self.error(format!("cuMemAlloc({bytes} bytes)"), e))?;
        // A device address, never dereferenced on the host: no provenance.
        Ok(ptr::without_provenance_mut(dptr as usize))
    }

    unsafe fn free_device(&self, ptr: *mut u8) {
        if ptr.is_null() {
            return;
        }
        // SAFETY: per the caller. The trait gives a failed free no channel: it means the
        // context is already broken, which the next enqueuing call reports.
        let _ = unsafe { result::free_sync(device_address(ptr)) };
    }

    fn alloc_pinned(&self, bytes: usize) -> Result<*mut u8, GpuError> {
        // Flags 0: page-locked but NOT write-combined, since the CPU reads what the GPU writes
        // here and write-combined reads are uncached. Under unified addressing (every 64-bit
        // platform CUDA 13 supports) such memory is accessible from all contexts anyway, so
        // PORTABLE and DEVICEMAP would add nothing.
        // SAFETY: allocates in the thread's current context (bind_thread's contract).
        let host = unsafe { result::malloc_host(bytes, 0) }
            .map_err(|e| self.error(format!("cuMemHostAlloc({bytes} bytes, flags 0)"), e))?;
        Ok(host.cast())
    }

    unsafe fn free_pinned(&self, ptr: *mut u8) {
        if ptr.is_null() {
            return;
        }
        // SAFETY: per the caller; a failure is unreportable, as in free_device.
        let _ = unsafe { result::free_host(ptr.cast()) };
    }

    fn create_stream(&self, priority: i32) -> Result<Stream, GpuError> {
        let priority = self.priorities.clamp(priority);
        result::stream::create_with_priority(result::stream::StreamKind::NonBlocking, priority)
            .map(|s| Stream(s.cast()))
            .map_err(|e| {
                self.error(
                    format!("cuStreamCreateWithPriority(NON_BLOCKING, priority {priority})"),
                    e,
                )
            })
    }

    unsafe fn destroy_stream(&self, stream: Stream) {
        // SAFETY: per the caller. The driver lets queued work finish before releasing the
        // stream; a failure is unreportable, as in free_device.
        let _ = unsafe { result::stream::destroy(raw_stream(stream)) };
    }

    fn create_event(&self) -> Result<Event, GpuError> {
        result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
            .map(|e| Event(e.cast()))
            .map_err(|e| self.error("cuEventCreate(DISABLE_TIMING)".into(), e))
    }

    fn create_timing_event(&self) -> Result<Event, GpuError> {
        result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)
            .map(|e| Event(e.cast()))
            .map_err(|e| self.error("cuEventCreate(CU_EVENT_DEFAULT)".into(), e))
    }

    unsafe fn elapsed_ms(&self, start: Event, end: Event) -> Result<f32, GpuError> {
        // SAFETY: timing events of this device whose records completed, per the caller.
        unsafe { result::event::elapsed(raw_event(start), raw_event(end)) }
            .map_err(|e| self.error("cuEventElapsedTime".into(), e))
    }

    unsafe fn destroy_event(&self, event: Event) {
        // SAFETY: per the caller; a failure is unreportable, as in free_device.
        let _ = unsafe { result::event::destroy(raw_event(event)) };
    }

    unsafe fn copy_to_device(
        &self,
        dst: *mut u8,
        src: *const u8,
        bytes: usize,
        stream: Stream,
    ) -> Result<(), GpuError> {
        // cudarc's memcpy_htod_async takes a slice; the raw call takes the pointer as is.
        // SAFETY: ranges valid and `src` pinned, per the caller.
        unsafe {
            sys::cuMemcpyHtoDAsync_v2(device_address(dst), src.cast(), bytes, raw_stream(stream))
        }
        .result()
        .map_err(|e| {
            self.error(
                format!("cuMemcpyHtoDAsync({bytes} bytes, {dst:p} <- {src:p}, stream {stream:?})"),
                e,
            )
        })
    }

    unsafe fn copy_to_host(
        &self,
        dst: *mut u8,
        src: *const u8,
        bytes: usize,
        stream: Stream,
    ) -> Result<(), GpuError> {
        // SAFETY: ranges valid and `dst` pinned, per the caller.
        unsafe {
            sys::cuMemcpyDtoHAsync_v2(dst.cast(), device_address(src), bytes, raw_stream(stream))
        }
        .result()
        .map_err(|e| {
            self.error(
                format!("cuMemcpyDtoHAsync({bytes} bytes, {dst:p} <- {src:p}, stream {stream:?})"),
                e,
            )
        })
    }

    unsafe fn record(&self, event: Event, stream: Stream) -> Result<(), GpuError> {
        // SAFETY: handles from this device, per the caller.
        unsafe { result::event::record(raw_event(event), raw_stream(stream)) }.map_err(|e| {
            self.error(
                format!("cuEventRecord(event {:p}, stream {:p})", event.0, stream.0),
                e,
            )
        })
    }

    unsafe fn wait(&self, stream: Stream, event: Event) -> Result<(), GpuError> {
        // SAFETY: handles from this device, per the caller.
        unsafe {
            result::stream::wait_event(
                raw_stream(stream),
                raw_event(event),
                sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
            )
        }
        .map_err(|e| {
            self.error(
                format!(
                    "cuStreamWaitEvent(stream {:p}, event {:p})",
                    stream.0, event.0
                ),
                e,
            )
        })
    }

    unsafe fn query(&self, event: Event) -> Result<bool, GpuError> {
        // SAFETY: an event from this device, per the caller. A never-recorded event reports
        // success, as the trait promises.
        match unsafe { result::event::query(raw_event(event)) } {
            Ok(()) => Ok(true),
            Err(DriverError(sys::CUresult::CUDA_ERROR_NOT_READY)) => Ok(false),
            Err(e) => Err(self.error(format!("cuEventQuery(event {:p})", event.0), e)),
        }
    }

    unsafe fn call_host(
        &self,
        stream: Stream,
        func: HostFn,
        data: *mut c_void,
    ) -> Result<(), GpuError> {
        // SAFETY: per the caller: `data` outlives the callback, which never calls the driver
        // (cuLaunchHostFunc forbids CUDA calls in the callback).
        unsafe { result::stream::launch_host_function(raw_stream(stream), func, data) }.map_err(
            |e| {
                self.error(
                    format!("cuLaunchHostFunc(stream {:p}, data {data:p})", stream.0),
                    e,
                )
            },
        )
    }

    unsafe fn enqueue_launch(
        &self,
        stream: Stream,
        request: LaunchRequest,
    ) -> Result<(), LaunchFailure> {
        // A real device runs the kernel library's launch at once: it only enqueues on the raw
        // stream it is given, in the context the caller's thread has bound.
        // SAFETY: the caller keeps the request's targets valid (the trait's contract).
        unsafe { request.run(stream.0) }.map_err(LaunchFailure::Kernel)
    }

    unsafe fn begin_capture(&self, stream: Stream) -> Result<(), GpuError> {
        // SAFETY: a stream of this device, captured by this thread alone (the caller's
        // contract).
        unsafe {
            result::stream::begin_capture(
                raw_stream(stream),
                sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
            )
        }
        .map_err(|e| {
            self.error(
                format!("cuStreamBeginCapture(stream {:p}, THREAD_LOCAL)", stream.0),
                e,
            )
        })
    }

    unsafe fn end_capture(&self, stream: Stream) -> Result<GraphExec, GpuError> {
        // SAFETY: a capturing stream of this device (the caller's contract); the capture ends
        // whatever this returns.
        let graph = unsafe { result::stream::end_capture(raw_stream(stream)) }
            .map_err(|e| self.error(format!("cuStreamEndCapture(stream {:p})", stream.0), e))?;
        // SAFETY: `graph` is the template the capture just made, owned here.
        let exec = unsafe { result::graph::instantiate(graph, sys::CUgraphInstantiate_flags(0)) };
        // SAFETY: the executable graph, if any, no longer needs its template, which nothing
        // else holds; a failure to destroy it is unreportable and leaks only the template.
        let _ = unsafe { result::graph::destroy(graph) };
        exec.map(|e| GraphExec(e.cast()))
            .map_err(|e| self.error("cuGraphInstantiateWithFlags(flags 0)".into(), e))
    }

    unsafe fn launch_graph(&self, graph: GraphExec, stream: Stream) -> Result<(), GpuError> {
        // SAFETY: a live executable graph and a stream of this device, and everything the
        // graph's work points at valid until it has run (the caller's contract).
        unsafe { result::graph::launch(raw_graph(graph), raw_stream(stream)) }.map_err(|e| {
            self.error(
                format!("cuGraphLaunch(graph {:p}, stream {:p})", graph.0, stream.0),
                e,
            )
        })
    }

    unsafe fn destroy_graph(&self, graph: GraphExec) {
        // SAFETY: per the caller. Launches still queued run to their end before the driver
        // frees the graph; a failure is unreportable, as in free_device.
        let _ = unsafe { result::graph::exec_destroy(raw_graph(graph)) };
    }

    fn check(&self) -> Result<(), GpuError> {
        self.bind_thread()?;
        // Querying the legacy default stream, which this runtime never uses, costs nothing and
        // returns the context's sticky error if a kernel has faulted; "not ready" only means
        // some other work of the process is running there.
        // SAFETY: the null stream is valid in any current context.
        match unsafe { sys::cuStreamQuery(ptr::null_mut()) }.result() {
            Ok(()) | Err(DriverError(sys::CUresult::CUDA_ERROR_NOT_READY)) => Ok(()),
            Err(e) => Err(self.error("cuStreamQuery(default stream)".into(), e)),
        }
    }

    unsafe fn synchronize(&self, stream: Stream) -> Result<(), GpuError> {
        // SAFETY: a stream from this device, per the caller.
        unsafe { result::stream::synchronize(raw_stream(stream)) }
            .map_err(|e| self.error(format!("cuStreamSynchronize(stream {:p})", stream.0), e))
    }
}

// ---------------------------------------------------------------------------------------------
// CudaProvider
// ---------------------------------------------------------------------------------------------

/// GPUs from the machine's CUDA driver. Opens each ordinal at most once and hands out the same
/// device afterwards, so every plan in the process shares one primary context per device.
/// Failed opens are not remembered: a later call tries again and reports afresh.
#[derive(Debug, Default)]
pub struct CudaProvider {
    opened: Mutex<BTreeMap<u32, Arc<dyn Gpu>>>,
}

impl CudaProvider {
    /// A provider with no device opened yet. Prefer [`global`](Self::global): two providers
    /// each hold their own reference on a device's (shared) primary context.
    pub fn new() -> Self {
        Self::default()
    }

    /// The process-wide provider. Devices it opens stay open for the life of the process.
    pub fn global() -> &'static CudaProvider {
        static GLOBAL: OnceLock<CudaProvider> = OnceLock::new();
        GLOBAL.get_or_init(CudaProvider::new)
    }
}

impl GpuProvider for CudaProvider {
    fn open(&self, ordinal: u32) -> Result<Arc<dyn Gpu>, GpuError> {
        // A panic elsewhere while holding the lock cannot leave the map half-updated (insert
        // is the only mutation), so a poisoned lock is still sound to use.
        let mut opened = self.opened.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(gpu) = opened.get(&ordinal) {
            return Ok(Arc::clone(gpu));
        }
        // Opening under the lock: two threads asking for one device get one CudaGpu.
        let gpu: Arc<dyn Gpu> = CudaGpu::open(ordinal)?;
        opened.insert(ordinal, Arc::clone(&gpu));
        Ok(gpu)
    }
}

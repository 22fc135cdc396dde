//! The CUDA layer: the one place in the runtime that calls the GPU driver.
//!
//! Everything the runtime asks of a GPU goes through the [`Gpu`] trait, a deliberately small
//! seam: allocate device and pinned host memory, create streams and events, enqueue copies,
//! event records, stream waits and host callbacks, enqueue a kernel library's launch, and
//! capture what a stream is given into a graph that one call launches again.
//! Two implementations sit behind it:
//!
//! - [`driver`]: a real CUDA device through cudarc's driver API, loaded at run time (one
//!   binary runs with and without CUDA). `kplace_report::probe` looks for the driver and its
//!   devices without ever panicking, for `kplace devices` and the telemetry.
//! - [`sim`]: a simulated device for machines without a GPU. Its "device memory" is host
//!   memory and each stream is a thread that executes its operations in order, honouring
//!   event waits; so the planner's transfers and the executor's fences run, and are tested,
//!   exactly as on a GPU, including real concurrency between streams and the host.
//!
//! # What the seam guarantees
//! - Every enqueueing call returns without waiting for GPU work (the simulated device may
//!   wait for a stream to reach a launch before running it, which a real driver never does).
//! - Operations on one stream execute in the order they were enqueued; an event completes
//!   once every operation enqueued on its stream before the record has executed; a stream
//!   wait orders everything enqueued after it behind the event's latest record at the time of
//!   the wait.
//! - A host callback runs once, after everything enqueued on its stream before it, on a
//!   thread of the driver's; it must not call the [`Gpu`] and must return quickly.
//! - While a stream captures ([`Gpu::begin_capture`]), copies, host callbacks and kernel-library
//!   launches enqueued on it are recorded, not run; the graph [`Gpu::end_capture`] makes of them
//!   runs, each time [`Gpu::launch_graph`] enqueues it, exactly as that work would have run had
//!   it been enqueued there again: in the order captured, after everything enqueued on the
//!   stream before the launch, with the same addresses. Event records and stream waits are not
//!   captured (the runtime orders a graph by its stream alone).
//!
//! The seam's handles are raw and `Copy`, as with the driver API itself; [`owned`] is the safe
//! layer over them: a stream, an event and a block of memory, each released on drop.

pub mod bus;
pub mod driver;
pub mod owned;
pub mod probe;
pub mod sim;

use std::ffi::c_void;
use std::fmt;
use std::sync::Arc;

use kplace_abi::{Tensor, Tile};

use crate::plugin::{CarryArgs, KernelState, LaunchError};

/// A stream: a CUstream on a real device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stream(pub *mut c_void);

/// An event, created with timing disabled: a CUevent on a real device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event(pub *mut c_void);

// SAFETY: stream and event handles are opaque values the driver lets any thread use.
unsafe impl Send for Stream {}
// SAFETY: as above; a handle is a value, never mutated through a shared reference.
unsafe impl Sync for Stream {}
// SAFETY: as for Stream.
unsafe impl Send for Event {}
// SAFETY: as for Stream.
unsafe impl Sync for Event {}

/// An executable graph, instantiated from a stream's capture: a CUgraphExec on a real device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GraphExec(pub *mut c_void);

// SAFETY: as for Stream: an opaque handle the driver lets any thread launch.
unsafe impl Send for GraphExec {}
// SAFETY: as for Stream.
unsafe impl Sync for GraphExec {}

/// A host callback: called once with its data pointer, on a driver thread.
pub type HostFn = unsafe extern "C" fn(data: *mut c_void);

/// A failed driver call, naming the call and the driver's error.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{device}: {call} failed: {reason}")]
pub struct GpuError {
    /// The device, e.g. `gpu:0`, or `cuda` before one is chosen.
    pub device: String,
    /// The operation, e.g. `cuMemAlloc(8388608 bytes)`.
    pub call: String,
    /// The driver's error name and text, or why the device cannot be used.
    pub reason: String,
}

impl GpuError {
    /// An error of `call` on `device` for `reason`.
    pub fn new(
        device: impl Into<String>,
        call: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        GpuError {
            device: device.into(),
            call: call.into(),
            reason: reason.into(),
        }
    }
}

/// Everything the runtime asks of one GPU. See the [module docs](self) for the ordering
/// guarantees every implementation keeps.
///
/// Pointers to device memory are device addresses carried as `*mut u8`, as kernels receive
/// them through the C ABI; they must never be dereferenced on the host (except on the
/// simulated device, whose device memory is host memory).
pub trait Gpu: Send + Sync + fmt::Debug {
    /// The device's ordinal.
    fn ordinal(&self) -> u32;

    /// The device's name, e.g. `NVIDIA H200`.
    fn name(&self) -> &str;

    /// The device's memory in bytes, when known: the planner refuses pools that exceed it.
    /// `None` (the default) skips that check.
    fn total_memory(&self) -> Option<u64> {
        None
    }

    /// Makes the device's primary context current on the calling thread; required before any
    /// other call, and before a kernel library's create or launch, on every thread.
    fn bind_thread(&self) -> Result<(), GpuError>;

    /// Allocates `bytes` of device memory.
    fn alloc_device(&self, bytes: usize) -> Result<*mut u8, GpuError>;

    /// Frees memory from [`alloc_device`](Self::alloc_device).
    ///
    /// # Safety
    /// `ptr` came from `alloc_device` on this device and no queued work uses it.
    unsafe fn free_device(&self, ptr: *mut u8);

    /// Allocates `bytes` of page-locked host memory, never write-combined (the CPU reads it).
    fn alloc_pinned(&self, bytes: usize) -> Result<*mut u8, GpuError>;

    /// Frees memory from [`alloc_pinned`](Self::alloc_pinned).
    ///
    /// # Safety
    /// `ptr` came from `alloc_pinned` on this device and no queued work uses it.
    unsafe fn free_pinned(&self, ptr: *mut u8);

    /// Creates a non-blocking stream with `priority` (lower is more urgent, CUDA's
    /// convention; clamped to the device's range).
    fn create_stream(&self, priority: i32) -> Result<Stream, GpuError>;

    /// Destroys a stream once its work has drained.
    ///
    /// # Safety
    /// `stream` came from this device and is not used again.
    unsafe fn destroy_stream(&self, stream: Stream);

    /// Creates an event with timing disabled.
    fn create_event(&self) -> Result<Event, GpuError>;

    /// Creates an event that records when it completes, for profiling only: timing events
    /// cost more than fences, so a run creates them only when asked to profile.
    fn create_timing_event(&self) -> Result<Event, GpuError>;

    /// Milliseconds between two completed records of timing events on this device.
    ///
    /// # Safety
    /// Both came from [`create_timing_event`](Self::create_timing_event) on this device and
    /// their latest records have completed.
    unsafe fn elapsed_ms(&self, start: Event, end: Event) -> Result<f32, GpuError>;

    /// Destroys an event.
    ///
    /// # Safety
    /// `event` came from this device and is not used again.
    unsafe fn destroy_event(&self, event: Event);

    /// Enqueues a copy of `bytes` from pinned host memory to device memory.
    ///
    /// # Safety
    /// Both ranges are valid for `bytes` until the copy has executed, `src` being pinned.
    unsafe fn copy_to_device(
        &self,
        dst: *mut u8,
        src: *const u8,
        bytes: usize,
        stream: Stream,
    ) -> Result<(), GpuError>;

    /// Enqueues a copy of `bytes` from device memory to pinned host memory.
    ///
    /// # Safety
    /// Both ranges are valid for `bytes` until the copy has executed, `dst` being pinned.
    unsafe fn copy_to_host(
        &self,
        dst: *mut u8,
        src: *const u8,
        bytes: usize,
        stream: Stream,
    ) -> Result<(), GpuError>;

    /// Enqueues a record of `event`: it completes after everything enqueued before it.
    ///
    /// # Safety
    /// Both handles came from this device.
    unsafe fn record(&self, event: Event, stream: Stream) -> Result<(), GpuError>;

    /// Makes work enqueued on `stream` after this call wait for `event`'s latest record.
    ///
    /// # Safety
    /// Both handles came from this device.
    unsafe fn wait(&self, stream: Stream, event: Event) -> Result<(), GpuError>;

    /// Whether `event`'s latest record has completed (true for a never-recorded event).
    ///
    /// # Safety
    /// `event` came from this device.
    unsafe fn query(&self, event: Event) -> Result<bool, GpuError>;

    /// Enqueues `func(data)` to run on a driver thread once the stream reaches it.
    ///
    /// # Safety
    /// `data` stays valid until the callback has run; the callback never calls this trait.
    unsafe fn call_host(
        &self,
        stream: Stream,
        func: HostFn,
        data: *mut c_void,
    ) -> Result<(), GpuError>;

    /// Enqueues a kernel library's launch on `stream`. A real device calls the kernel at once
    /// (it enqueues its own work on the raw stream); the simulated device calls it from the
    /// stream when the stream reaches it, since its "kernels" compute on the host.
    ///
    /// # Safety
    /// Everything the request points at stays valid until the stream has executed it.
    unsafe fn enqueue_launch(
        &self,
        stream: Stream,
        request: LaunchRequest,
    ) -> Result<(), LaunchFailure>;

    /// Starts capturing `stream`: until [`end_capture`](Self::end_capture), the copies, host
    /// callbacks and kernel-library launches enqueued on it are recorded into a graph instead of
    /// run (a kernel library's own enqueues on the stream included). Event records, stream
    /// waits and synchronizing the stream are refused meanwhile. Only the calling thread's
    /// calls are restricted (CUDA's thread-local capture mode): other threads go on using the
    /// device.
    ///
    /// # Safety
    /// `stream` came from this device, and nothing but the capturing thread enqueues on it
    /// until the capture ends.
    unsafe fn begin_capture(&self, stream: Stream) -> Result<(), GpuError>;

    /// Ends `stream`'s capture and instantiates what it recorded as an executable graph; the
    /// stream runs what it is given again. The capture ends even when this fails.
    ///
    /// # Safety
    /// `stream` came from this device and is capturing.
    unsafe fn end_capture(&self, stream: Stream) -> Result<GraphExec, GpuError>;

    /// Enqueues `graph` on `stream` in one call: its work runs after everything enqueued on
    /// `stream` before, in the order it was captured, as if enqueued there again; launches of
    /// one graph never overlap.
    ///
    /// # Safety
    /// `graph` came from this device's [`end_capture`](Self::end_capture) and is not
    /// destroyed; everything its work points at stays valid until it has run (the seam's
    /// contract for each operation captured).
    unsafe fn launch_graph(&self, graph: GraphExec, stream: Stream) -> Result<(), GpuError>;

    /// Destroys a graph; launches of it already enqueued still run.
    ///
    /// # Safety
    /// `graph` came from this device and is not used again.
    unsafe fn destroy_graph(&self, graph: GraphExec);

    /// The device's sticky error, if work already enqueued has failed (a faulting kernel);
    /// never waits. After such an error no further work of the device completes, and host
    /// callbacks enqueued after it never run, so the executor polls this while it waits.
    fn check(&self) -> Result<(), GpuError>;

    /// Blocks until `stream` has executed everything enqueued on it. Never on the hot path:
    /// only before a run's first frame (the constants' upload) and at its end, before its
    /// buffers are freed.
    ///
    /// # Safety
    /// `stream` came from this device.
    unsafe fn synchronize(&self, stream: Stream) -> Result<(), GpuError>;
}

/// One kernel launch, by address: the kernel state, its tensors and workspace all live in a
/// frame slot that outlives the stream's work, so a device may run the launch later.
#[derive(Clone, Copy, Debug)]
pub struct LaunchRequest {
    state: *const KernelState,
    inputs: *const [Tensor],
    outputs: *const [Tensor],
    workspace: (*mut c_void, u64),
    tile: Tile,
    /// A stateful kernel's carry, in device memory like its tensors.
    carry: Option<CarryArgs>,
}

// SAFETY: a request is a set of addresses whose validity its maker guarantees (see `new`).
unsafe impl Send for LaunchRequest {}

impl LaunchRequest {
    /// A launch of `state` on `tile`.
    ///
    /// # Safety
    /// Everything referenced stays valid, and is not otherwise written, until the launch has
    /// run; the workspace holds `workspace.1` bytes in the kernel's memory.
    pub unsafe fn new(
        state: &KernelState,
        inputs: &[Tensor],
        outputs: &[Tensor],
        workspace: (*mut c_void, u64),
        tile: Tile,
    ) -> LaunchRequest {
        LaunchRequest {
            state,
            inputs,
            outputs,
            workspace,
            tile,
            carry: None,
        }
    }

    /// The request with a stateful kernel's carry.
    ///
    /// # Safety
    /// As for [`LaunchRequest::new`]: the carry stays valid until the launch has run, and no
    /// other launch uses it meanwhile.
    pub unsafe fn with_carry(self, carry: Option<CarryArgs>) -> LaunchRequest {
        LaunchRequest { carry, ..self }
    }

    /// The tile launched.
    pub fn tile(&self) -> Tile {
        self.tile
    }

    /// The logical name of the kernel launched (`radar.range_fft`).
    ///
    /// # Safety
    /// The guarantees given to [`LaunchRequest::new`] still hold.
    pub unsafe fn kernel_name(&self) -> &str {
        // SAFETY: per `new`'s contract, the state outlives the request's execution.
        unsafe { &(*self.state).info().name }
    }

    /// Calls the kernel's launch with `stream`.
    ///
    /// # Safety
    /// The guarantees given to [`LaunchRequest::new`] still hold.
    pub unsafe fn run(&self, stream: *mut c_void) -> Result<(), LaunchError> {
        // SAFETY: per `new`'s contract.
        unsafe {
            (*self.state).launch_with(
                &*self.inputs,
                &*self.outputs,
                self.workspace,
                stream,
                self.tile,
                self.carry.as_ref(),
            )
        }
    }
}

/// Why [`Gpu::enqueue_launch`] failed: the kernel's own error, or the device's.
#[derive(Debug, thiserror::Error)]
pub enum LaunchFailure {
    /// The kernel refused or failed to enqueue.
    #[error(transparent)]
    Kernel(#[from] LaunchError),
    /// The device failed around it.
    #[error(transparent)]
    Device(#[from] GpuError),
}

/// Where a plan gets its GPUs: the machine's CUDA driver, or a simulated device in tests.
pub trait GpuProvider: Sync {
    /// Opens device `ordinal`, or says why it cannot be used (no driver, no such device, ...).
    fn open(&self, ordinal: u32) -> Result<Arc<dyn Gpu>, GpuError>;
}

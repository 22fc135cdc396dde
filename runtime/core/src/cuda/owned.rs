//! Owned GPU handles: a stream, an event, a block of pinned or device memory, an executable
//! graph, each freed when dropped; and a stream's capture, ended when dropped.
//!
//! The [`Gpu`] seam hands out raw `Copy` handles, as the driver API does; these types are the
//! safe layer over it, in the way cudarc's safe layer sits over its `result` layer. Each owns
//! one handle and the device it came from, and its `Drop` holds the only call that releases
//! it, so code that builds many of them (a frame slot, a pool, a co-tenant) is `?` all the way
//! down: whatever was made before an error is released by the error's unwinding of the stack.
//!
//! # What dropping guarantees
//! - A stream, an event or a graph may be dropped at any time: the driver lets queued work
//!   that names it finish before releasing it.
//! - A [`Capture`] dropped before [`Capture::end`] (an error part-way through capturing) ends
//!   the capture and destroys what it recorded, so its stream runs what it is given again.
//! - Memory is freed at once. Work enqueued on it was enqueued through an `unsafe` [`Gpu`] call
//!   whose contract is that the memory outlives the work, so its owner drains the streams that
//!   use it before dropping it (the executor does, before it drops slots and pools).
//! - A release that fails cannot be reported from `Drop`; it means the context is already
//!   broken, which the next enqueuing call reports.

use std::sync::Arc;

use super::{Event, Gpu, GpuError, GraphExec, Stream};

/// A stream, destroyed on drop.
#[derive(Debug)]
pub struct OwnedStream {
    gpu: Arc<dyn Gpu>,
    raw: Stream,
}

impl OwnedStream {
    /// Creates a non-blocking stream on `gpu` with `priority` (see [`Gpu::create_stream`]).
    pub fn new(gpu: &Arc<dyn Gpu>, priority: i32) -> Result<OwnedStream, GpuError> {
        let raw = gpu.create_stream(priority)?;
        Ok(OwnedStream {
            gpu: Arc::clone(gpu),
            raw,
        })
    }

    /// The raw handle, valid while `self` lives.
    pub fn raw(&self) -> Stream {
        self.raw
    }
}

impl Drop for OwnedStream {
    fn drop(&mut self) {
        // SAFETY: made by create_stream on this device and owned here alone; the driver lets
        // queued work finish before it releases the stream.
        unsafe { self.gpu.destroy_stream(self.raw) };
    }
}

/// An event, destroyed on drop.
#[derive(Debug)]
pub struct OwnedEvent {
    gpu: Arc<dyn Gpu>,
    raw: Event,
}

impl OwnedEvent {
    /// Creates an event with timing disabled: a fence.
    pub fn fence(gpu: &Arc<dyn Gpu>) -> Result<OwnedEvent, GpuError> {
        OwnedEvent::own(gpu, gpu.create_event()?)
    }

    /// Creates a timing event, for profiling (see [`Gpu::create_timing_event`]).
    pub fn timing(gpu: &Arc<dyn Gpu>) -> Result<OwnedEvent, GpuError> {
        OwnedEvent::own(gpu, gpu.create_timing_event()?)
    }

    fn own(gpu: &Arc<dyn Gpu>, raw: Event) -> Result<OwnedEvent, GpuError> {
        Ok(OwnedEvent {
            gpu: Arc::clone(gpu),
            raw,
        })
    }

    /// The raw handle, valid while `self` lives.
    pub fn raw(&self) -> Event {
        self.raw
    }
}

impl Drop for OwnedEvent {
    fn drop(&mut self) {
        // SAFETY: made by create_event or create_timing_event on this device and owned here
        // alone; the driver releases an event whose record is still queued once it completes.
        unsafe { self.gpu.destroy_event(self.raw) };
    }
}

/// An executable graph, destroyed on drop.
#[derive(Debug)]
pub struct OwnedGraph {
    gpu: Arc<dyn Gpu>,
    raw: GraphExec,
}

impl OwnedGraph {
    /// The raw handle, valid while `self` lives.
    pub fn raw(&self) -> GraphExec {
        self.raw
    }
}

impl Drop for OwnedGraph {
    fn drop(&mut self) {
        // SAFETY: made by end_capture on this device and owned here alone; launches still
        // queued run before the driver frees it.
        unsafe { self.gpu.destroy_graph(self.raw) };
    }
}

/// A stream capturing: what is enqueued on it is recorded, not run, until [`Capture::end`]
/// makes a graph of it (see [`Gpu::begin_capture`]).
#[derive(Debug)]
pub struct Capture<'a> {
    gpu: &'a Arc<dyn Gpu>,
    stream: Stream,
    open: bool,
}

impl<'a> Capture<'a> {
    /// Starts capturing `stream` on `gpu`, with the device bound to the calling thread first.
    ///
    /// # Safety
    /// `stream` came from `gpu`, outlives the capture, and nothing but this thread enqueues on
    /// it until the capture ends ([`Capture::end`] or drop).
    pub unsafe fn begin(gpu: &'a Arc<dyn Gpu>, stream: Stream) -> Result<Capture<'a>, GpuError> {
        gpu.bind_thread()?;
        // SAFETY: per this function's contract.
        unsafe { gpu.begin_capture(stream) }?;
        Ok(Capture {
            gpu,
            stream,
            open: true,
        })
    }

    /// The stream captured.
    pub fn stream(&self) -> Stream {
        self.stream
    }

    /// Ends the capture and instantiates what it recorded.
    pub fn end(mut self) -> Result<OwnedGraph, GpuError> {
        self.open = false;
        // SAFETY: the stream is capturing since `begin` (`open` was set), on this device.
        let raw = unsafe { self.gpu.end_capture(self.stream) }?;
        Ok(OwnedGraph {
            gpu: Arc::clone(self.gpu),
            raw,
        })
    }
}

impl Drop for Capture<'_> {
    fn drop(&mut self) {
        if !self.open {
            return;
        }
        // SAFETY: the stream is capturing since `begin`, on this device; the graph made of
        // an abandoned capture is destroyed at once, never launched. A failure means the
        // capture was already invalidated, and the stream is released from it all the same.
        if let Ok(raw) = unsafe { self.gpu.end_capture(self.stream) } {
            // SAFETY: just made, never launched, owned here alone.
            unsafe { self.gpu.destroy_graph(raw) };
        }
    }
}

/// Which allocator a [`GpuMemory`] came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryKind {
    /// Page-locked host memory ([`Gpu::alloc_pinned`]): the host may read and write it.
    Pinned,
    /// Device memory ([`Gpu::alloc_device`]): an address never dereferenced on the host.
    Device,
}

/// A block of pinned host or device memory, freed on drop.
#[derive(Debug)]
pub struct GpuMemory {
    gpu: Arc<dyn Gpu>,
    kind: MemoryKind,
    ptr: *mut u8,
    bytes: usize,
}

// SAFETY: the block is owned here alone; its address is a value any thread may pass to the
// driver, and who touches which bytes is the owner's business, as for a `Vec`'s buffer.
unsafe impl Send for GpuMemory {}
// SAFETY: through `&GpuMemory` only the address and size are read.
unsafe impl Sync for GpuMemory {}

impl GpuMemory {
    /// Allocates `bytes` of `kind` memory on `gpu`, with the device bound to the calling
    /// thread first. Pinned memory is zeroed, so its first contents are defined; device memory
    /// is not.
    pub fn new(gpu: &Arc<dyn Gpu>, kind: MemoryKind, bytes: usize) -> Result<GpuMemory, GpuError> {
        gpu.bind_thread()?;
        let ptr = match kind {
            MemoryKind::Pinned => gpu.alloc_pinned(bytes)?,
            MemoryKind::Device => gpu.alloc_device(bytes)?,
        };
        if kind == MemoryKind::Pinned {
            // SAFETY: alloc_pinned returned `bytes` of host memory this thread may write.
            unsafe { std::ptr::write_bytes(ptr, 0, bytes) };
        }
        Ok(GpuMemory {
            gpu: Arc::clone(gpu),
            kind,
            ptr,
            bytes,
        })
    }

    /// The block's address: a host address for pinned memory, a device address otherwise.
    /// Valid while `self` lives.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// The block's size in bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Which allocator it came from.
    pub fn kind(&self) -> MemoryKind {
        self.kind
    }

    /// The device it belongs to.
    pub fn gpu(&self) -> &Arc<dyn Gpu> {
        &self.gpu
    }
}

impl Drop for GpuMemory {
    fn drop(&mut self) {
        if self.gpu.bind_thread().is_err() {
            // Without the context the memory cannot be freed; it goes with the process.
            return;
        }
        // SAFETY: allocated by this kind's allocator on this device and owned here alone; work
        // that used it was enqueued under the contract that the memory outlives it (module
        // docs), so none is queued now.
        unsafe {
            match self.kind {
                MemoryKind::Pinned => self.gpu.free_pinned(self.ptr),
                MemoryKind::Device => self.gpu.free_device(self.ptr),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::sim::SimGpu;

    #[test]
    fn handles_release_what_they_made_when_dropped() {
        let sim = SimGpu::new(0);
        let gpu: Arc<dyn Gpu> = sim.clone();
        {
            let _stream = OwnedStream::new(&gpu, 0).unwrap();
            let _fence = OwnedEvent::fence(&gpu).unwrap();
            let _timing = OwnedEvent::timing(&gpu).unwrap();
            let pinned = GpuMemory::new(&gpu, MemoryKind::Pinned, 256).unwrap();
            let device = GpuMemory::new(&gpu, MemoryKind::Device, 256).unwrap();
            assert_eq!((pinned.bytes(), device.bytes()), (256, 256));
            assert_eq!(
                (pinned.kind(), device.kind()),
                (MemoryKind::Pinned, MemoryKind::Device)
            );
            // SAFETY: pinned memory is 256 bytes of host memory, zeroed by new.
            let first = unsafe { std::slice::from_raw_parts(pinned.ptr(), 256) };
            assert!(first.iter().all(|&b| b == 0));
            assert_eq!(sim.live_handles(), 5);
        }
        assert_eq!(sim.live_handles(), 0, "every handle is released on drop");
        assert_eq!(sim.allocated_bytes(), 0);
    }

    #[test]
    fn a_refused_handle_leaves_the_others_to_their_owner() {
        let sim = SimGpu::new(0);
        let gpu: Arc<dyn Gpu> = sim.clone();
        sim.limit_handles(2);
        let made: Result<Vec<OwnedEvent>, GpuError> =
            (0..3).map(|_| OwnedEvent::fence(&gpu)).collect();
        let err = made.unwrap_err();
        assert!(err.to_string().contains("out of resources"), "{err}");
        assert_eq!(
            sim.live_handles(),
            0,
            "the two made before the refusal were released"
        );
    }
}

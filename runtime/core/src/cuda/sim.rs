//! A simulated GPU: the [`Gpu`] seam implemented on the host, for machines without a GPU.
//!
//! It exists so that everything the runtime does around GPU stages (the planner's mirrors and
//! transfers, the executor's streams, event fences, stream waits, host callbacks and slot
//! release) runs and is tested on any machine, with the real concurrency of a GPU:
//!
//! - "Device memory" and "pinned memory" are host allocations, tracked by range, so a copy
//!   from pageable memory, or into memory of the wrong kind, is an error as it would be a bug.
//! - Each stream is a thread executing its operations in order. An event completes when its
//!   record executes; a stream wait blocks that stream's thread until the event's record
//!   (the latest when the wait was enqueued) has executed; host callbacks run on the stream's
//!   thread, as CUDA runs them on a driver thread.
//! - A kernel library's launch runs on the stream's thread when the stream reaches it, so a
//!   simulated "CUDA kernel" may simply compute on the host with the pointers it is given,
//!   and runs asynchronously to the thread that enqueued it, as on a GPU. A launch that fails
//!   there is the device's sticky error, as a faulting kernel is on a GPU: the stream executes
//!   nothing more (host callbacks included, as `cuLaunchHostFunc` documents), every later
//!   call fails with it, and [`Gpu::check`] reports it.
//! - An optional delay before every operation ([`SimGpu::with_delay`]) makes the GPU slow
//!   relative to the host, so a missing fence shows up as wrong data rather than luck.
//! - An optional timing model ([`SimTiming`], [`SimGpu::with_timing`]) makes the device take
//!   the time a GPU would: each kernel launch a time by kernel name and tile size, each copy
//!   its bytes over a bus rate per direction, each enqueued launch a host cost, every kernel
//!   slowed by a co-tenant's share. Kernels then run one at a time on the device (one compute
//!   engine, as kernels that fill a GPU do) and copies one at a time per direction (a copy
//!   engine each way), beside the kernels. `kplace tune` is tested on it.
//! - On a timed device each stream keeps its own clock, which advances only by the modeled
//!   time of the copies and kernels it runs, and an event's time is its stream's clock when
//!   the record executes. So [`Gpu::elapsed_ms`] between two events of one stream is exactly
//!   the modeled time of the work between them, however loaded the host is: what a profile
//!   of a stage or a bus measurement reads is deterministic (the work still takes that long
//!   in real time too, so pipelines keep their pace). Waiting for an engine or an event is
//!   not counted, and two streams' clocks are not comparable. A launch's host cost is spent
//!   computing, as a driver's is, not sleeping. An untimed device's events read the host's
//!   clock.
//! - A stream may capture ([`Gpu::begin_capture`]): its copies, host callbacks and launches are
//!   then kept as a graph's operations instead of sent to its thread, and each
//!   [`Gpu::launch_graph`] sends the whole graph to a stream in one operation, which the
//!   stream's thread executes operation by operation exactly as it executes those operations
//!   enqueued one by one (the delay before each, the timing model, the sticky error). Records,
//!   waits and synchronizing a capturing stream are refused, as the runtime never captures
//!   them. One difference from a real device: a kernel library's launch is called when the
//!   graph's stream reaches it, every time, where a real device calls it once, at capture, and
//!   replays what it enqueued; a library that a capture cannot record (one enqueueing
//!   elsewhere than on its stream) therefore passes here.
//! - [`SimGpu::stats`] counts what was enqueued (copies and their bytes, records, waits,
//!   callbacks, launches, allocations, events), so tests can assert which bytes crossed the
//!   "bus" and that a frame costs no allocation; work a graph launch enqueues is counted as it
//!   is enqueued, operation by operation, and every call that enqueues work to run (a graph
//!   launch once) is a driver call, so tests can assert what a frame costs the host; calls a
//!   capture records are counted apart.
//! - [`SimGpu::live_handles`] counts the streams, events and allocations alive, and
//!   [`SimGpu::limit_handles`] refuses new ones past a limit, as a device out of resources
//!   does; so a builder's error paths are tested to release everything they made.

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam::channel::{self, Sender};

use super::{
    Event, Gpu, GpuError, GpuProvider, GraphExec, HostFn, LaunchFailure, LaunchRequest, Stream,
};

mod stats;
mod stream;
mod timing;

pub use stats::SimStats;
use stats::{Counters, bump};
use stream::{Addr, Op, SimEvent, SimGraph, SimStream, run_stream};
use timing::{Engines, finish_at, spin_for};
pub use timing::{KernelTime, SimTiming};

/// Alignment of simulated allocations (cuMemAlloc gives at least 256).
const ALIGN: usize = 256;

/// Which allocator a simulated range came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Device,
    Pinned,
}

/// A simulated GPU. Cheap to share: clones of the `Arc` see the same memory and streams.
#[derive(Debug)]
pub struct SimGpu {
    ordinal: u32,
    name: String,
    delay: Duration,
    /// The timing model, and the engines its work holds; `None`: work takes no modeled time.
    timing: Option<(Arc<SimTiming>, Arc<Engines>)>,
    /// Live allocations: start address -> (bytes, kind).
    allocations: Mutex<BTreeMap<usize, (usize, Kind)>>,
    counters: Counters,
    /// The most streams, events and allocations alive at once; creating one more fails, as a
    /// device out of resources does ([`SimGpu::limit_handles`]).
    handle_limit: AtomicUsize,
    /// The first launch failure, after which the device does nothing more.
    sticky: Arc<Mutex<Option<GpuError>>>,
    /// Where an untimed device's clock starts.
    epoch: Instant,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic on a stream thread is a test failure reported elsewhere; the data stays usable.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl SimGpu {
    /// A simulated device `ordinal` whose operations run as soon as their stream reaches them.
    pub fn new(ordinal: u32) -> Arc<SimGpu> {
        SimGpu::with_delay(ordinal, Duration::ZERO)
    }

    /// A simulated device that sleeps `delay` before every stream operation.
    pub fn with_delay(ordinal: u32, delay: Duration) -> Arc<SimGpu> {
        SimGpu::build(ordinal, delay, None)
    }

    /// A simulated device whose work takes the times `timing` models.
    pub fn with_timing(ordinal: u32, timing: SimTiming) -> Arc<SimGpu> {
        SimGpu::build(
            ordinal,
            Duration::ZERO,
            Some((Arc::new(timing), Arc::new(Engines::default()))),
        )
    }

    fn build(
        ordinal: u32,
        delay: Duration,
        timing: Option<(Arc<SimTiming>, Arc<Engines>)>,
    ) -> Arc<SimGpu> {
        Arc::new(SimGpu {
            ordinal,
            name: format!("simulated GPU {ordinal}"),
            delay,
            timing,
            allocations: Mutex::new(BTreeMap::new()),
            counters: Counters::default(),
            handle_limit: AtomicUsize::new(usize::MAX),
            sticky: Arc::new(Mutex::new(None)),
            epoch: Instant::now(),
        })
    }

    /// A co-tenant arrives (`factor` > 1) or leaves (1) while the device runs: from the next
    /// kernel on, every kernel takes `factor` times its modeled time (on top of
    /// [`SimTiming::slowdown`]). No effect on an untimed device.
    pub fn set_cotenant(&self, factor: f64) {
        if let Some((_, engines)) = &self.timing {
            let factor = if factor.is_finite() && factor > 0.0 {
                factor
            } else {
                1.0
            };
            engines.cotenant.store(factor.to_bits(), Ordering::Relaxed);
        }
    }

    /// From now on, refuses to create a stream, an event, a graph or an allocation while
    /// `limit` of them are alive: the error paths of whatever builds many of them can then be tested.
    pub fn limit_handles(&self, limit: usize) {
        self.handle_limit.store(limit, Ordering::Relaxed);
    }

    /// Streams, events, graphs and allocations alive now: zero once everything made was
    /// released.
    pub fn live_handles(&self) -> usize {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed) as usize;
        let streams = get(&c.streams) - get(&c.streams_destroyed);
        let events = get(&c.events) - get(&c.events_destroyed);
        let graphs = get(&c.graphs) - get(&c.graphs_destroyed);
        streams + events + graphs + lock(&self.allocations).len()
    }

    /// An error naming the call `what()` when one more handle would exceed the limit.
    fn admit(&self, what: impl FnOnce() -> String) -> Result<(), GpuError> {
        if self.live_handles() >= self.handle_limit.load(Ordering::Relaxed) {
            return Err(self.error(what(), "out of resources (the simulated handle limit)"));
        }
        Ok(())
    }

    /// Bytes currently allocated, device and pinned.
    pub fn allocated_bytes(&self) -> usize {
        lock(&self.allocations).values().map(|&(b, _)| b).sum()
    }

    fn error(&self, call: impl Into<String>, reason: impl Into<String>) -> GpuError {
        GpuError::new(format!("gpu:{}", self.ordinal), call, reason)
    }

    fn alloc(&self, bytes: usize, kind: Kind) -> Result<*mut u8, GpuError> {
        self.admit(|| format!("alloc({bytes})"))?;
        let layout = std::alloc::Layout::from_size_align(bytes.max(1), ALIGN)
            .map_err(|e| self.error(format!("alloc({bytes})"), e.to_string()))?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(self.error(format!("alloc({bytes})"), "out of memory"));
        }
        lock(&self.allocations).insert(ptr as usize, (bytes, kind));
        bump(
            match kind {
                Kind::Device => &self.counters.device_allocations,
                Kind::Pinned => &self.counters.pinned_allocations,
            },
            1,
        );
        Ok(ptr)
    }

    fn free(&self, ptr: *mut u8, kind: Kind) {
        let Some((bytes, found)) = lock(&self.allocations).remove(&(ptr as usize)) else {
            panic!("simulated GPU: free of {ptr:?}, which it did not allocate");
        };
        assert_eq!(
            found, kind,
            "simulated GPU: {ptr:?} freed as the wrong kind"
        );
        let layout = std::alloc::Layout::from_size_align(bytes.max(1), ALIGN)
            .expect("the layout was valid at allocation");
        // SAFETY: allocated in `alloc` with this layout.
        unsafe { std::alloc::dealloc(ptr, layout) };
    }

    /// Checks that `[ptr, ptr + bytes)` lies inside one live allocation of `kind`.
    fn check_range(
        &self,
        ptr: *const u8,
        bytes: usize,
        kind: Kind,
        what: &str,
    ) -> Result<(), GpuError> {
        let start = ptr as usize;
        let allocations = lock(&self.allocations);
        let inside = allocations
            .range(..=start)
            .next_back()
            .is_some_and(|(&base, &(len, k))| k == kind && start + bytes <= base + len);
        if inside {
            Ok(())
        } else {
            Err(self.error(
                format!("copy ({what} {ptr:?}, {bytes} bytes)"),
                format!("not inside a {kind:?} allocation of this device"),
            ))
        }
    }

    fn stream<'a>(&self, stream: Stream) -> &'a SimStream {
        // SAFETY: streams are created by `create_stream` as leaked boxes and live until
        // `destroy_stream`, after which the caller promises not to use them.
        unsafe { &*stream.0.cast::<SimStream>() }
    }

    fn event<'a>(&self, event: Event) -> &'a SimEvent {
        // SAFETY: as for streams.
        unsafe { &*event.0.cast::<SimEvent>() }
    }

    /// The driver's host work for one launch (a kernel library's, or a graph's), spent on the
    /// enqueuing thread when the timing model gives it a cost.
    fn spend_launch_cost(&self) {
        if let Some((timing, _)) = &self.timing
            && !timing.launch_cost.is_zero()
        {
            spin_for(timing.launch_cost);
        }
    }

    /// Whether `stream` is capturing.
    fn capturing(&self, stream: Stream) -> bool {
        lock(&self.stream(stream).capture).is_some()
    }

    /// An error for `call` on a capturing stream, which the simulation does not capture.
    fn refused_in_capture(&self, call: &str) -> GpuError {
        self.error(
            call,
            "the stream is capturing, and a capture records only copies, host callbacks and \
             kernel launches (the runtime orders a graph by its stream alone)",
        )
    }

    /// One driver call enqueueing `op` on `stream`: recorded when it captures, else counted and
    /// sent to the stream's thread.
    fn enqueue(&self, stream: Stream, op: Op) -> Result<(), GpuError> {
        self.check()?;
        let s = self.stream(stream);
        if let Some(captured) = lock(&s.capture).as_mut() {
            bump(&self.counters.captured_calls, 1);
            captured.push(op);
            return Ok(());
        }
        bump(&self.counters.driver_calls, 1);
        self.count_work(&op);
        s.ops
            .send(op)
            .map_err(|_| self.error("enqueue", "the stream's thread has stopped"))
    }
}

impl Gpu for SimGpu {
    fn ordinal(&self) -> u32 {
        self.ordinal
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn bind_thread(&self) -> Result<(), GpuError> {
        Ok(())
    }

    fn alloc_device(&self, bytes: usize) -> Result<*mut u8, GpuError> {
        self.alloc(bytes, Kind::Device)
    }

    unsafe fn free_device(&self, ptr: *mut u8) {
        self.free(ptr, Kind::Device);
    }

    fn alloc_pinned(&self, bytes: usize) -> Result<*mut u8, GpuError> {
        self.alloc(bytes, Kind::Pinned)
    }

    unsafe fn free_pinned(&self, ptr: *mut u8) {
        self.free(ptr, Kind::Pinned);
    }

    fn create_stream(&self, _priority: i32) -> Result<Stream, GpuError> {
        self.admit(|| "create_stream".into())?;
        let (ops, rx) = channel::unbounded();
        let delay = self.delay;
        let timing = self.timing.clone();
        let sticky = Arc::clone(&self.sticky);
        let epoch = self.epoch;
        let device = format!("gpu:{}", self.ordinal);
        let thread = std::thread::Builder::new()
            .name(format!("sim-gpu{}-stream", self.ordinal))
            .spawn(move || run_stream(rx, delay, timing, sticky, device, epoch))
            .map_err(|e| self.error("create_stream", e.to_string()))?;
        bump(&self.counters.streams, 1);
        let stream = Box::new(SimStream {
            ops,
            thread: Some(thread),
            capture: Mutex::new(None),
        });
        Ok(Stream(Box::into_raw(stream).cast()))
    }

    unsafe fn destroy_stream(&self, stream: Stream) {
        // SAFETY: made by `create_stream`, not used again.
        let mut stream = unsafe { Box::from_raw(stream.0.cast::<SimStream>()) };
        let (ops, _) = channel::bounded(0);
        drop(std::mem::replace(&mut stream.ops, ops));
        if let Some(thread) = stream.thread.take() {
            let _ = thread.join();
        }
        bump(&self.counters.streams_destroyed, 1);
    }

    fn create_event(&self) -> Result<Event, GpuError> {
        self.admit(|| "create_event".into())?;
        bump(&self.counters.events, 1);
        Ok(Event(Box::into_raw(Box::<SimEvent>::default()).cast()))
    }

    fn create_timing_event(&self) -> Result<Event, GpuError> {
        self.admit(|| "create_timing_event".into())?;
        bump(&self.counters.timing_events, 1);
        bump(&self.counters.events, 1);
        let event = SimEvent {
            timing: true,
            ..SimEvent::default()
        };
        Ok(Event(Box::into_raw(Box::new(event)).cast()))
    }

    unsafe fn elapsed_ms(&self, start: Event, end: Event) -> Result<f32, GpuError> {
        let stamp = |e: Event| {
            let event = self.event(e);
            event
                .timing
                .then(|| *lock(&event.recorded_at))
                .flatten()
                .ok_or_else(|| {
                    self.error(
                        "elapsed_ms",
                        "not a timing event, or its record has not executed",
                    )
                })
        };
        let (a, b) = (stamp(start)?, stamp(end)?);
        Ok(b.saturating_sub(a).as_secs_f32() * 1e3)
    }

    unsafe fn destroy_event(&self, event: Event) {
        // SAFETY: made by `create_event`, not used again.
        drop(unsafe { Box::from_raw(event.0.cast::<SimEvent>()) });
        bump(&self.counters.events_destroyed, 1);
    }

    unsafe fn copy_to_device(
        &self,
        dst: *mut u8,
        src: *const u8,
        bytes: usize,
        stream: Stream,
    ) -> Result<(), GpuError> {
        self.check_range(src, bytes, Kind::Pinned, "source")?;
        self.check_range(dst, bytes, Kind::Device, "destination")?;
        self.enqueue(
            stream,
            Op::Copy {
                dst: Addr(dst),
                src: Addr(src.cast_mut()),
                bytes,
                upload: true,
            },
        )
    }

    unsafe fn copy_to_host(
        &self,
        dst: *mut u8,
        src: *const u8,
        bytes: usize,
        stream: Stream,
    ) -> Result<(), GpuError> {
        self.check_range(src, bytes, Kind::Device, "source")?;
        self.check_range(dst, bytes, Kind::Pinned, "destination")?;
        self.enqueue(
            stream,
            Op::Copy {
                dst: Addr(dst),
                src: Addr(src.cast_mut()),
                bytes,
                upload: false,
            },
        )
    }

    unsafe fn record(&self, event: Event, stream: Stream) -> Result<(), GpuError> {
        if self.capturing(stream) {
            return Err(self.refused_in_capture("record"));
        }
        let generation = {
            let mut state = lock(&self.event(event).state);
            state.0 += 1;
            state.0
        };
        self.enqueue(
            stream,
            Op::Record {
                event: Addr(event.0.cast()),
                generation,
            },
        )
    }

    unsafe fn wait(&self, stream: Stream, event: Event) -> Result<(), GpuError> {
        if self.capturing(stream) {
            return Err(self.refused_in_capture("wait"));
        }
        let generation = lock(&self.event(event).state).0;
        self.enqueue(
            stream,
            Op::Wait {
                event: Addr(event.0.cast()),
                generation,
            },
        )
    }

    unsafe fn query(&self, event: Event) -> Result<bool, GpuError> {
        let state = lock(&self.event(event).state);
        Ok(state.1 >= state.0)
    }

    unsafe fn call_host(
        &self,
        stream: Stream,
        func: HostFn,
        data: *mut c_void,
    ) -> Result<(), GpuError> {
        self.enqueue(
            stream,
            Op::Host {
                func,
                data: Addr(data.cast()),
            },
        )
    }

    unsafe fn enqueue_launch(
        &self,
        stream: Stream,
        request: LaunchRequest,
    ) -> Result<(), LaunchFailure> {
        self.spend_launch_cost();
        Ok(self.enqueue(stream, Op::Launch(request))?)
    }

    unsafe fn begin_capture(&self, stream: Stream) -> Result<(), GpuError> {
        self.check()?;
        let mut capture = lock(&self.stream(stream).capture);
        if capture.is_some() {
            return Err(self.error("begin_capture", "the stream is capturing already"));
        }
        *capture = Some(Vec::new());
        Ok(())
    }

    unsafe fn end_capture(&self, stream: Stream) -> Result<GraphExec, GpuError> {
        let ops = lock(&self.stream(stream).capture)
            .take()
            .ok_or_else(|| self.error("end_capture", "the stream is not capturing"))?;
        self.admit(|| "end_capture (instantiate)".into())?;
        bump(&self.counters.graphs, 1);
        let graph = Arc::new(SimGraph { ops });
        Ok(GraphExec(Arc::into_raw(graph).cast_mut().cast()))
    }

    unsafe fn launch_graph(&self, graph: GraphExec, stream: Stream) -> Result<(), GpuError> {
        if self.capturing(stream) {
            return Err(self.refused_in_capture("launch_graph"));
        }
        // SAFETY: made by `end_capture` as a leaked Arc, not destroyed (the caller's
        // contract): this takes one more reference for the stream's operation.
        let graph = unsafe {
            let raw = graph.0.cast_const().cast::<SimGraph>();
            Arc::increment_strong_count(raw);
            Arc::from_raw(raw)
        };
        bump(&self.counters.graph_launches, 1);
        // One driver call, whatever the graph holds: its host cost is one launch's.
        self.spend_launch_cost();
        self.enqueue(stream, Op::Graph(graph))
    }

    unsafe fn destroy_graph(&self, graph: GraphExec) {
        // SAFETY: made by `end_capture` as a leaked Arc, not used again; a launch still
        // queued holds its own reference.
        drop(unsafe { Arc::from_raw(graph.0.cast_const().cast::<SimGraph>()) });
        bump(&self.counters.graphs_destroyed, 1);
    }

    fn check(&self) -> Result<(), GpuError> {
        match &*lock(&self.sticky) {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    unsafe fn synchronize(&self, stream: Stream) -> Result<(), GpuError> {
        if self.capturing(stream) {
            return Err(self.refused_in_capture("synchronize"));
        }
        bump(&self.counters.synchronizations, 1);
        let (done, flushed) = channel::bounded(1);
        self.stream(stream)
            .ops
            .send(Op::Flush(done))
            .map_err(|_| self.error("synchronize", "the stream's thread has stopped"))?;
        flushed
            .recv()
            .map_err(|_| self.error("synchronize", "the stream's thread has stopped"))?;
        self.check()
    }
}

/// Hands out simulated GPUs: `devices` of them, each opened once.
#[derive(Debug)]
pub struct SimProvider {
    devices: Vec<Arc<SimGpu>>,
}

impl SimProvider {
    /// `count` simulated devices, operations running as soon as their stream reaches them.
    pub fn new(count: u32) -> SimProvider {
        SimProvider::with_delay(count, Duration::ZERO)
    }

    /// `count` simulated devices sleeping `delay` before every stream operation.
    pub fn with_delay(count: u32, delay: Duration) -> SimProvider {
        SimProvider {
            devices: (0..count).map(|n| SimGpu::with_delay(n, delay)).collect(),
        }
    }

    /// `count` simulated devices whose work takes the times `timing` models.
    pub fn with_timing(count: u32, timing: SimTiming) -> SimProvider {
        SimProvider {
            devices: (0..count)
                .map(|n| SimGpu::with_timing(n, timing.clone()))
                .collect(),
        }
    }

    /// Device `ordinal`, to read its [`SimGpu::stats`].
    pub fn device(&self, ordinal: u32) -> Option<&Arc<SimGpu>> {
        self.devices.get(ordinal as usize)
    }
}

impl GpuProvider for SimProvider {
    fn open(&self, ordinal: u32) -> Result<Arc<dyn Gpu>, GpuError> {
        match self.devices.get(ordinal as usize) {
            Some(gpu) => Ok(Arc::clone(gpu) as Arc<dyn Gpu>),
            None => Err(GpuError::new(
                format!("gpu:{ordinal}"),
                "open",
                format!("the simulation has {} device(s)", self.devices.len()),
            )),
        }
    }
}

#[cfg(test)]
mod tests;

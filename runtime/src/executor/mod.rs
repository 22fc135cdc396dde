//! The executor: frames flow from a [`Source`] through the plan's stages to a [`FrameSink`].
//!
//! Threads and their jobs:
//! - the **source** thread opens frames in free slots through an [`Ingest`], writes packets
//!   straight into their places, and launches each streamed tile as soon as its packets are
//!   present;
//! - **workers** (the placement's `workers`, optionally pinned) run launches: GPU stages'
//!   tasks first (they only enqueue, and each keeps a GPU fed), then later stages of frames in
//!   flight, then newer tiles; the worker that finishes a stage's last launch makes
//!   its successors ready, so no central scheduler sits between stages;
//! - the calling thread is the **collector**: it hands every frame to the sink, processed or
//!   partial, in the order frames began, records latency, and returns slots to the source.
//!
//! Guarantees: at most `slots` frames are in flight, each with its own kernel states and its
//! own buffers for the source, the sinks and whatever a GPU touches; tensors that live only
//! while a frame's stages run, and CPU stages' workspaces, are shared (the private `scratch`
//! module), so a frame waiting in a slot holds only its source buffer; nothing is allocated per
//! frame or per launch (tasks are small values in bounded queues sized so that sends never
//! block); a launch runs only once every tensor it reads is complete; a slot is reused only
//! once no launch of its frame runs. A kernel failure, a sink error or a source error stops the
//! run and is returned; the source sees the stop at its next frame. With
//! [`RunOptions::progress_every`], the collector tells the sink what the run has done
//! ([`Progress`]) at that interval and once at the end, so that the intervals' counts add up to
//! the run's.

mod ingest;
pub mod pool;
mod schedule;
mod scratch;
mod slot;
mod slot_error;
mod wait;

use std::ffi::c_void;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crossbeam::channel::{self, Receiver, Sender};

use crate::cuda::{GpuError, LaunchFailure};
use crate::executor::pool::{Pool, PoolError};
use crate::model::graph::{StageId, TensorId};
use crate::plan::Plan;
use crate::plugin::LaunchError;
use crate::report::metrics::{Latency, RunMetrics, StageCounters, Trend, process_cpu_time};
use crate::report::overhead::{CollectorTally, Overhead, WorkerTally};
pub use crate::report::progress::Progress;
use crate::report::trace::{MAX_SPANS, Span, SpanBuffer, SpanKind, Trace, Track};

pub use ingest::{BeginError, Ingest, OpenFrame, PacketStatus};
use schedule::Schedule;
use scratch::{FrameSets, WorkerScratch};
use slot::{Completion, Slot};
pub use slot_error::SlotError;

/// Where frames come from: a generator, a file replay, or a packet receiver.
pub trait Source: Send {
    /// Delivers frames through `ingest` until the source is exhausted or
    /// [`Ingest::begin_frame`] returns `None` (the run is stopping).
    fn run(&mut self, ingest: &mut Ingest<'_>) -> Result<(), SourceError>;
}

/// A source's failure, with its own message.
#[derive(Debug, thiserror::Error)]
#[error("source: {0}")]
pub struct SourceError(pub String);

/// Where completed frames go: a verifier, a file writer, a network sender.
///
/// Every frame the source began arrives exactly once, through one of the two methods, in the
/// order frames began. An error from either stops the run.
pub trait FrameSink {
    /// Takes one frame that every stage processed.
    fn frame(&mut self, frame: &CompletedFrame<'_>) -> Result<(), SinkError>;

    /// Notes one frame that ended with packets missing and was not processed.
    fn partial(&mut self, frame: &PartialFrame) -> Result<(), SinkError>;

    /// Takes a report of what the run has done, every [`RunOptions::progress_every`] and once
    /// at the end (`last`); ignored unless a sink says otherwise.
    fn progress(&mut self, progress: &Progress) -> Result<(), SinkError> {
        let _ = progress;
        Ok(())
    }
}

/// A frame that ended with packets missing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartialFrame {
    /// The frame id the source gave it.
    pub frame_id: u64,
    /// Its position in the order frames began.
    pub sequence: u64,
}

/// A sink's failure, with its own message.
#[derive(Debug, thiserror::Error)]
#[error("sink: {0}")]
pub struct SinkError(pub String);

/// A completed frame, lent to the sink until it returns.
pub struct CompletedFrame<'a> {
    /// The frame id the source gave it.
    pub frame_id: u64,
    /// Its position in the order frames began.
    pub sequence: u64,
    plan: &'a Plan,
    slot: &'a Slot,
}

impl CompletedFrame<'_> {
    /// The bytes of sink `index` (the graph's `sinks` order).
    pub fn sink(&self, index: usize) -> &[u8] {
        let TensorId(t) = self.plan.graph.sinks[index];
        // A sink lives as long as its slot (the planner's rule), so the slot has its buffer.
        let Some(block) = self.slot.host_buffer(t) else {
            return &[];
        };
        // SAFETY: every stage of the frame has finished (acquire ordering on the counters
        // and the channel), and the slot is not reused until the sink returns.
        unsafe { std::slice::from_raw_parts(block.ptr, block.bytes as usize) }
    }
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A pool could not be allocated.
    #[error(transparent)]
    Pool(#[from] PoolError),
    /// A frame slot could not be built.
    #[error(transparent)]
    Slot(#[from] SlotError),
    /// A kernel failed.
    #[error(transparent)]
    Launch(#[from] LaunchError),
    /// A GPU failed around a kernel: a copy, a fence, a stream.
    #[error(transparent)]
    Gpu(#[from] GpuError),
    /// The plan cannot run here: a GPU stage was planned without a usable GPU.
    #[error("this plan cannot run: no GPU is usable ({0})")]
    NotRunnable(GpuError),
    /// The source failed.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// The sink failed.
    #[error(transparent)]
    Sink(#[from] SinkError),
    /// A worker or the source thread panicked.
    #[error("a {0} thread panicked")]
    Panic(&'static str),
}

#[derive(Clone, Copy)]
enum Task {
    Launch { slot: u32, stage: u32, launch: u32 },
    Stop,
}

enum Event {
    FrameDone(usize),
    /// A frame ended with packets missing, and its last running launch has finished.
    FramePartial(usize),
    /// The source returned, having begun this many frames and dropped this many for want of a
    /// free slot.
    SourceEnded(Result<(), SourceError>, u64, u64),
    Failed(RunError),
}

impl From<LaunchFailure> for RunError {
    fn from(failure: LaunchFailure) -> Self {
        match failure {
            LaunchFailure::Kernel(e) => RunError::Launch(e),
            LaunchFailure::Device(e) => RunError::Gpu(e),
        }
    }
}

/// Where a GPU stage's host callback finds its run: one per slot and GPU stage, made before
/// the workers start and alive until every stream has drained.
struct CallbackContext {
    shared: *const Shared<'static>,
    slot: usize,
    stage: StageId,
}

/// State shared by every thread of a run.
struct Shared<'p> {
    plan: &'p Plan,
    schedule: Schedule,
    slots: Vec<Slot>,
    /// The buffers of the tensors that live only while a frame's stages run.
    sets: FrameSets,
    /// Launches of stages whose inputs are complete: later stages of frames in flight.
    ready: Sender<Task>,
    /// Launches of streamed tiles, sent by the source as packets complete them.
    streamed: Sender<Task>,
    /// Tasks of GPU stages, which only enqueue work on a stream: taken before any other, so a
    /// GPU never waits for a worker busy with CPU stages to hand it work.
    gpu: Sender<Task>,
    events: Sender<Event>,
    stopping: AtomicBool,
    counters: Vec<StageCounters>,
    start: Instant,
    slot_waits: AtomicU64,
    /// Frames the source dropped for want of a free slot, so far.
    dropped: AtomicU64,
    /// Whether the run records its timeline ([`RunOptions::trace`]).
    trace: bool,
    /// The spans each thread may keep.
    span_limit: usize,
    /// The GPU callbacks' spans (on the driver's thread), when traced.
    driver_spans: std::sync::Mutex<SpanBuffer>,
    /// When traced and an NVTX library loads: a range per launch and enqueue.
    nvtx: Option<crate::report::nvtx::Nvtx>,
    /// Per slot, per stage: the context a GPU stage's completion callback receives.
    callbacks: OnceLock<Vec<Vec<CallbackContext>>>,
    /// How long an idle thread spins before it parks (the placement's `runtime.spin_us`).
    spin: Duration,
}

// SAFETY: the raw pointer in a callback context points at the `Shared` that owns it; it is
// only dereferenced by callbacks, which all run before the run returns.
unsafe impl Send for CallbackContext {}
// SAFETY: as for Send: callbacks only read the context.
unsafe impl Sync for CallbackContext {}

impl Shared<'_> {
    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    fn dispatch_stage(&self, slot: usize, stage: StageId) {
        let tasks = self.schedule.tasks[stage.0];
        self.slots[slot].add_launches(tasks);
        for launch in 0..tasks {
            self.send_launch(slot, stage, launch, &self.ready);
        }
    }

    /// Sends launch `launch` of `stage` in `slot` to `queue`, or to the GPU queue for a GPU
    /// stage.
    fn send_launch(&self, slot: usize, stage: StageId, launch: u32, queue: &Sender<Task>) {
        let task = Task::Launch {
            slot: slot as u32,
            stage: stage.0 as u32,
            launch,
        };
        if self.slots[slot].is_gpu(stage) {
            send_task(&self.gpu, task);
        } else {
            send_task(queue, task);
        }
    }

    /// Called by a worker after a launch succeeded.
    fn complete(&self, slot_index: usize, stage: StageId) {
        let slot = &self.slots[slot_index];
        let mut frame_done = false;
        if let Completion::StageDone = slot.finish_launch(stage) {
            for &next in &self.schedule.successors[stage.0] {
                if slot.satisfy(next) {
                    self.dispatch_stage(slot_index, next);
                }
            }
            frame_done = slot.finish_stage();
        }
        // Successors were counted before this launch is uncounted, so the count reaches zero
        // only when nothing of the frame runs; only then may the collector reuse the slot.
        if slot.launch_finished() {
            self.partial_done(slot_index);
        }
        if frame_done {
            self.frame_done(slot_index);
        }
    }

    /// Called by a worker after it enqueued a task of GPU stage `stage`. After the stage's last
    /// task it fences the stage (downloads, event, host callback) and releases the GPU stages
    /// that read its outputs at once: their streams wait on its event, so nobody waits on the
    /// host. CPU readers are released by the callback, once the GPU has done the work.
    fn gpu_enqueued(
        &self,
        slot_index: usize,
        stage: StageId,
        spans: &mut SpanBuffer,
        track: Track,
    ) -> Result<(), RunError> {
        let slot = &self.slots[slot_index];
        if let Completion::Pending = slot.finish_launch(stage) {
            if slot.launch_finished() {
                self.partial_done(slot_index);
            }
            return Ok(());
        }
        let context = self
            .callbacks
            .get()
            .map(|c| &c[slot_index][stage.0])
            .expect("callback contexts are made before workers start");
        let fenced_from = self.now_ns();
        slot.fence_gpu(
            stage,
            gpu_stage_done,
            std::ptr::from_ref(context).cast_mut().cast(),
        )?;
        if self.trace {
            let frame = slot.frame_id.load(Ordering::Relaxed);
            let span = Span::new(SpanKind::Fence, track, frame, fenced_from, self.now_ns());
            spans.push(span.of_stage(stage.0 as u32, None));
        }
        for &next in &self.schedule.successors[stage.0] {
            if slot.is_gpu(next) && slot.satisfy(next) {
                self.dispatch_stage(slot_index, next);
            }
        }
        Ok(())
    }

    /// The host side of a GPU stage's fence: every launch and download of the stage has
    /// executed. Releases its CPU readers, and the frame if it was the last stage. This task's
    /// pending count was kept until now, so the slot cannot be reused under the GPU's feet.
    fn gpu_finished(&self, slot_index: usize, stage: StageId) {
        let slot = &self.slots[slot_index];
        if self.trace {
            let (frame, now) = (slot.frame_id.load(Ordering::Relaxed), self.now_ns());
            slot.gpu_callback_at(stage, now);
            let span = Span::new(SpanKind::Callback, Track::Driver, frame, now, now);
            self.driver_spans
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(span.of_stage(stage.0 as u32, None));
        }
        for &next in &self.schedule.successors[stage.0] {
            if !slot.is_gpu(next) && slot.satisfy(next) {
                self.dispatch_stage(slot_index, next);
            }
        }
        let frame_done = slot.finish_stage();
        if slot.launch_finished() {
            self.partial_done(slot_index);
        }
        if frame_done {
            self.frame_done(slot_index);
        }
    }

    /// Hands a frame whose stages have all ended to the collector, once its set of stage
    /// buffers is free for the next frame.
    fn frame_done(&self, slot: usize) {
        self.slots[slot].release_set(&self.sets);
        let _ = self.events.send(Event::FrameDone(slot));
    }

    /// Hands a partial frame whose launches have all ended to the collector, likewise.
    fn partial_done(&self, slot: usize) {
        self.slots[slot].release_set(&self.sets);
        let _ = self.events.send(Event::FramePartial(slot));
    }
}

/// Runs `plan` with frames from `source` until it is exhausted, handing every completed frame
/// to `sink`.
pub fn run(
    plan: &Plan,
    source: &mut dyn Source,
    sink: &mut dyn FrameSink,
) -> Result<RunMetrics, RunError> {
    run_with(plan, source, sink, &RunOptions::default())
}

/// How a run measures itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunOptions {
    /// Frames (in the order they began) processed but left out of the rate, latency and CPU
    /// figures: caches, page faults and a sender settling in are not what a sustained run is.
    pub warmup_frames: u64,
    /// Measure each GPU stage's time on its stream with timing events (launches with their
    /// uploads, and downloads), reported per frame. Off by default: timing events cost more
    /// than the fences' timing-free ones.
    pub profile_gpu: bool,
    /// Tell the sink what the run has done ([`FrameSink::progress`]) at this interval, and once
    /// at the end; `None`: never.
    pub progress_every: Option<Duration>,
    /// Record the run's timeline ([`crate::report::trace`]) into [`RunMetrics::trace`].
    pub trace: bool,
}

/// [`run`], measuring only after `options.warmup_frames` frames.
pub fn run_with(
    plan: &Plan,
    source: &mut dyn Source,
    sink: &mut dyn FrameSink,
    options: &RunOptions,
) -> Result<RunMetrics, RunError> {
    plan.runnable()
        .map_err(|cause| RunError::NotRunnable(cause.clone()))?;
    let schedule = Schedule::new(plan);
    let mut pools = plan
        .pools
        .iter()
        .map(|p| Pool::for_spec(p, p.space.gpu().and_then(|n| plan.gpus.get(&n))))
        .collect::<Result<Vec<_>, _>>()?;
    tracing::debug!(
        "{} pools allocated, {} in all",
        pools.len(),
        crate::plan::human_bytes(plan.pool_bytes())
    );
    let sets = FrameSets::new(plan, &mut pools)?;
    let slots = (0..plan.runtime.slots)
        .map(|_| Slot::new(plan, &mut pools, &schedule, options.profile_gpu))
        .collect::<Result<Vec<_>, _>>()?;
    let mut scratches = (0..plan.runtime.workers)
        .map(|_| WorkerScratch::new(plan, &mut pools))
        .collect::<Result<Vec<_>, _>>()?;
    tracing::debug!(
        "{} frame slots built, {} workers, profile_gpu {}",
        slots.len(),
        plan.runtime.workers,
        options.profile_gpu
    );

    let max_tasks = slots.len() * schedule.tasks.iter().map(|&l| l as usize).sum::<usize>()
        + plan.runtime.workers;
    let (ready_tx, ready_rx) = channel::bounded::<Task>(max_tasks);
    let (streamed_tx, streamed_rx) = channel::bounded::<Task>(max_tasks);
    let (gpu_tx, gpu_rx) = channel::bounded::<Task>(max_tasks);
    // Every slot sends at most one FrameDone per frame, plus the source's end and failures.
    let (event_tx, event_rx) = channel::bounded::<Event>(slots.len() + max_tasks + 1);
    let (free_tx, free_rx) = channel::bounded::<usize>(slots.len());
    // crossbeam's one-time allocations for waiting on each channel, now rather than when a
    // thread first has to wait (wait.rs): every worker may wait on each task queue, the source
    // on a free slot and the collector (this thread) on the events.
    for queue in [&ready_rx, &streamed_rx, &gpu_rx] {
        wait::prepare_to_block(queue, plan.runtime.workers);
    }
    wait::prepare_to_block(&free_rx, 1);
    wait::prepare_to_block(&event_rx, 1);
    for i in 0..slots.len() {
        let _ = free_tx.send(i);
    }
    // Every thread's share of the spans: the workers, the source, the collector and the driver.
    let span_limit = if options.trace {
        MAX_SPANS / (plan.runtime.workers + 3)
    } else {
        0
    };
    let shared = Shared {
        plan,
        schedule,
        slots,
        sets,
        ready: ready_tx,
        streamed: streamed_tx,
        gpu: gpu_tx,
        events: event_tx,
        stopping: AtomicBool::new(false),
        counters: plan
            .stages
            .iter()
            .map(|_| StageCounters::default())
            .collect(),
        start: Instant::now(),
        slot_waits: AtomicU64::new(0),
        dropped: AtomicU64::new(0),
        trace: options.trace,
        span_limit,
        driver_spans: std::sync::Mutex::new(SpanBuffer::new(span_limit)),
        nvtx: if options.trace {
            let names: Vec<String> = plan.graph.stages.iter().map(|s| s.name.clone()).collect();
            crate::report::nvtx::Nvtx::load(&names)
        } else {
            None
        },
        callbacks: OnceLock::new(),
        spin: plan.runtime.spin,
    };
    let contexts = (0..shared.slots.len())
        .map(|slot| {
            (0..plan.stages.len())
                .map(|stage| CallbackContext {
                    shared: std::ptr::from_ref(&shared).cast(),
                    slot,
                    stage: StageId(stage),
                })
                .collect()
        })
        .collect();
    let _ = shared.callbacks.set(contexts);
    let cpu_before = process_cpu_time();
    // With pinned workers, the source and the collector keep to the other cores, so that
    // waking one never preempts a worker mid-frame on its own core.
    let spare_cores = spare_cores(plan);
    let _collector_cores = spare_cores
        .as_ref()
        .and_then(|cores| crate::os::confine_current_thread(cores).ok());

    let outcome = std::thread::scope(|scope| {
        let shared = &shared;
        let workers: Vec<_> = scratches
            .drain(..)
            .enumerate()
            .map(|(w, scratch)| {
                let queues = Queues {
                    gpu: gpu_rx.clone(),
                    ready: ready_rx.clone(),
                    streamed: streamed_rx.clone(),
                };
                let core = plan.runtime.pin_cores.get(w).copied();
                scope.spawn(move || worker(shared, queues, scratch, core, w as u32))
            })
            .collect();
        let source_cores = spare_cores.as_ref();
        let source_thread = scope.spawn(move || {
            let _cores =
                source_cores.and_then(|cores| crate::os::confine_current_thread(cores).ok());
            wait::prepare_thread();
            let mut ingest = Ingest::new(shared, free_rx);
            let started = Instant::now();
            let result = source.run(&mut ingest);
            ingest.tally.busy = started.elapsed().saturating_sub(ingest.tally.slot_waited);
            // Counted once, where progress reports read it too.
            ingest.tally.slot_waits = shared.slot_waits.load(Ordering::Relaxed);
            let _ = shared.events.send(Event::SourceEnded(
                result,
                ingest.begun,
                shared.dropped.load(Ordering::Relaxed),
            ));
            (ingest.spans, ingest.tally)
        });

        let collected = collect(shared, &event_rx, free_tx, sink, options);

        shared.stopping.store(true, Ordering::Release);
        let source_joined = source_thread.join();
        for _ in 0..workers.len() {
            send_task(&shared.ready, Task::Stop);
        }
        let joined: Vec<_> = workers.into_iter().map(|w| w.join()).collect();
        let worker_panicked = joined.iter().any(Result::is_err);
        match (collected, source_joined) {
            (Err(e), _) => Err(e),
            (Ok(_), Err(_)) => Err(RunError::Panic("source")),
            (Ok(_), Ok(_)) if worker_panicked => Err(RunError::Panic("worker")),
            (Ok(c), Ok((source_spans, source_tally))) => {
                let mut spans = Vec::with_capacity(joined.len() + 1);
                let mut workers_total = WorkerTally::default();
                for (worker_spans, tally) in joined.into_iter().flatten() {
                    spans.push(worker_spans);
                    workers_total.add(&tally);
                }
                spans.push(source_spans);
                let (stage_sets, stage_sets_peak) = shared.sets.usage();
                let overhead = Overhead {
                    frames: c.frames,
                    workers: plan.runtime.workers as u32,
                    workers_total,
                    source: source_tally,
                    collector: c.tally,
                    stage_sets: stage_sets as u32,
                    stage_sets_peak: stage_sets_peak as u32,
                };
                Ok((c, spans, overhead))
            }
        }
    });
    // Every GPU callback must have run before `shared` goes; after a failure, streams may
    // still hold work. This is the only place the executor waits for a GPU.
    // Every stream of every slot is drained, whatever fails (a faulted device fails them all);
    // the first failure is kept.
    let mut drained = Ok(());
    for result in shared.slots.iter().flat_map(Slot::drain) {
        if drained.is_ok() {
            drained = result;
        }
    }
    let (mut outcome, mut spans, overhead) = outcome?;
    drained?;
    let trace = options.trace.then(|| {
        spans.push(std::mem::take(&mut outcome.spans));
        spans.push(std::mem::take(
            &mut *shared
                .driver_spans
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        ));
        let stages = plan
            .stages
            .iter()
            .map(|p| plan.graph.stage(p.stage).name.clone())
            .collect();
        Trace::merge(spans, stages)
    });

    let window_start = outcome.window_start.unwrap_or(outcome.first_start);
    let wall = outcome.last_delivery.saturating_sub(window_start);
    let frames = outcome.frames;
    Ok(RunMetrics {
        trace,
        frames,
        measured_frames: outcome.measured,
        wall,
        cpu: process_cpu_time().saturating_sub(outcome.cpu_at_window_start.unwrap_or(cpu_before)),
        stages: plan
            .stages
            .iter()
            .zip(&shared.counters)
            .map(|(p, c)| {
                c.snapshot(
                    &plan.graph.stage(p.stage).name,
                    p.device.to_string(),
                    frames,
                )
            })
            .collect(),
        post_cpi: outcome.post_cpi.summary(),
        end_to_end: outcome.end_to_end.summary(),
        post_cpi_trend: outcome.trend.slope(),
        slot_waits: shared.slot_waits.load(Ordering::Relaxed),
        partial_frames: outcome.partial,
        dropped_frames: outcome.dropped,
        overhead,
    })
}

/// The cores this process may use that no worker is pinned to, when workers are pinned and
/// some are left; `None` otherwise.
fn spare_cores(plan: &Plan) -> Option<crate::os::CpuSet> {
    let pinned = &plan.runtime.pin_cores;
    if pinned.is_empty() {
        return None;
    }
    crate::os::CpuSet::allowed().ok()?.without(pinned)
}

/// A GPU stage's completion callback, run by the driver once the stage's stream reaches it.
///
/// # Safety
/// `data` points at a [`CallbackContext`] of a run that has not returned.
unsafe extern "C" fn gpu_stage_done(data: *mut c_void) {
    // SAFETY: per the contract; the run drains every stream before its `Shared` is dropped.
    let context = unsafe { &*data.cast::<CallbackContext>() };
    // SAFETY: a context points at the `Shared` that owns it, alive until the run returns.
    let shared = unsafe { &*context.shared };
    // A panic must not unwind into the driver's thread.
    let finished = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        shared.gpu_finished(context.slot, context.stage);
    }));
    if finished.is_err() {
        shared.stopping.store(true, Ordering::Release);
        let _ = shared
            .events
            .send(Event::Failed(RunError::Panic("GPU callback")));
    }
}

fn send_task(queue: &Sender<Task>, task: Task) {
    // Each queue holds every launch of every slot, so this never blocks; it fails only when
    // the run is over and the workers are gone, when there is nothing left to do.
    let _ = queue.send(task);
}

/// A worker's queues, in the order it takes from them.
struct Queues {
    gpu: Receiver<Task>,
    ready: Receiver<Task>,
    streamed: Receiver<Task>,
}

/// The next launch for a worker: GPU stages' tasks first (they take microseconds, and each
/// keeps a GPU busy), then frames already in flight. A frame's later stages read what its
/// earlier stages just wrote, still in cache; starting tiles of newer frames first would evict
/// it (at 2048x256 that cost a third of the throughput). FIFO within each queue keeps frames
/// in the order they began.
///
/// With every queue empty, the worker spins for up to `spin` ([`wait::spin`]) before it
/// parks.
fn next_task(queues: &Queues, spin: Duration, tally: &mut WorkerTally) -> Option<Task> {
    if let Some(task) = try_next_task(queues) {
        return Some(task);
    }
    let (found, spun) = wait::spin(spin, || try_next_task(queues));
    tally.spun += spun;
    if let Some(task) = found {
        tally.spins += 1;
        return Some(task);
    }
    let parked_from = Instant::now();
    let task = crossbeam::select! {
        recv(queues.gpu) -> task => task.ok(),
        recv(queues.ready) -> task => task.ok(),
        recv(queues.streamed) -> task => task.ok(),
    };
    tally.parks += 1;
    tally.parked += parked_from.elapsed();
    task
}

/// The first task of the queues in priority order, without waiting.
fn try_next_task(queues: &Queues) -> Option<Task> {
    [&queues.gpu, &queues.ready, &queues.streamed]
        .into_iter()
        .find_map(|queue| queue.try_recv().ok())
}

fn worker(
    shared: &Shared<'_>,
    queues: Queues,
    mut scratch: WorkerScratch,
    core: Option<usize>,
    index: u32,
) -> (SpanBuffer, WorkerTally) {
    let mut spans = SpanBuffer::new(shared.span_limit);
    let mut tally = WorkerTally::default();
    wait::prepare_thread();
    if let Some(id) = core {
        // Pinning is a performance hint: a core that does not exist here leaves the thread
        // unpinned, and says so (a placement written for another machine still runs).
        if let Err(e) = crate::os::pin_current_thread(id) {
            tracing::warn!(
                "runtime.pin_cores: worker {index} not pinned to core {id}, it runs unpinned: {e}"
            );
        }
    }
    while let Some(task) = next_task(&queues, shared.spin, &mut tally) {
        let Task::Launch {
            slot,
            stage,
            launch,
        } = task
        else {
            break;
        };
        if shared.stopping.load(Ordering::Acquire) {
            continue;
        }
        let stage = StageId(stage as usize);
        let slot = slot as usize;
        let started = shared.now_ns();
        let traced = shared
            .trace
            .then(|| shared.slots[slot].frame_id.load(Ordering::Relaxed));
        let mut launched = started;
        let mut record = |spans: &mut SpanBuffer, kind| {
            launched = shared.now_ns();
            if let Some(frame) = traced {
                let span = Span::new(kind, Track::Worker(index), frame, started, launched);
                spans.push(span.of_stage(stage.0 as u32, Some(launch)));
            }
        };
        let range = shared.nvtx.as_ref().map(|n| n.range(stage.0));
        // A CPU launch runs here; a GPU task only enqueues, and its time is the host's cost.
        let result = if shared.slots[slot].is_gpu(stage) {
            let enqueued = shared.slots[slot].enqueue_gpu(stage, launch);
            record(&mut spans, SpanKind::Enqueue);
            enqueued
                .map_err(RunError::from)
                .and_then(|()| shared.gpu_enqueued(slot, stage, &mut spans, Track::Worker(index)))
        } else {
            let launched = shared.slots[slot].launch(stage, launch, &shared.sets, &mut scratch);
            // Recorded before the launch is completed: completing it may hand the frame on.
            record(&mut spans, SpanKind::Launch);
            launched.map(|()| shared.complete(slot, stage))
        };
        drop(range);
        let ended = shared.now_ns();
        shared.counters[stage.0].record(ended.saturating_sub(started));
        tally.tasks += 1;
        tally.launch += Duration::from_nanos(launched.saturating_sub(started));
        tally.bookkeeping += Duration::from_nanos(ended.saturating_sub(launched));
        if let Err(e) = result {
            shared.stopping.store(true, Ordering::Release);
            let _ = shared.events.send(Event::Failed(e));
        }
    }
    (spans, tally)
}

struct Collected {
    /// Frames processed by every stage.
    frames: u64,
    /// Of those, frames delivered after the warm-up.
    measured: u64,
    /// When the warm-up ended (the last warm-up frame's delivery) and the CPU time then;
    /// `None` without a warm-up.
    window_start: Option<Duration>,
    cpu_at_window_start: Option<Duration>,
    /// Frames that ended with packets missing.
    partial: u64,
    /// Frames the source dropped for want of a free slot.
    dropped: u64,
    first_start: Duration,
    last_delivery: Duration,
    post_cpi: Latency,
    end_to_end: Latency,
    trend: Trend,
    /// The collector's spans, when traced: each frame's packets and delivery.
    spans: SpanBuffer,
    /// The collector's own time delivering.
    tally: CollectorTally,
}

/// The progress reports of a run: when the next is due, and what the previous one counted.
struct Ticker {
    every: Duration,
    due: Duration,
    at: Duration,
    frames: u64,
    partial: u64,
    dropped: u64,
    cpu: Duration,
    /// Post-CPI latency of the interval's frames; its memory is allocated once.
    post_cpi: Latency,
}

impl Ticker {
    fn new(every: Duration) -> Ticker {
        // At least 1 ms apart: a report costs the collector a few microseconds, not a frame.
        let every = every.max(Duration::from_millis(1));
        Ticker {
            every,
            due: every,
            at: Duration::ZERO,
            frames: 0,
            partial: 0,
            dropped: 0,
            cpu: process_cpu_time(),
            post_cpi: Latency::new(),
        }
    }

    /// Tells `sink` what the run has done since the previous report.
    fn report(
        &mut self,
        shared: &Shared<'_>,
        out: &Collected,
        sink: &mut dyn FrameSink,
        last: bool,
    ) -> Result<(), SinkError> {
        let now = shared.start.elapsed();
        let cpu = process_cpu_time();
        let dropped = shared.dropped.load(Ordering::Relaxed);
        let progress = Progress {
            elapsed: now,
            interval: now.saturating_sub(self.at),
            frames: out.frames,
            interval_frames: out.frames - self.frames,
            partial_frames: out.partial,
            interval_partial_frames: out.partial - self.partial,
            dropped_frames: dropped,
            interval_dropped_frames: dropped.saturating_sub(self.dropped),
            post_cpi: self.post_cpi.quantiles(),
            cpu: cpu.saturating_sub(self.cpu),
            slot_waits: shared.slot_waits.load(Ordering::Relaxed),
            gpus: Vec::new(),
            last,
        };
        (self.at, self.frames, self.partial, self.dropped, self.cpu) =
            (now, out.frames, out.partial, dropped, cpu);
        self.post_cpi.reset();
        // The next report is due an interval from now: a collector held up skips reports, it
        // does not catch up with a burst of them.
        self.due = now + self.every;
        sink.progress(&progress)
    }
}

/// The collector: delivers frames in order, returns slots, stops on the first failure; with
/// progress reports, says the last one once every frame is delivered.
fn collect(
    shared: &Shared<'_>,
    events: &Receiver<Event>,
    free: Sender<usize>,
    sink: &mut dyn FrameSink,
    options: &RunOptions,
) -> Result<Collected, RunError> {
    let mut ticker = options.progress_every.map(Ticker::new);
    let out = deliver(
        shared,
        events,
        free,
        sink,
        options.warmup_frames,
        &mut ticker,
    )?;
    if let Some(ticker) = &mut ticker {
        ticker.report(shared, &out, sink, true)?;
    }
    Ok(out)
}

/// The collector loop: delivers frames in order, returns slots, reports progress when due,
/// stops on the first failure.
fn deliver(
    shared: &Shared<'_>,
    events: &Receiver<Event>,
    free: Sender<usize>,
    sink: &mut dyn FrameSink,
    warmup: u64,
    ticker: &mut Option<Ticker>,
) -> Result<Collected, RunError> {
    let mut out = Collected {
        frames: 0,
        measured: 0,
        window_start: None,
        cpu_at_window_start: None,
        partial: 0,
        dropped: 0,
        first_start: Duration::MAX,
        last_delivery: Duration::ZERO,
        post_cpi: Latency::new(),
        end_to_end: Latency::new(),
        trend: Trend::default(),
        spans: SpanBuffer::new(shared.span_limit),
        tally: CollectorTally::default(),
    };
    // Ended frames waiting for an earlier one, by slot: Some(partial).
    let mut parked: Vec<Option<bool>> = vec![None; shared.slots.len()];
    // Frames the source began, known once it has returned.
    let mut begun: Option<u64> = None;
    let fail = |e: RunError| {
        shared.stopping.store(true, Ordering::Release);
        // Dropping `free` here (by returning) wakes a source waiting for a slot.
        Err(e)
    };
    loop {
        if begun == Some(out.frames + out.partial) {
            return Ok(out);
        }
        if let Some(t) = ticker.as_mut()
            && shared.start.elapsed() >= t.due
            && let Err(e) = t.report(shared, &out, sink, false)
        {
            return fail(e.into());
        }
        let event = match next_event(shared, events, ticker.as_ref().map(|t| t.due)) {
            Ok(Next::Event(event)) => event,
            Ok(Next::Due) => continue,
            Ok(Next::Closed) => return Ok(out),
            Err(e) => return fail(e),
        };
        match event {
            Event::FrameDone(slot) => parked[slot] = Some(false),
            Event::FramePartial(slot) => parked[slot] = Some(true),
            Event::SourceEnded(Ok(()), n, dropped) => {
                begun = Some(n);
                out.dropped = dropped;
            }
            Event::SourceEnded(Err(e), _, _) => return fail(e.into()),
            Event::Failed(e) => return fail(e),
        }
        while let Some((slot, partial)) = next_in_order(shared, &parked, out.frames + out.partial) {
            let delivering_from = Instant::now();
            parked[slot] = None;
            let s = &shared.slots[slot];
            let frame_id = s.frame_id.load(Ordering::Relaxed);
            let sequence = s.sequence.load(Ordering::Relaxed);
            let delivered = if partial {
                out.partial += 1;
                sink.partial(&PartialFrame { frame_id, sequence })
            } else {
                let done = shared.now_ns();
                let last = s.last_packet_ns.load(Ordering::Relaxed);
                if let Some(t) = ticker.as_mut() {
                    t.post_cpi.record(done.saturating_sub(last));
                }
                if sequence >= warmup {
                    let first = s.first_packet_ns.load(Ordering::Relaxed);
                    out.post_cpi.record(done.saturating_sub(last));
                    out.trend
                        .record(done as f64 * 1e-9, done.saturating_sub(last) as f64 * 1e-9);
                    out.end_to_end.record(done.saturating_sub(first));
                    out.first_start = out.first_start.min(Duration::from_nanos(first));
                    out.measured += 1;
                }
                out.frames += 1;
                for (i, counters) in shared.counters.iter().enumerate() {
                    match s.gpu_time(StageId(i)) {
                        Some(Ok(time)) => counters.record_gpu(time.as_nanos() as u64),
                        Some(Err(e)) => return fail(e.into()),
                        None => {}
                    }
                }
                if shared.trace {
                    for i in 0..shared.counters.len() {
                        let stream_spans =
                            s.gpu_spans(StageId(i), slot as u32, frame_id, &mut out.spans);
                        if let Err(e) = stream_spans {
                            return fail(e.into());
                        }
                    }
                }
                sink.frame(&CompletedFrame {
                    frame_id,
                    sequence,
                    plan: shared.plan,
                    slot: s,
                })
            };
            if let Err(e) = delivered {
                return fail(e.into());
            }
            if shared.trace {
                let at = shared.now_ns();
                let first = s.first_packet_ns.load(Ordering::Relaxed);
                let last = s.last_packet_ns.load(Ordering::Relaxed);
                if last > 0 {
                    let packets =
                        Span::new(SpanKind::Packets, Track::Source, frame_id, first, last);
                    out.spans.push(packets);
                }
                let done = Span::new(SpanKind::Deliver, Track::Collector, frame_id, at, at);
                out.spans.push(done);
            }
            out.last_delivery = shared.start.elapsed();
            if warmup > 0 && sequence + 1 == warmup {
                out.window_start = Some(out.last_delivery);
                out.cpu_at_window_start = Some(process_cpu_time());
            }
            s.reset(&shared.schedule);
            let _ = free.send(slot);
            out.tally.busy += delivering_from.elapsed();
        }
    }
}

/// How often the collector, while it waits, asks each GPU whether work already enqueued has
/// failed: a faulting kernel stops its device's streams, so the callbacks that would complete
/// frames never run and nothing else would say so.
const GPU_CHECK_INTERVAL: Duration = Duration::from_millis(100);

/// What the collector waits for next.
enum Next {
    Event(Event),
    /// A progress report is due.
    Due,
    /// Every sender is gone.
    Closed,
}

/// The next event, a progress report once the run's clock reaches `due`, the end of the
/// events, or a GPU's sticky error.
fn next_event(
    shared: &Shared<'_>,
    events: &Receiver<Event>,
    due: Option<Duration>,
) -> Result<Next, RunError> {
    let checks_gpus = !shared.plan.gpus.is_empty();
    // A frame that completes while the collector spins costs its worker no wake-up.
    if let Some(event) = wait::spin_recv(shared.spin, events) {
        return Ok(event.map_or(Next::Closed, Next::Event));
    }
    if !checks_gpus && due.is_none() {
        return Ok(events.recv().map_or(Next::Closed, Next::Event));
    }
    loop {
        let mut wait = GPU_CHECK_INTERVAL;
        if let Some(due) = due {
            let left = due.saturating_sub(shared.start.elapsed());
            if left.is_zero() {
                return Ok(Next::Due);
            }
            wait = if checks_gpus { wait.min(left) } else { left };
        }
        match events.recv_timeout(wait) {
            Ok(event) => return Ok(Next::Event(event)),
            Err(channel::RecvTimeoutError::Disconnected) => return Ok(Next::Closed),
            Err(channel::RecvTimeoutError::Timeout) => {
                for gpu in shared.plan.gpus.values() {
                    gpu.check()?;
                }
            }
        }
    }
}

/// The parked frame that began `next_sequence`-th, with whether it is partial.
fn next_in_order(
    shared: &Shared<'_>,
    parked: &[Option<bool>],
    next_sequence: u64,
) -> Option<(usize, bool)> {
    parked.iter().enumerate().find_map(|(i, p)| {
        let partial = (*p)?;
        (shared.slots[i].sequence.load(Ordering::Relaxed) == next_sequence).then_some((i, partial))
    })
}

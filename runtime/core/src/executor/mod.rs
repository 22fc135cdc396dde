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
//!   partial, in the order frames began, records latency, and returns slots to the source;
//! - with [`RunOptions::control`], a **control** thread prepares parameter changes, which the
//!   source swaps in between frames.
//!
//! A run has a *lane* per placement it may run frames on: its plan, slots, stage buffers,
//! carries, task queues and workers. [`run_with`] has one; [`run_adaptive`] one per placement
//! of a graph, and the collector's switching rule ([`crate::adapt`]) chooses the lane each new
//! frame opens in, while the one source and the one collector serve them all.
//!
//! Where each part is: `setup` builds what a run allocates before its threads start (from
//! `pool`, with `constants` and `schedule`), `threads` starts and joins them, `worker` and
//! `collector` are their loops, `wait` how they wait for each other, `ingest` the source's
//! side, `gpu` the host's side of GPU stages, `slot` and `scratch` the memory of frames in
//! flight, `turnstile` the order of a stateful stage's frames and `carry` its carry in each
//! lane, `control` the changes of parameters, `outcome` the metrics gathered at the end,
//! `ends_error` and `slot_error` the errors of the run's ends and of its slots; [`run_with`]
//! here ties them together.
//!
//! Guarantees: at most `slots` frames are in flight, each with its own kernel states and its
//! own buffers for the source, the sinks and whatever a GPU touches; tensors that live only
//! while a frame's stages run, and CPU stages' workspaces, are shared (the private `scratch`
//! module), so a frame waiting in a slot holds only its source buffer; nothing is allocated per
//! frame or per launch (tasks are small values in bounded queues sized so that sends never
//! block); a launch runs only once every tensor it reads is complete; a stateful stage runs
//! one frame at a time, in the order frames began; a slot is reused only once no launch of its
//! frame runs. A kernel failure, a sink error or a source error stops the
//! run and is returned; the source sees the stop at its next frame. With
//! [`RunOptions::progress_every`], the collector tells the sink what the run has done
//! ([`Progress`]) at that interval and once at the end, so that the intervals' counts add up to
//! the run's.

mod carry;
mod collector;
mod constants;
mod control;
mod ends_error;
mod gpu;
mod ingest;
mod outcome;
pub mod pool;
mod schedule;
mod scratch;
mod setup;
mod slot;
mod slot_error;
mod threads;
mod turnstile;
mod wait;
mod worker;

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crossbeam::channel::{self, Receiver, Sender};

use crate::cuda::{GpuError, LaunchFailure};
use crate::executor::pool::PoolError;
use crate::measure::metrics::{RunMetrics, StageCounters, process_cpu_time};
pub use crate::measure::progress::Progress;
use crate::measure::trace::{MAX_SPANS, SpanBuffer};
use crate::model::graph::{StageId, TensorId};
use crate::plan::Plan;
use crate::plugin::LaunchError;

pub use crate::plan::gpu_path::Delivery;
use carry::{Admitted, LaneCarry};
use control::Control;
pub use control::ParamUpdate;
pub use ends_error::{BoxedError, SinkError, SourceError};
pub use ingest::{BeginError, Ingest, OpenFrame, PacketStatus, StageError};
use outcome::metrics;
use schedule::Schedule;
use scratch::FrameSets;
use setup::{Built, Channels, LaneWiring, Peers};
pub use setup::{CarryOf, NotAdaptable};
use slot::{Completion, FrameEnd, Slot};
pub use slot_error::SlotError;
use threads::{Threads, drain_streams, spare_cores};
use turnstile::{At, Turnstile};

/// Where frames come from: a generator, a file replay, or a packet receiver.
pub trait Source: Send {
    /// Delivers frames through `ingest` until the source is exhausted or
    /// [`Ingest::begin_frame`] returns `None` (the run is stopping).
    fn run(&mut self, ingest: &mut Ingest<'_>) -> Result<(), SourceError>;

    /// How the source hands frames over: packet by packet as they arrive (the default), or
    /// whole, from frames prepared in memory, which the run may then have the source stage
    /// where the GPU copies from ([`Ingest::takes_whole_frames`]). Asked once, before the run
    /// builds its slots.
    fn delivery(&self) -> Delivery {
        Delivery::Packets
    }
}

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
    /// Placements that cannot be switched between while the stream runs.
    #[error("these placements cannot be switched between while the stream runs: {0}")]
    NotAdaptable(Box<NotAdaptable>),
}

#[derive(Clone, Copy)]
enum Task {
    Launch { slot: u32, stage: u32, launch: u32 },
    Stop,
}

/// What the collector hears: frames ended, the source's end, failures.
enum Event {
    /// The frame in `slot` of `lane` ended as `end`, and nothing of it runs any more.
    FrameEnded {
        lane: usize,
        slot: usize,
        end: FrameEnd,
    },
    /// The source returned, having begun `begun` frames and dropped `dropped` for want of a
    /// free slot.
    SourceEnded {
        result: Result<(), SourceError>,
        begun: u64,
        dropped: u64,
    },
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

/// What every lane of a run shares: its clock, its stop, its losses, each stage's counters,
/// and which lane new frames begin in. A run has a lane per placement it may run frames on
/// (one, unless it adapts: [`run_adaptive`]).
struct Common {
    start: Instant,
    /// Whether the run has more than one lane: decided once, where the run is built.
    several: bool,
    stopping: AtomicBool,
    /// Per stage, over every lane.
    counters: Vec<StageCounters>,
    slot_waits: AtomicU64,
    /// Frames the source dropped for want of a free slot, so far.
    dropped: AtomicU64,
    /// Per lane: frames begun in it so far.
    begun: Vec<AtomicU64>,
    /// Frames an open-loop source found no free slot for in the active lane, when the run
    /// adapts (run in another lane, or dropped).
    slot_misses: AtomicU64,
    /// Of those, frames run in another lane.
    spilled: AtomicU64,
    /// The lane the source opens its next frame in.
    active: AtomicUsize,
    /// Per stage: the gate of a stateful stage, which runs one frame at a time, whatever
    /// lane runs it.
    gates: Vec<Option<Turnstile>>,
}

impl Common {
    fn new(stages: usize, lanes: usize, several: bool, gates: Vec<Option<Turnstile>>) -> Common {
        Common {
            start: Instant::now(),
            several,
            stopping: AtomicBool::new(false),
            counters: (0..stages).map(|_| StageCounters::default()).collect(),
            slot_waits: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            begun: (0..lanes).map(|_| AtomicU64::new(0)).collect(),
            slot_misses: AtomicU64::new(0),
            spilled: AtomicU64::new(0),
            active: AtomicUsize::new(0),
            gates,
        }
    }
}

/// State shared by every thread of a lane: one placement's plan, with its slots, sets, carries
/// and task queues.
struct Shared<'p> {
    plan: &'p Plan,
    /// How the lane's GPU stages reach their device each frame.
    path: crate::plan::gpu_path::GpuPath,
    /// The frames the source staged in pinned memory ([`Ingest::stage`]), kept until every
    /// stream has drained.
    staged_frames: std::sync::Mutex<Vec<crate::cuda::owned::GpuMemory>>,
    schedule: Schedule,
    slots: Vec<Slot>,
    /// The buffers of the tensors that live only while a frame's stages run.
    sets: FrameSets,
    /// Per stage: a stateful stage's carry in this lane.
    carries: Vec<Option<LaneCarry>>,
    /// Parameter changes waiting for their frames, and the record of every change.
    control: Control,
    /// Launches of stages whose inputs are complete: later stages of frames in flight.
    ready: Sender<Task>,
    /// Launches of streamed tiles, sent by the source as packets complete them.
    streamed: Sender<Task>,
    /// Tasks of GPU stages, which only enqueue work on a stream: taken before any other, so a
    /// GPU never waits for a worker busy with CPU stages to hand it work.
    gpu: Sender<Task>,
    events: Sender<Event>,
    /// What every lane of the run shares.
    common: &'p Common,
    /// This lane's place among the run's lanes.
    lane: usize,
    /// Whether the run records its timeline ([`RunOptions::trace`]).
    trace: bool,
    /// The spans each thread may keep.
    span_limit: usize,
    /// The GPU callbacks' spans (on the driver's thread), when traced.
    driver_spans: std::sync::Mutex<SpanBuffer>,
    /// When traced and an NVTX library loads: a range per launch and enqueue.
    nvtx: Option<crate::measure::nvtx::Nvtx>,
    /// Every lane of the run: a stateful stage's gate may hand a frame of another lane on.
    peers: OnceLock<Peers>,
    /// How long an idle thread spins before it parks (the placement's `runtime.spin_us`).
    spin: Duration,
}

impl<'p> Shared<'p> {
    fn now_ns(&self) -> u64 {
        self.common.start.elapsed().as_nanos() as u64
    }

    /// `stage` of the frame in `slot` has every input: it runs now, or, for a stateful stage,
    /// once the stage of every earlier frame has (its turnstile decides).
    fn stage_ready(&self, slot: usize, stage: StageId) {
        let Some(gate) = &self.common.gates[stage.0] else {
            return self.dispatch_stage(slot, stage);
        };
        let s = &self.slots[slot];
        let (sequence, frame) = (
            s.sequence.load(Ordering::Relaxed),
            s.frame_id.load(Ordering::Relaxed),
        );
        if let Some(admitted) = gate.ready(self.at(slot), sequence, frame) {
            self.dispatch_at(admitted, stage);
        }
    }

    /// The frame in `slot` ended partial: its stateful stages will not run, and the next
    /// frames' may.
    fn skip_stateful(&self, slot: usize) {
        let sequence = self.slots[slot].sequence.load(Ordering::Relaxed);
        for (stage, gate) in self.common.gates.iter().enumerate() {
            if let Some(admitted) = gate.as_ref().and_then(|g| g.skip(self.at(slot), sequence)) {
                self.dispatch_at(admitted, StageId(stage));
            }
        }
    }

    /// Runs the stateful `stage` of the frame its gate admitted, in whichever lane it is.
    fn dispatch_at(&self, at: At, stage: StageId) {
        self.peer(at.lane).dispatch_stage(at.slot, stage);
    }

    /// The admitted launch of stateful `stage` in this lane; `None` for a stage without a
    /// carry.
    fn admitted_carry(&self, stage: StageId) -> Option<Admitted<'_>> {
        let carry = self.carries[stage.0].as_ref()?;
        let admission = self.common.gates[stage.0].as_ref()?.admitted();
        let from = admission
            .from_lane
            .and_then(|lane| self.peer(lane).carries[stage.0].as_ref());
        Some(Admitted {
            carry,
            admission,
            from,
        })
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
        let mut processed = None;
        if let Completion::StageDone = slot.finish_launch(stage) {
            for &next in &self.schedule.successors[stage.0] {
                if slot.satisfy(next) {
                    self.stage_ready(slot_index, next);
                }
            }
            // The frame's stage is over: the next frame's may take the carry.
            if let Some(admitted) = self.common.gates[stage.0]
                .as_ref()
                .and_then(|g| g.done(false))
            {
                self.dispatch_at(admitted, stage);
            }
            processed = slot.finish_stage();
        }
        // Successors were counted before this launch is uncounted, so the count reaches zero
        // only when nothing of the frame runs; only then may the collector reuse the slot.
        if let Some(partial) = slot.launch_finished() {
            self.frame_ended(slot_index, partial);
        }
        if let Some(processed) = processed {
            self.frame_ended(slot_index, processed);
        }
    }

    /// Hands the frame in `slot`, ended as `end` (nothing of it runs any more), to the
    /// collector, once its set of stage buffers is free for the next frame.
    fn frame_ended(&self, slot: usize, end: FrameEnd) {
        self.slots[slot].release_set(&self.sets);
        let lane = self.lane;
        let _ = self.events.send(Event::FrameEnded { lane, slot, end });
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

/// How a run measures itself, and what else it takes while it goes on.
#[derive(Clone, Debug, Default)]
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
    /// Record the run's timeline ([`crate::measure::trace`]) into [`RunMetrics::trace`].
    pub trace: bool,
    /// When the frames are a recording replayed (or sent) in cycles, its frames per cycle:
    /// frame numbers that cross a multiple of it start the stream again, so a stateful stage
    /// restarts there with a zeroed carry, as a reference computed over one cycle does.
    pub cycle: Option<u64>,
    /// Parameter changes to apply while the run goes on, each from the next frame to begin
    /// (the private `control` module); the run records every change, applied or refused.
    pub control: Option<Receiver<ParamUpdate>>,
}

/// [`run`], measuring only after `options.warmup_frames` frames.
pub fn run_with(
    plan: &Plan,
    source: &mut dyn Source,
    sink: &mut dyn FrameSink,
    options: &RunOptions,
) -> Result<RunMetrics, RunError> {
    run_lanes(&[plan], None, source, sink, options)
}

/// [`run_with`] over several placements of one graph (`plans`, in order of preference),
/// moving the stream between them at frame boundaries as `rule` decides ([`crate::adapt`]).
/// Every plan is built before the first frame: its slots, pools, kernel states, streams and
/// workers. A frame runs wholly on the plan it began on, and every frame reaches `sink` once,
/// in the order frames began. The metrics say what each plan ran and every switch.
///
/// A stateful stage's carry moves with the stream: the first frame a plan runs after another
/// takes the carry the frame before left, wherever that ran. Refused
/// ([`RunError::NotAdaptable`]) for plans of different graphs, of stateful stages whose carries
/// differ, and with parameter changes ([`RunOptions::control`]).
pub fn run_adaptive(
    plans: &[Plan],
    rule: crate::adapt::Rule,
    source: &mut dyn Source,
    sink: &mut dyn FrameSink,
    options: &RunOptions,
) -> Result<RunMetrics, RunError> {
    setup::adaptable(plans, &rule, options).map_err(|e| RunError::NotAdaptable(Box::new(e)))?;
    let plans: Vec<&Plan> = plans.iter().collect();
    run_lanes(&plans, Some(rule), source, sink, options)
}

/// Runs one lane per plan (the first active), switching by `rule` when there is one.
fn run_lanes(
    plans: &[&Plan],
    rule: Option<crate::adapt::Rule>,
    source: &mut dyn Source,
    sink: &mut dyn FrameSink,
    options: &RunOptions,
) -> Result<RunMetrics, RunError> {
    for plan in plans {
        plan.runnable()
            .map_err(|cause| RunError::NotRunnable(cause.clone()))?;
    }
    let several = plans.len() > 1;
    // Whole frames are staged for one lane only: each frame of a run that switches lanes may
    // open in another.
    let delivery = if several {
        Delivery::Packets
    } else {
        source.delivery()
    };
    let built = plans
        .iter()
        .map(|plan| Built::new(plan, options, several, delivery))
        .collect::<Result<Vec<_>, _>>()?;
    let slots: Vec<usize> = built.iter().map(|b| b.parts.slots.len()).collect();
    let gates = plans[0]
        .stages
        .iter()
        .map(|p| p.carry.map(|c| Turnstile::new(c, &slots, options.cycle)))
        .collect();
    let common = Common::new(plans[0].stages.len(), plans.len(), several, gates);
    let workers: usize = plans.iter().map(|p| p.runtime.workers).sum();
    // Every thread's share of the spans: the workers, the source, the collector and each
    // lane's driver callbacks.
    let span_limit = if options.trace {
        MAX_SPANS / (workers + 2 + plans.len())
    } else {
        0
    };
    // The pools own every block the slots, sets and scratches use: declared first, they are
    // dropped last.
    let mut pools = Vec::with_capacity(plans.len());
    let mut lanes = Vec::with_capacity(plans.len());
    let mut channels = Vec::with_capacity(plans.len());
    let mut scratches = Vec::with_capacity(plans.len());
    let events_bound: usize = built
        .iter()
        .zip(plans)
        .map(|(b, plan)| Channels::events_bound(plan, &b.parts.schedule, b.parts.slots.len()))
        .sum();
    let (events, event_rx) = channel::bounded::<Event>(events_bound + 1);
    wait::prepare_to_block(&event_rx, 1);
    for (index, (plan, built)) in plans.iter().zip(built).enumerate() {
        let Built {
            parts,
            pools: lane_pools,
            scratches: lane_scratches,
        } = built;
        let lane_channels = Channels::new(plan, &parts.schedule, parts.slots.len());
        let wiring = LaneWiring {
            channels: &lane_channels,
            events: &events,
            common: &common,
            index,
            span_limit,
        };
        lanes.push(Shared::new(plan, parts, wiring, options));
        channels.push(lane_channels);
        scratches.push(lane_scratches);
        pools.push(lane_pools);
    }
    drop(events);
    // The lanes stay where they are from here on: callbacks and gates point at them.
    for lane in &lanes {
        lane.link(&lanes);
    }
    let cpu_before = process_cpu_time();
    // With pinned workers, the source and the collector keep to the other cores, so that
    // waking one never preempts a worker mid-frame on its own core.
    let spare_cores = spare_cores(plans);
    let _collector_cores = spare_cores
        .as_ref()
        .and_then(|cores| crate::os::confine_current_thread(cores).ok());
    let threads = Threads {
        lanes: &lanes,
        spare_cores: spare_cores.as_ref(),
        rule: rule.as_ref(),
    };
    let outcome = threads.run(scratches, channels, event_rx, source, sink, options);
    // Every GPU callback must have run before the lanes go; after a failure, streams may
    // still hold work. This is the only place the executor waits for a GPU.
    let drained = drain_streams(&lanes);
    let measured = outcome?;
    drained?;
    Ok(metrics(
        &lanes,
        measured,
        cpu_before,
        rule.as_ref(),
        options,
    ))
}

fn send_task(queue: &Sender<Task>, task: Task) {
    // Each queue holds every launch of every slot, so this never blocks; it fails only when
    // the run is over and the workers are gone, when there is nothing left to do.
    let _ = queue.send(task);
}

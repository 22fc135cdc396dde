//! Frame slots: everything one frame in flight owns.
//!
//! A slot holds a buffer (and a mirror where it crosses the bus) for each tensor that lives as
//! long as the frame's slot ([`Lifetime::Slot`]: the source tensor, the sinks, anything a GPU
//! touches), one kernel state per stage, and the launch arguments built from them; for each
//! GPU stage, a workspace per launch, a stream, an event (its fence), the events of the GPU
//! stages it waits on, and the copies it enqueues; its host callbacks; and on the chain
//! ([`crate::plan::gpu_path`]) its graph, captured when the slot is built (`gpu`). Tensors that live only while the frame's
//! stages run come from a set the frame binds at its first launch ([`FrameSets::bind`]), and
//! CPU stages' workspaces from the worker that runs the launch (see [`super::scratch`]). All
//! are made once before the run, so running or enqueueing a launch touches no allocator. The
//! counters that order a frame's stages live here too; [`Slot::reset`] rearms them before the
//! slot is reused. `build` makes a slot, `gpu` enqueues its GPU work, and `timing` reads its
//! timing events back once a profiled frame has completed.
//!
//! [`Lifetime::Slot`]: crate::plan::Lifetime::Slot

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

use kplace_abi::{Tensor, Tile};

use crate::cuda::Event;
use crate::executor::pool::Block;
use crate::model::graph::{StageId, TensorId};
use crate::plugin::{CarryArgs, KernelState};

use super::RunError;
use super::schedule::Schedule;
use super::scratch::{FrameSets, WorkerScratch};
use super::slot_error::SlotError;

mod build;
mod gpu;
mod timing;

pub(crate) use build::SlotSpec;

pub(crate) use gpu::{Callback, CarryEnqueue, TaskEnd};
use gpu::{SlotChain, SlotGpu};

/// The flag in [`Slot`]'s pending count of a frame ended with packets missing.
const ABANDONED: u32 = 1 << 31;

/// One frame in flight.
pub(crate) struct Slot {
    /// On the chain: the slot's one stream and its graph (dropped first, before the kernel
    /// states its work uses). `None` on the path without a graph.
    chain: Option<SlotChain>,
    /// The host callbacks of the slot's GPU stages, at addresses that stay put.
    callbacks: Box<[Callback]>,
    /// Of `callbacks`, the graph's, in the order captured.
    graph_callbacks: Vec<usize>,
    /// Whether the source tensor's upload reads the frame from `source_from`, where the
    /// source staged it, rather than from the slot's own buffer.
    staged: bool,
    /// The current frame's source bytes, when staged ([`Slot::use_staged_source`]).
    source_from: AtomicPtr<u8>,
    /// Per graph tensor, where its writer writes it: the slot's buffer, or `None` for a tensor
    /// that lives only while the stages run (its buffer is in the frame's set).
    buffers: Vec<Option<Block>>,
    /// Per graph tensor, the buffer the host reads (the home or the mirror); `None` as above.
    host_views: Vec<Option<Block>>,
    /// The set of buffers the frame bound at its first launch that needed one
    /// ([`FrameSets::bind`]), or [`UNBOUND`](super::scratch::UNBOUND).
    set: AtomicU32,
    stages: Vec<SlotStage>,
    /// Per stage: predecessor stages (and the source's frame end) still to finish.
    waiting: Vec<AtomicU32>,
    /// Per stage: launches still to finish.
    launches_left: Vec<AtomicU32>,
    /// Stages still to finish.
    stages_left: AtomicU32,
    /// Launches sent and not yet finished, with [`ABANDONED`] set once the frame is partial.
    pending: AtomicU32,
    /// The frame's id as the source numbered it.
    pub(crate) frame_id: AtomicU64,
    /// Order in which frames began, for in-order delivery.
    pub(crate) sequence: AtomicU64,
    /// Nanoseconds since the run started: first and last packet.
    pub(crate) first_packet_ns: AtomicU64,
    pub(crate) last_packet_ns: AtomicU64,
}

struct SlotStage {
    /// Replaced only while nothing of the slot runs or is queued ([`Slot::replace_state`]).
    state: UnsafeCell<KernelState>,
    /// The launch's tensors; those in `from_set` are placeholders, filled in per launch.
    inputs: Vec<Tensor>,
    outputs: Vec<Tensor>,
    /// The ports whose tensor lives only while the stages run: its buffer is the frame's set's.
    from_set: Vec<SetPort>,
    /// A GPU stage's workspaces, one per launch of a frame (a CPU stage uses its worker's).
    workspaces: Vec<Block>,
    /// Launches per frame.
    launches: u32,
    split_axis_tile: Option<u64>,
    axis_extent: u64,
    /// What a GPU stage enqueues on; `None` on the CPU.
    gpu: Option<SlotGpu>,
}

/// A launch argument whose buffer comes from the frame's set.
#[derive(Clone, Copy)]
struct SetPort {
    /// An output port, else an input.
    output: bool,
    /// Its index among the stage's inputs or outputs.
    index: usize,
    tensor: TensorId,
}

// SAFETY: tensors and blocks are raw addresses into pools that outlive the slot; which thread
// may touch which bytes is decided by the schedule's counters.
unsafe impl Send for Slot {}
// SAFETY: as for Send: shared access to the bytes is ordered by the schedule's counters.
unsafe impl Sync for Slot {}

/// What became of a stage's launch.
pub(crate) enum Completion {
    /// More launches of the stage are outstanding.
    Pending,
    /// That was the stage's last launch.
    StageDone,
}

/// How the frame in a slot ended, once nothing of it runs any more: what the collector hands
/// the sink.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FrameEnd {
    /// Every stage ran.
    Processed,
    /// Packets were missing: the stages that needed them never started, and the last launch
    /// that had has ended.
    Partial,
}

impl SlotStage {
    fn state(&self) -> &KernelState {
        // SAFETY: the state is replaced only while nothing of the slot runs or is queued
        // (`Slot::replace_state`'s contract), so no borrow from here is alive then.
        unsafe { &*self.state.get() }
    }
}

impl Slot {
    /// Replaces `stage`'s kernel state with `state` (new parameters), returning the old one.
    ///
    /// # Safety
    /// Nothing of the slot runs or is queued: the slot has just been taken for a new frame,
    /// and `stage` runs on the CPU (a GPU stream may still hold launches of a partial frame).
    pub(crate) unsafe fn replace_state(&self, stage: StageId, state: KernelState) -> KernelState {
        // SAFETY: per the contract, no reference to the state is alive.
        unsafe { std::mem::replace(&mut *self.stages[stage.0].state.get(), state) }
    }

    /// Rearms the counters for a new frame. Only called while no launch of the slot runs.
    pub(crate) fn reset(&self, schedule: &Schedule) {
        for (w, &initial) in self.waiting.iter().zip(&schedule.initial_waiting) {
            w.store(initial, Ordering::Relaxed);
        }
        for (l, &initial) in self.launches_left.iter().zip(&schedule.tasks) {
            l.store(initial, Ordering::Relaxed);
        }
        self.stages_left
            .store(self.stages.len() as u32, Ordering::Relaxed);
        self.pending.store(0, Ordering::Relaxed);
    }

    /// The slot's buffer of tensor `index`; `None` for a tensor that lives only while the
    /// stages run.
    pub(crate) fn buffer(&self, index: usize) -> Option<Block> {
        self.buffers[index]
    }

    /// The host-readable buffer of tensor `index`: its home, or its mirror when the home is
    /// device memory; `None` as for [`Slot::buffer`].
    pub(crate) fn host_buffer(&self, index: usize) -> Option<Block> {
        self.host_views[index]
    }

    /// Returns the frame's set, if it bound one, for the next frame to take. Only once nothing
    /// of the frame runs or is queued: all its stages have ended, or it is partial and its
    /// last launch has.
    pub(crate) fn release_set(&self, sets: &FrameSets) {
        sets.release(&self.set);
    }

    /// Whether `stage` runs on a GPU.
    pub(crate) fn is_gpu(&self, stage: StageId) -> bool {
        self.stages[stage.0].gpu.is_some()
    }

    /// The event GPU stage `stage` records after its work in this slot; `None` on the CPU.
    pub(crate) fn gpu_event(&self, stage: StageId) -> Option<Event> {
        self.stages[stage.0].gpu.as_ref().map(|g| g.event.raw())
    }

    fn tile(s: &SlotStage, launch: u32) -> Tile {
        match s.split_axis_tile {
            Some(tile) => Tile {
                begin: u64::from(launch) * tile,
                count: tile,
            },
            None => Tile {
                begin: 0,
                count: s.axis_extent,
            },
        }
    }

    /// Runs launch `launch` of CPU stage `stage` on the calling thread, a worker, with the
    /// worker's workspace and, for tensors that live only while the stages run, the frame's
    /// set (bound now if this is the frame's first launch that needs one).
    pub(crate) fn launch(
        &self,
        stage: StageId,
        launch: u32,
        sets: &FrameSets,
        scratch: &mut WorkerScratch,
        carry: Option<&CarryArgs>,
    ) -> Result<(), RunError> {
        let s = &self.stages[stage.0];
        let ws = scratch.workspace(stage.0).ok_or(SlotError::PoolMissing)?;
        let (inputs, outputs) = if s.from_set.is_empty() {
            (s.inputs.as_slice(), s.outputs.as_slice())
        } else {
            let set = sets.bind(&self.set).ok_or(SlotError::NoFreeSet)?;
            // Within their capacity, the widest stage's: no allocation.
            scratch.inputs.clear();
            scratch.inputs.extend_from_slice(&s.inputs);
            scratch.outputs.clear();
            scratch.outputs.extend_from_slice(&s.outputs);
            for port in &s.from_set {
                let block = sets.block(set, port.tensor).ok_or(SlotError::PoolMissing)?;
                let side = if port.output {
                    &mut scratch.outputs
                } else {
                    &mut scratch.inputs
                };
                side[port.index].data = block.ptr.cast();
            }
            (scratch.inputs.as_slice(), scratch.outputs.as_slice())
        };
        // SAFETY: the buffers and workspace come from pools sized by the plan; the schedule
        // runs a launch only once its inputs are complete, and runs concurrent launches of one
        // stage only on disjoint tiles; the frame's set is bound to this frame alone until its
        // stages end; the workspace is this worker's, which runs one launch at a time; a
        // carry is its stage's, which its turnstile admits one launch at a time.
        unsafe {
            s.state().launch_with(
                inputs,
                outputs,
                (ws.ptr.cast(), ws.bytes),
                std::ptr::null_mut(),
                Self::tile(s, launch),
                carry,
            )
        }?;
        Ok(())
    }

    /// Records one finished launch of `stage`.
    pub(crate) fn finish_launch(&self, stage: StageId) -> Completion {
        if self.launches_left[stage.0].fetch_sub(1, Ordering::AcqRel) == 1 {
            Completion::StageDone
        } else {
            Completion::Pending
        }
    }

    /// Records that one thing `stage` waits for is done; true when it is now ready.
    pub(crate) fn satisfy(&self, stage: StageId) -> bool {
        self.waiting[stage.0].fetch_sub(1, Ordering::AcqRel) == 1
    }

    /// Counts `n` launches about to be sent.
    pub(crate) fn add_launches(&self, n: u32) {
        self.pending.fetch_add(n, Ordering::AcqRel);
    }

    /// Counts one launch finished; [`FrameEnd::Partial`] when it was the last of a frame
    /// already abandoned.
    pub(crate) fn launch_finished(&self) -> Option<FrameEnd> {
        (self.pending.fetch_sub(1, Ordering::AcqRel) == ABANDONED | 1).then_some(FrameEnd::Partial)
    }

    /// Marks the frame partial; [`FrameEnd::Partial`] when no launch is running, so that
    /// nothing of it runs any more.
    pub(crate) fn abandon(&self) -> Option<FrameEnd> {
        (self.pending.fetch_or(ABANDONED, Ordering::AcqRel) == 0).then_some(FrameEnd::Partial)
    }

    /// Records a finished stage; [`FrameEnd::Processed`] when it was the frame's last.
    pub(crate) fn finish_stage(&self) -> Option<FrameEnd> {
        (self.stages_left.fetch_sub(1, Ordering::AcqRel) == 1).then_some(FrameEnd::Processed)
    }
}

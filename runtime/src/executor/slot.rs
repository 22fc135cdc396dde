//! Frame slots: everything one frame in flight owns.
//!
//! A slot holds one buffer per tensor, one kernel state per stage, one workspace per launch of
//! each stage, and the launch arguments built from them, all made once before the run. Running
//! a launch therefore touches no allocator. The counters that order a frame's stages live here
//! too; [`Slot::reset`] rearms them before the slot is reused.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use kplace_abi::{Tensor, Tile};

use crate::graph::StageId;
use crate::plan::{Plan, PoolPurpose, tensor_desc};
use crate::plugin::{KernelState, LaunchError, PluginError};
use crate::pool::{Block, Pool};

use super::schedule::Schedule;

/// The flag in [`Slot`]'s pending count of a frame ended with packets missing.
const ABANDONED: u32 = 1 << 31;

/// One frame in flight.
pub(crate) struct Slot {
    /// One buffer per graph tensor.
    buffers: Vec<Block>,
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
    state: KernelState,
    inputs: Vec<Tensor>,
    outputs: Vec<Tensor>,
    workspaces: Vec<Block>,
    split_axis_tile: Option<u64>,
    axis_extent: u64,
}

// SAFETY: tensors and blocks are raw addresses into pools that outlive the slot; which thread
// may touch which bytes is decided by the schedule's counters.
unsafe impl Send for Slot {}
unsafe impl Sync for Slot {}

/// What became of a stage's launch.
pub(crate) enum Completion {
    /// More launches of the stage are outstanding.
    Pending,
    /// That was the stage's last launch.
    StageDone,
}

impl Slot {
    /// Builds a slot from the plan, taking blocks from `pools` and creating one kernel
    /// state per stage.
    pub(crate) fn new(
        plan: &Plan,
        pools: &mut [Pool],
        schedule: &Schedule,
    ) -> Result<Slot, SlotError> {
        let graph = &plan.graph;
        let mut take = |purpose: PoolPurpose| -> Result<Block, SlotError> {
            let (i, _) = plan
                .pools
                .iter()
                .enumerate()
                .find(|(_, p)| p.purpose == purpose)
                .ok_or(SlotError::PoolMissing)?;
            pools[i]
                .take()
                .ok_or_else(|| SlotError::PoolExhausted(plan.pools[i].name.clone()))
        };
        let buffers = (0..graph.tensors.len())
            .map(|t| take(PoolPurpose::Tensor(crate::graph::TensorId(t))))
            .collect::<Result<Vec<_>, _>>()?;
        let tensor = |id: crate::graph::TensorId| Tensor {
            desc: tensor_desc(graph.tensor(id), plan.edges[id.0].space),
            data: buffers[id.0].ptr.cast(),
        };
        let mut stages = Vec::with_capacity(plan.stages.len());
        for planned in &plan.stages {
            let spec = graph.stage(planned.stage);
            let state = plan
                .create_state(planned.stage)
                .map_err(SlotError::Create)?;
            let workspaces = (0..planned.launches)
                .map(|_| take(PoolPurpose::Workspace(planned.stage)))
                .collect::<Result<Vec<_>, _>>()?;
            let axis_extent = match spec.split {
                Some(s) => graph.tensor(spec.inputs[0]).shape[s.axis],
                None => graph.tensor(spec.inputs[0]).shape[0],
            };
            stages.push(SlotStage {
                state,
                inputs: spec.inputs.iter().map(|&t| tensor(t)).collect(),
                outputs: spec.outputs.iter().map(|&t| tensor(t)).collect(),
                workspaces,
                split_axis_tile: spec.split.map(|s| s.tile),
                axis_extent,
            });
        }
        let slot = Slot {
            buffers,
            waiting: schedule
                .initial_waiting
                .iter()
                .map(|&w| AtomicU32::new(w))
                .collect(),
            launches_left: schedule
                .launches
                .iter()
                .map(|&l| AtomicU32::new(l))
                .collect(),
            stages_left: AtomicU32::new(stages.len() as u32),
            pending: AtomicU32::new(0),
            stages,
            frame_id: AtomicU64::new(0),
            sequence: AtomicU64::new(0),
            first_packet_ns: AtomicU64::new(0),
            last_packet_ns: AtomicU64::new(0),
        };
        Ok(slot)
    }

    /// Rearms the counters for a new frame. Only called while no launch of the slot runs.
    pub(crate) fn reset(&self, schedule: &Schedule) {
        for (w, &initial) in self.waiting.iter().zip(&schedule.initial_waiting) {
            w.store(initial, Ordering::Relaxed);
        }
        for (l, &initial) in self.launches_left.iter().zip(&schedule.launches) {
            l.store(initial, Ordering::Relaxed);
        }
        self.stages_left
            .store(self.stages.len() as u32, Ordering::Relaxed);
        self.pending.store(0, Ordering::Relaxed);
    }

    /// The buffer of tensor `index`.
    pub(crate) fn buffer(&self, index: usize) -> Block {
        self.buffers[index]
    }

    /// Runs launch `launch` of `stage` on the calling thread.
    pub(crate) fn launch(&self, stage: StageId, launch: u32) -> Result<(), LaunchError> {
        let s = &self.stages[stage.0];
        let tile = match s.split_axis_tile {
            Some(tile) => Tile {
                begin: u64::from(launch) * tile,
                count: tile,
            },
            None => Tile {
                begin: 0,
                count: s.axis_extent,
            },
        };
        let ws = s.workspaces[launch as usize];
        // SAFETY: the buffers and workspace come from pools sized by the plan; the schedule
        // runs a launch only once its inputs are complete, gives each launch its own
        // workspace, and runs concurrent launches of one stage only on disjoint tiles.
        unsafe {
            s.state.launch(
                &s.inputs,
                &s.outputs,
                (ws.ptr.cast(), ws.bytes),
                std::ptr::null_mut(),
                tile,
            )
        }
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

    /// Counts one launch finished; true when it was the last of a frame already abandoned,
    /// which is then complete as partial.
    pub(crate) fn launch_finished(&self) -> bool {
        self.pending.fetch_sub(1, Ordering::AcqRel) == ABANDONED | 1
    }

    /// Marks the frame partial; true when no launch is running, so it is complete now.
    pub(crate) fn abandon(&self) -> bool {
        self.pending.fetch_or(ABANDONED, Ordering::AcqRel) == 0
    }

    /// Records a finished stage; true when it was the frame's last.
    pub(crate) fn finish_stage(&self) -> bool {
        self.stages_left.fetch_sub(1, Ordering::AcqRel) == 1
    }
}

/// Why a slot could not be built.
#[derive(Debug, thiserror::Error)]
pub enum SlotError {
    /// The plan has no pool for a buffer (a planner bug).
    #[error("the plan has no pool for a buffer")]
    PoolMissing,
    /// A pool had fewer blocks than the slots need (a planner bug).
    #[error("pool {0} is exhausted while building frame slots")]
    PoolExhausted(String),
    /// A kernel refused to create a state.
    #[error(transparent)]
    Create(PluginError),
}

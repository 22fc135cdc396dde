//! The static schedule: which stages follow which, and which are streamed tile by tile as the
//! source delivers packets.
//!
//! Derived once from the plan. A stage is *streamed* when it is split along the source's packet
//! axis and reads only the source tensor: each tile is launched as soon as its packets are
//! present (the range FFT starts on the first chirps of a frame while later chirps are still
//! arriving). Every other stage waits for its predecessor stages, plus the end of the frame if
//! it reads the source tensor.

use crate::model::graph::{Graph, StageId};
use crate::plan::Plan;

/// Dependencies and launch counts of every stage.
#[derive(Debug, Clone)]
pub(crate) struct Schedule {
    /// Per stage: what it waits for before its launches may start.
    pub(crate) initial_waiting: Vec<u32>,
    /// Per stage: tasks per frame. A CPU stage runs one launch per task; a GPU stage's task
    /// enqueues one tile when the source streams it ([`Schedule::per_tile`]), else all of
    /// the stage's launches, so its stream waits and whole-tensor uploads come first.
    pub(crate) tasks: Vec<u32>,
    /// Per stage: whether each task covers one launch (tile).
    pub(crate) per_tile: Vec<bool>,
    /// Per stage: stages that read its outputs.
    pub(crate) successors: Vec<Vec<StageId>>,
    /// Streamed stages with their tile size in packets.
    pub(crate) streamed: Vec<(StageId, u64)>,
    /// Non-streamed stages that read the source tensor (they wait for the frame's end).
    pub(crate) after_frame: Vec<StageId>,
    /// Packets per frame.
    pub(crate) packets: u64,
    /// Bytes of one packet in the source tensor.
    pub(crate) packet_bytes: u64,
}

impl Schedule {
    pub(crate) fn new(plan: &Plan) -> Schedule {
        let graph: &Graph = &plan.graph;
        let source = graph.source.tensor;
        let n = graph.stages.len();
        let mut initial_waiting = vec![0u32; n];
        let mut successors = vec![Vec::new(); n];
        let mut streamed = Vec::new();
        let mut after_frame = Vec::new();
        let mut tasks: Vec<u32> = plan.stages.iter().map(|s| s.launches as u32).collect();
        let mut per_tile = vec![true; n];
        for (i, stage) in graph.stages.iter().enumerate() {
            let id = StageId(i);
            let preds = graph.predecessors(id);
            for &p in &preds {
                successors[p.0].push(id);
            }
            initial_waiting[i] = preds.len() as u32;
            let reads_source = stage.inputs.contains(&source);
            let is_streamed = graph.is_streamed(id);
            if is_streamed {
                streamed.push((id, stage.split.map_or(1, |s| s.tile)));
            } else if reads_source {
                initial_waiting[i] += 1;
                after_frame.push(id);
            }
            if plan.stages[i].gpu.is_some() && !is_streamed {
                tasks[i] = 1;
                per_tile[i] = false;
            }
        }
        Schedule {
            initial_waiting,
            tasks,
            per_tile,
            successors,
            streamed,
            after_frame,
            packets: graph.source.packets(graph),
            packet_bytes: graph.source.packet_bytes(graph),
        }
    }
}

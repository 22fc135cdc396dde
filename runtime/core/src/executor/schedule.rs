//! The static schedule: which stages follow which, and which are streamed tile by tile as the
//! source delivers packets.
//!
//! Derived once from the plan and its GPU path ([`GpuPath`]). A stage is *streamed* when it is
//! split along the source's packet axis and reads only the source tensor, and the source
//! delivers packets: each tile is launched as soon as its packets are present (the range FFT
//! starts on the first chirps of a frame while later chirps are still arriving). Every other
//! stage waits for its predecessor stages, plus the end of the frame if it reads the source
//! tensor.
//!
//! On the chain, the graph's stages run as one task, its first stage's: that stage waits for
//! everything any graph stage waits for outside the graph (CPU stages, the tiled stage, the
//! frame's end), and the others are never dispatched; a graph stage's successors are its CPU
//! readers alone, released by the graph's host callbacks.

use crate::model::graph::{Graph, StageId};
use crate::plan::Plan;
use crate::plan::gpu_path::GpuPath;

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
    /// Per stage: stages that read its outputs (on the chain, a graph stage stands for the
    /// graph's first, and a graph stage has only its CPU readers).
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
    pub(crate) fn new(plan: &Plan, path: &GpuPath) -> Schedule {
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
            let is_streamed = if plan.stages[i].gpu().is_some() {
                path.streams(plan, id)
            } else {
                graph.is_streamed(id)
            };
            if is_streamed {
                streamed.push((id, stage.split.map_or(1, |s| s.tile)));
            } else if reads_source {
                initial_waiting[i] += 1;
                after_frame.push(id);
            }
            if plan.stages[i].gpu().is_some() && !is_streamed {
                tasks[i] = 1;
                per_tile[i] = false;
            }
        }
        let mut schedule = Schedule {
            initial_waiting,
            tasks,
            per_tile,
            successors,
            streamed,
            after_frame,
            packets: graph.source.packets(graph),
            packet_bytes: graph.source.packet_bytes(graph),
        };
        if let Some(chain) = &path.chain
            && let Some(lead) = chain.lead()
        {
            schedule.one_task_for(&chain.graph, lead);
        }
        schedule
    }

    /// Makes `stages` (a graph) run as one task of `lead`'s, which waits for everything they
    /// wait for from outside; edges between them are dropped.
    fn one_task_for(&mut self, stages: &[StageId], lead: StageId) {
        let inside = |s: StageId| stages.contains(&s);
        let mut waiting = 0;
        for (p, successors) in self.successors.iter_mut().enumerate() {
            let outside = !inside(StageId(p));
            let mut kept = Vec::with_capacity(successors.len());
            for &next in successors.iter() {
                match (inside(next), outside) {
                    (false, _) => kept.push(next),
                    (true, true) => {
                        waiting += 1;
                        kept.push(lead);
                    }
                    (true, false) => {}
                }
            }
            *successors = kept;
        }
        let reads_frame = self.after_frame.iter().any(|&s| inside(s));
        self.after_frame.retain(|&s| !inside(s));
        if reads_frame {
            self.after_frame.push(lead);
            waiting += 1;
        }
        for &s in stages {
            self.initial_waiting[s.0] = 0;
            self.tasks[s.0] = 0;
            self.per_tile[s.0] = false;
        }
        self.initial_waiting[lead.0] = waiting;
        self.tasks[lead.0] = 1;
    }
}

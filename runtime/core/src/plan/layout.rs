//! Laying a graph out on a placement: the pure half of planning.
//!
//! [`Layout::new`] finds every stage's placement entry, fits each split stage's tile to its
//! device ([`tiles`]), decides where every tensor lives and which cross the bus
//! (`memory::lay_out`), and sizes the pools of the tensors and their mirrors. It reads no
//! device, loads no library and creates no kernel, so it gives the same answer on every
//! machine; opening the GPUs and binding the kernels is the next step ([`super::bind`]).

use super::memory::{self, GpuWork, Lifetime, PlannedEdge};
use super::tiles::{self, TileOrigin};
use super::{PlanError, PoolPurpose, PoolSpec};
use crate::model::graph::Graph;
use crate::model::placement::{Device, Placement, StagePlacement};

/// A graph laid out on a placement: devices, tiles, memory and tensor pools, with no device
/// opened and no kernel bound.
#[derive(Debug)]
pub struct Layout {
    /// The graph, its split stages' tiles fitted to their devices.
    pub graph: Graph,
    /// The placement.
    pub placement: Placement,
    /// Every stage's placement entry, in graph order.
    pub entries: Vec<StagePlacement>,
    /// Where each split stage's tile came from, in graph order (`None` for an unsplit stage).
    pub tile_origins: Vec<Option<TileOrigin>>,
    /// One entry per graph tensor: where it lives and its mirror, if it crosses the bus.
    pub edges: Vec<PlannedEdge>,
    /// For each GPU stage, what it enqueues around its launches; `None` on the CPU.
    pub gpu_work: Vec<Option<GpuWork>>,
    /// The pools of the tensors and their mirrors (the kernels' workspaces come when they are
    /// bound).
    pub tensor_pools: Vec<PoolSpec>,
}

impl Layout {
    /// Lays `graph` out on `placement`; an error names the placement line, the stage or the
    /// tensor at fault.
    pub fn new(graph: Graph, placement: Placement) -> Result<Layout, PlanError> {
        let entries: Vec<StagePlacement> = placed_entries(&graph, &placement)?
            .into_iter()
            .cloned()
            .collect();
        let (graph, tile_origins) = tiles::place_tiles(graph, &entries, &placement.path)?;
        let (edges, gpu_work) = memory::lay_out(&graph, &devices(&entries))?;
        let tensor_pools = tensor_pools(&graph, &edges, placement.runtime.slots);
        Ok(Layout {
            graph,
            placement,
            entries,
            tile_origins,
            edges,
            gpu_work,
            tensor_pools,
        })
    }

    /// Every stage's device, in graph order.
    pub fn devices(&self) -> Vec<Device> {
        devices(&self.entries)
    }
}

fn devices(entries: &[StagePlacement]) -> Vec<Device> {
    entries.iter().map(|e| e.device).collect()
}

/// The placement entry of every graph stage, in graph order; an error for a stage without one
/// or an entry naming no stage.
fn placed_entries<'p>(
    graph: &Graph,
    placement: &'p Placement,
) -> Result<Vec<&'p StagePlacement>, PlanError> {
    for (name, entry) in &placement.stages {
        if graph.stage_by_name(name).is_none() {
            return Err(PlanError::UnknownStage {
                placement: placement.path.clone(),
                line: entry.line,
                graph: graph.path.clone(),
                stage: name.clone(),
                known: graph
                    .stages
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
    }
    graph
        .stages
        .iter()
        .map(|stage| {
            placement
                .stages
                .get(&stage.name)
                .ok_or_else(|| PlanError::Unplaced {
                    placement: placement.path.clone(),
                    graph: graph.path.clone(),
                    stage: stage.name.clone(),
                    line: stage.line,
                })
        })
        .collect::<Result<Vec<_>, _>>()
}

/// One pool per tensor where its writer writes it, and one per mirror, `slots` blocks each
/// (one for a constant, which every slot reads).
fn tensor_pools(graph: &Graph, edges: &[PlannedEdge], slots: usize) -> Vec<PoolSpec> {
    let mut pools = Vec::new();
    for (edge, t) in edges.iter().zip(&graph.tensors) {
        let slots = match edge.lifetime {
            Lifetime::Run => 1,
            Lifetime::Slot | Lifetime::Stages => slots,
        };
        pools.push(PoolSpec {
            name: t.name.clone(),
            purpose: PoolPurpose::Tensor(edge.tensor),
            space: edge.space,
            block_bytes: t.bytes,
            blocks: slots,
        });
        if let Some(mirror) = edge.mirror {
            pools.push(PoolSpec {
                name: format!("{}.mirror", t.name),
                purpose: PoolPurpose::Mirror(edge.tensor),
                space: mirror.space,
                block_bytes: t.bytes,
                blocks: slots,
            });
        }
    }

    pools
}

/// The pools `graph`'s tensors and mirrors need on `placement`, without the kernels'
/// workspaces (known only once the kernels are created): what a caller can check against
/// memory, with what else it holds, before preparing anything CPI-sized.
pub fn tensor_pools_for(graph: &Graph, placement: &Placement) -> Result<Vec<PoolSpec>, PlanError> {
    let entries = placed_entries(graph, placement)?;
    let devices: Vec<Device> = entries.iter().map(|e| e.device).collect();
    let (edges, _) = memory::lay_out(graph, &devices)?;
    Ok(tensor_pools(graph, &edges, placement.runtime.slots))
}

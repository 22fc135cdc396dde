//! How a lane's GPU stages reach their device each frame, and how many driver calls and host
//! callbacks that costs the host.
//!
//! Two paths. On the *chain*, every GPU stage of a slot enqueues on one stream (the first GPU
//! stage's), so stream order alone orders them: no event is recorded and no stream waits. The
//! stages that need a frame's data whole form the slot's *graph*, captured once per slot at
//! start (uploads, kernel-library launches, downloads, and host callbacks where a CPU stage or
//! the frame's completion waits) and launched with one call per frame; a stage streamed tile by
//! tile as packets arrive enqueues each tile's upload and launch on the same stream, ahead of
//! the graph. On the path *without a graph*, each GPU stage enqueues its own work on its own
//! stream every frame (waits on its producers' events, uploads, launches, downloads, its event
//! and its host callback). A plan takes the chain unless something rules it out ([`NoGraph`]):
//! the placement, profiling, a stateful GPU stage, GPU stages on several devices, or a CPU
//! stage between two GPU stages.
//!
//! When the source delivers whole frames prepared in memory (a replay, [`Delivery::Frames`])
//! and only a GPU stage reads the source tensor, the source stages its frames once where that
//! GPU copies from, and each frame's upload reads the staged frame: no thread copies a frame's
//! bytes. The upload's address changes with the frame, so it is enqueued ahead of the graph, not
//! captured in it.
//!
//! Pure, as [`super::layout`] is: decided from the plan, the delivery and whether the run
//! profiles the GPU, reading no device; `kplace plan` shows it on any machine, the executor
//! runs what it says, and [`GpuPath::per_frame`] states the count that the simulated GPU's
//! tests measure. Guarantees: a chain holds every GPU stage of the plan, each finished by
//! exactly one host callback, which runs after everything the stage enqueued; a stage with a
//! CPU reader is finished by a callback right after its work; a graph's last callback ends
//! the frame's GPU work. docs/gpu.md derives each placement's count.

use std::fmt;

use crate::model::graph::StageId;
use crate::model::placement::Device;

use super::Plan;

/// How a source hands frames to the executor.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Delivery {
    /// Packet by packet as they arrive (a receiver): a stage split along the packet axis starts
    /// on each tile as soon as its packets are present.
    #[default]
    Packets,
    /// Whole, from frames prepared in memory before the run (a replay): the source may stage
    /// them once where the GPU copies from, and no stage needs to start before a frame is
    /// whole.
    Frames,
}

/// Why a plan's GPU stages each enqueue on their own stream rather than on the chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoGraph {
    /// The placement turned graphs off (`runtime: {gpu_graphs: false}`).
    Off,
    /// The run times each launch on the GPU (`--profile-gpu`) with events around it.
    Profiled,
    /// A GPU stage is stateful: its stream waits for the stage of the frame before, whose
    /// slot changes from frame to frame, and its carry may move between placements.
    Stateful(String),
    /// The GPU stages are on more than one device.
    Devices,
    /// A CPU stage reads a GPU stage's output and a GPU stage reads the CPU stage's: a graph
    /// cannot wait for the host in the middle of a frame.
    CpuBetween {
        /// The CPU stage.
        cpu: String,
        /// A GPU stage before it.
        before: String,
        /// A GPU stage after it.
        after: String,
    },
    /// Capturing a slot's graph failed when the run started (a kernel library that does
    /// something a capture refuses); the run went on without graphs.
    Capture(String),
}

impl fmt::Display for NoGraph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NoGraph::Off => f.write_str("the placement turns graphs off (runtime.gpu_graphs)"),
            NoGraph::Profiled => f.write_str(
                "--profile-gpu times each launch with events, which only a stage's own stream \
                 records",
            ),
            NoGraph::Stateful(stage) => write!(
                f,
                "stage {stage} is stateful: its stream waits for the frame before, in another \
                 slot, and its carry may move between placements"
            ),
            NoGraph::Devices => f.write_str("the GPU stages are on more than one GPU"),
            NoGraph::CpuBetween { cpu, before, after } => write!(
                f,
                "stage {cpu} runs on the CPU between GPU stages {before} and {after}: a graph \
                 cannot wait for the host mid-frame"
            ),
            NoGraph::Capture(cause) => write!(f, "capturing a slot's graph failed: {cause}"),
        }
    }
}

/// A host callback of the chain: enqueued after the work of the stages it finishes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainCallback {
    /// The stages it finishes: their CPU readers are released, and they count as done.
    pub finishes: Vec<StageId>,
    /// Whether it ends the task that enqueued it: a frame's GPU work is in flight until then.
    pub ends_task: bool,
}

/// Every GPU stage of a slot on one stream: a streamed stage tile by tile, then the graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chain {
    /// The GPU stage whose stream, in each slot, carries the whole chain: the first GPU stage.
    pub stream: StageId,
    /// The GPU stage streamed tile by tile as packets complete, when the source delivers
    /// packets: each tile's upload and launch are enqueued when its packets are present.
    pub tiles: Option<StageId>,
    /// The tiled stage's own callback, after its last tile and its downloads: when a CPU
    /// stage reads it, or no graph stage does (then the graph may be launched before it).
    /// Otherwise the graph's last callback finishes it.
    pub tiles_callback: Option<ChainCallback>,
    /// The graph's stages in capture order (the graph's order); empty when the tiled stage
    /// is the only GPU stage. The first one's task launches the graph.
    pub graph: Vec<StageId>,
    /// The graph's host callbacks, each after the stage at this index of `graph` (and its
    /// downloads); the last ends the task that launched the graph.
    pub callbacks: Vec<(usize, ChainCallback)>,
}

impl Chain {
    /// The stage whose task launches the graph, if there is a graph.
    pub fn lead(&self) -> Option<StageId> {
        self.graph.first().copied()
    }
}

/// What the host enqueues on a GPU per frame.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Calls {
    /// Driver calls that enqueue: copies, event records, stream waits, host callbacks,
    /// kernel-library launches (each of which enqueues a few kernels of its own) and graph
    /// launches (one each, whatever the graph holds).
    pub driver_calls: u64,
    /// Of those, graph launches.
    pub graph_launches: u64,
    /// Host callbacks that run per frame (a graph's included).
    pub callbacks: u64,
}

/// How a lane's GPU stages reach their device each frame (see the [module docs](self)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuPath {
    /// Whether each frame's source tensor is uploaded from where the source staged the frame
    /// (whole frames, read by a GPU stage alone): no stage is streamed then.
    pub staged: bool,
    /// Why a source that delivers whole frames still writes them into the slot packet by
    /// packet, when it does (a CPU stage or the sink reads them, or no GPU does).
    pub not_staged: Option<String>,
    /// The chain, unless ruled out.
    pub chain: Option<Chain>,
    /// Why there is no chain, when the plan has GPU stages.
    pub no_graph: Option<NoGraph>,
}

impl GpuPath {
    /// The path of `plan`'s GPU stages for a source that delivers `delivery`, in a run that
    /// profiles the GPU or not.
    pub fn new(plan: &Plan, delivery: Delivery, profiled: bool) -> GpuPath {
        let (staged, not_staged) = match delivery {
            Delivery::Packets => (false, None),
            Delivery::Frames => match why_not_staged(plan) {
                None => (true, None),
                Some(reason) => (false, Some(reason)),
            },
        };
        let gpu_stages = gpu_stages(plan);
        if gpu_stages.is_empty() {
            return GpuPath {
                staged: false,
                not_staged,
                chain: None,
                no_graph: None,
            };
        }
        let (chain, no_graph) = match why_no_graph(plan, profiled) {
            Some(reason) => (None, Some(reason)),
            None => (Some(chain(plan, &gpu_stages, staged)), None),
        };
        GpuPath {
            staged,
            not_staged,
            chain,
            no_graph,
        }
    }

    /// The same path without a graph, for `reason` (a capture that failed at start).
    pub fn without_graph(&self, reason: NoGraph) -> GpuPath {
        GpuPath {
            chain: None,
            no_graph: Some(reason),
            ..self.clone()
        }
    }

    /// Whether GPU stage `stage` is streamed tile by tile: on the path without a graph, as the
    /// graph says unless frames are staged; on the chain, when it is the tiled stage.
    pub fn streams(&self, plan: &Plan, stage: StageId) -> bool {
        match &self.chain {
            Some(chain) => chain.tiles == Some(stage),
            None => !self.staged && plan.graph.is_streamed(stage),
        }
    }

    /// What the host enqueues on the GPU per frame once the run has settled (a stateful stage
    /// past its first frame), with `profiled` the timing events of the path without a graph.
    pub fn per_frame(&self, plan: &Plan, profiled: bool) -> Calls {
        let mut calls = Calls::default();
        // A split upload goes piece by piece, one before each launch; a whole one, or the
        // staged frame, in one copy.
        let uploads = |s: StageId| -> u64 {
            let planned = &plan.stages[s.0];
            let work = planned.gpu();
            work.map_or(0, |w| {
                w.uploads
                    .iter()
                    .map(|&t| {
                        let pieces = plan.edges[t.0].mirror.map_or(1, |m| m.transfer.pieces);
                        let staged = self.staged && t == plan.graph.source.tensor;
                        if pieces > 1 && !staged {
                            planned.launches
                        } else {
                            1
                        }
                    })
                    .sum()
            })
        };
        let downloads = |s: StageId| plan.stages[s.0].gpu().map_or(0, |w| w.downloads.len()) as u64;
        match &self.chain {
            Some(chain) => {
                if let Some(t) = chain.tiles {
                    calls.driver_calls += uploads(t) + plan.stages[t.0].launches + downloads(t);
                }
                if chain.tiles_callback.is_some() {
                    calls.driver_calls += 1;
                    calls.callbacks += 1;
                }
                if !chain.graph.is_empty() {
                    calls.driver_calls += 1;
                    calls.graph_launches += 1;
                    calls.callbacks += chain.callbacks.len() as u64;
                    if self.staged && chain.graph.iter().any(|&s| reads_source(plan, s)) {
                        // The staged frame's upload, ahead of the graph.
                        calls.driver_calls += 1;
                    }
                }
            }
            None => {
                for s in gpu_stages(plan) {
                    let planned = &plan.stages[s.0];
                    let work = planned.gpu();
                    let tiled = self.streams(plan, s);
                    let waits = if tiled {
                        0
                    } else {
                        work.map_or(0, |w| w.waits.len() as u64)
                    } + u64::from(planned.carry.is_some());
                    let timing = if profiled {
                        2 * planned.launches + 2 * u64::from(downloads(s) > 0)
                    } else {
                        0
                    };
                    // Its event and its host callback.
                    calls.driver_calls +=
                        waits + uploads(s) + planned.launches + downloads(s) + 2 + timing;
                    calls.callbacks += 1;
                }
            }
        }
        calls
    }
}

/// The plan's GPU stages, in graph order.
pub(crate) fn gpu_stages(plan: &Plan) -> Vec<StageId> {
    plan.stages
        .iter()
        .filter(|s| matches!(s.device(), Device::Gpu(_)))
        .map(|s| s.stage)
        .collect()
}

pub(crate) fn reads_source(plan: &Plan, stage: StageId) -> bool {
    plan.graph
        .stage(stage)
        .inputs
        .contains(&plan.graph.source.tensor)
}

fn is_gpu(plan: &Plan, stage: StageId) -> bool {
    matches!(plan.stages[stage.0].device(), Device::Gpu(_))
}

/// Whether a CPU stage reads an output of `stage`.
pub(crate) fn has_cpu_reader(plan: &Plan, stage: StageId) -> bool {
    plan.graph
        .stage(stage)
        .outputs
        .iter()
        .flat_map(|&t| plan.graph.consumers(t))
        .any(|reader| !is_gpu(plan, reader))
}

/// Why whole frames cannot be staged for the GPU that reads them, if they cannot.
fn why_not_staged(plan: &Plan) -> Option<String> {
    let graph = &plan.graph;
    let source = graph.source.tensor;
    let name = &graph.tensor(source).name;
    if graph.sinks.contains(&source) {
        return Some(format!("the sink reads {name}"));
    }
    let readers: Vec<StageId> = graph.consumers(source).collect();
    if let Some(&cpu) = readers.iter().find(|&&s| !is_gpu(plan, s)) {
        return Some(format!(
            "stage {} reads {name} on the CPU",
            graph.stage(cpu).name
        ));
    }
    if readers.is_empty() {
        return Some(format!("no stage reads {name}"));
    }
    None
}

/// Why the plan's GPU stages cannot take the chain, if they cannot.
fn why_no_graph(plan: &Plan, profiled: bool) -> Option<NoGraph> {
    if !plan.runtime.gpu_graphs {
        return Some(NoGraph::Off);
    }
    if profiled {
        return Some(NoGraph::Profiled);
    }
    let gpu_stages = gpu_stages(plan);
    let name = |s: StageId| plan.graph.stage(s).name.clone();
    if let Some(&s) = gpu_stages.iter().find(|s| plan.stages[s.0].carry.is_some()) {
        return Some(NoGraph::Stateful(name(s)));
    }
    let device = plan.stages[gpu_stages[0].0].device();
    if gpu_stages
        .iter()
        .any(|s| plan.stages[s.0].device() != device)
    {
        return Some(NoGraph::Devices);
    }
    // A GPU stage before each stage (one of them), and after: stages come after their
    // producers, so one pass each way finds them.
    let n = plan.stages.len();
    let mut gpu_before: Vec<Option<StageId>> = vec![None; n];
    for i in 0..n {
        for p in plan.graph.predecessors(StageId(i)) {
            let found = if is_gpu(plan, p) {
                Some(p)
            } else {
                gpu_before[p.0]
            };
            gpu_before[i] = gpu_before[i].or(found);
        }
    }
    let mut gpu_after: Vec<Option<StageId>> = vec![None; n];
    for i in (0..n).rev() {
        for p in plan.graph.predecessors(StageId(i)) {
            let found = if is_gpu(plan, StageId(i)) {
                Some(StageId(i))
            } else {
                gpu_after[i]
            };
            gpu_after[p.0] = gpu_after[p.0].or(found);
        }
    }
    for i in (0..n).map(StageId) {
        if let (false, Some(before), Some(after)) =
            (is_gpu(plan, i), gpu_before[i.0], gpu_after[i.0])
        {
            return Some(NoGraph::CpuBetween {
                cpu: name(i),
                before: name(before),
                after: name(after),
            });
        }
    }
    None
}

/// The chain of `gpu_stages` (see [`Chain`]).
fn chain(plan: &Plan, gpu_stages: &[StageId], staged: bool) -> Chain {
    let tiles = (!staged)
        .then(|| {
            gpu_stages
                .iter()
                .copied()
                .find(|&s| plan.graph.is_streamed(s))
        })
        .flatten();
    let graph: Vec<StageId> = gpu_stages
        .iter()
        .copied()
        .filter(|&s| Some(s) != tiles)
        .collect();
    // The graph is launched after the tiled stage's last tile only when a graph stage reads
    // it; otherwise, or when the CPU reads it, it has a callback of its own.
    let read_by_graph = tiles.is_some_and(|t| {
        graph
            .iter()
            .any(|&s| plan.graph.predecessors(s).contains(&t))
    });
    let tiles_callback = tiles
        .filter(|&t| has_cpu_reader(plan, t) || !read_by_graph)
        .map(|t| ChainCallback {
            finishes: vec![t],
            ends_task: true,
        });
    let mut callbacks: Vec<(usize, ChainCallback)> = Vec::new();
    let mut unfinished: Vec<StageId> = Vec::new();
    for (i, &s) in graph.iter().enumerate() {
        unfinished.push(s);
        if has_cpu_reader(plan, s) || i + 1 == graph.len() {
            let mut finishes = std::mem::take(&mut unfinished);
            let last = i + 1 == graph.len();
            if last && let Some(t) = tiles.filter(|_| tiles_callback.is_none()) {
                finishes.insert(0, t);
            }
            callbacks.push((
                i,
                ChainCallback {
                    finishes,
                    ends_task: last,
                },
            ));
        }
    }
    Chain {
        stream: gpu_stages[0],
        tiles,
        tiles_callback,
        graph,
        callbacks,
    }
}

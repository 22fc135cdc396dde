//! Building a [`Slot`] from the plan: its buffers and mirrors from the pools, one kernel state
//! per stage, for each GPU stage its stream, fence, waits, copies and (when profiling) timing
//! events, the host callbacks of the path the plan chose, and on the chain the slot's graph,
//! captured last.
//!
//! Guarantees: everything is owned as soon as it is made, so an error anywhere releases
//! whatever was made before it; nothing is built once the run has started.

use std::cell::UnsafeCell;

use std::sync::Arc;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64};

use kplace_abi::Tensor;

use super::gpu::{Callback, MirrorCopy, SlotChain, SlotGpu};
use super::{SetPort, Slot, SlotStage};
use crate::cuda::owned::{OwnedEvent, OwnedStream};
use crate::cuda::{Event, Gpu, GpuError, HostFn, Stream};
use crate::executor::constants::Constants;
use crate::executor::pool::{Block, Pool};
use crate::executor::schedule::Schedule;
use crate::executor::scratch::{UNBOUND, take};
use crate::executor::slot_error::SlotError;
use crate::model::graph::{Producer, StageSpec, TensorId};
use crate::model::placement::Device;
use crate::plan::gpu_path::{Chain, GpuPath, reads_source};
use crate::plan::{GpuWork, PlannedStage, StageOn};
use crate::plan::{Lifetime, Plan, PoolPurpose, tensor_desc};

/// The slot's blocks by tensor: each tensor's home (none for one from the frame's set) and its
/// mirror (none when it does not cross the bus).
struct Blocks {
    buffers: Vec<Option<Block>>,
    mirrors: Vec<Option<Block>>,
}

impl Blocks {
    /// Takes every home that lives as long as the slot, and every mirror, from `pools`; a
    /// constant's are the run's, from `constants`.
    fn take(plan: &Plan, pools: &mut [Pool], constants: &Constants) -> Result<Blocks, SlotError> {
        let buffers = plan
            .edges
            .iter()
            .map(|e| match e.lifetime {
                Lifetime::Slot => take(plan, pools, PoolPurpose::Tensor(e.tensor)).map(Some),
                Lifetime::Stages => Ok(None),
                Lifetime::Run => constants
                    .home(e.tensor)
                    .ok_or(SlotError::PoolMissing)
                    .map(Some),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mirrors = plan
            .edges
            .iter()
            .map(|e| match (e.mirror, e.lifetime) {
                (None, _) => Ok(None),
                (Some(_), Lifetime::Run) => constants
                    .mirror(e.tensor)
                    .ok_or(SlotError::PoolMissing)
                    .map(Some),
                (Some(_), _) => take(plan, pools, PoolPurpose::Mirror(e.tensor)).map(Some),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Blocks { buffers, mirrors })
    }

    /// What a stage on `device` sees of tensor `id`: its home or its mirror, or, for a tensor
    /// in the frame's set, a null address to be filled in per launch.
    fn tensor(&self, plan: &Plan, id: TensorId, device: Device) -> Result<Tensor, SlotError> {
        let edge = &plan.edges[id.0];
        let space = edge.space_for(device);
        let block = if space == edge.space {
            self.buffers[id.0]
        } else {
            Some(self.mirrors[id.0].ok_or(SlotError::PoolMissing)?)
        };
        Ok(Tensor {
            desc: tensor_desc(plan.graph.tensor(id), space),
            data: block.map_or(std::ptr::null_mut(), |b| b.ptr.cast()),
        })
    }

    /// Per tensor, the buffer the host reads: its home, or its mirror when the home is device
    /// memory; `None` for a tensor from the frame's set.
    fn host_views(&self, plan: &Plan) -> Result<Vec<Option<Block>>, SlotError> {
        plan.edges
            .iter()
            .map(|e| {
                if e.host_space() == e.space {
                    Ok(self.buffers[e.tensor.0])
                } else {
                    self.mirrors[e.tensor.0]
                        .map(Some)
                        .ok_or(SlotError::PoolMissing)
                }
            })
            .collect()
    }

    /// The copy of tensor `t`'s home into its mirror, which every transfer is.
    fn copy(&self, plan: &Plan, t: TensorId) -> Result<MirrorCopy, SlotError> {
        let edge = &plan.edges[t.0];
        let mirror = self.mirrors[t.0].ok_or(SlotError::PoolMissing)?;
        let home = self.buffers[t.0].ok_or(SlotError::PoolMissing)?;
        let pieces = edge.mirror.map_or(1, |m| m.transfer.pieces);
        Ok(MirrorCopy {
            dst: mirror.ptr,
            src: home.ptr,
            bytes: plan.graph.tensor(t).bytes as usize,
            pieces,
            source: t == plan.graph.source.tensor,
        })
    }
}

/// A stream and its fence event for every GPU stage, in stage order (`None` for a CPU stage).
fn fences(plan: &Plan) -> Result<Vec<Option<(OwnedStream, OwnedEvent)>>, SlotError> {
    let mut fences = Vec::with_capacity(plan.stages.len());
    for planned in &plan.stages {
        fences.push(match (&planned.on, plan.gpu_of(planned.stage)) {
            (StageOn::Gpu { priority, .. }, Some(gpu)) => {
                gpu.bind_thread().map_err(SlotError::Gpu)?;
                let stream = OwnedStream::new(gpu, *priority).map_err(SlotError::Gpu)?;
                let event = OwnedEvent::fence(gpu).map_err(SlotError::Gpu)?;
                Some((stream, event))
            }
            _ => None,
        });
    }
    Ok(fences)
}

/// The launch arguments of `spec` whose buffers come from the frame's set.
fn set_ports(plan: &Plan, spec: &StageSpec) -> Vec<SetPort> {
    let mut from_set = Vec::new();
    for (output, tensors) in [(false, &spec.inputs), (true, &spec.outputs)] {
        for (index, &tensor) in tensors.iter().enumerate() {
            if plan.edges[tensor.0].lifetime == Lifetime::Stages {
                from_set.push(SetPort {
                    output,
                    index,
                    tensor,
                });
            }
        }
    }
    from_set
}

/// A GPU stage's part of a slot: its stream and fence, the fences of the stages it waits on,
/// its copies, and with `profile` its timing events.
struct GpuStage<'a> {
    planned: &'a PlannedStage,
    work: &'a GpuWork,
    gpu: &'a Arc<dyn Gpu>,
    stream: OwnedStream,
    event: OwnedEvent,
}

impl GpuStage<'_> {
    fn build(
        self,
        plan: &Plan,
        schedule: &Schedule,
        blocks: &Blocks,
        raw_fences: &[Option<Event>],
        profile: bool,
        callback: Option<usize>,
    ) -> Result<SlotGpu, SlotError> {
        let GpuStage {
            planned,
            work,
            gpu,
            stream,
            event,
        } = self;
        let waits = work
            .waits
            .iter()
            .map(|&t| match plan.graph.tensor(t).producer {
                Producer::Stage(p) => raw_fences[p.0].ok_or(SlotError::PoolMissing),
                Producer::Source | Producer::Constant => Err(SlotError::PoolMissing),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let pairs = if profile {
            planned.launches as usize + usize::from(!work.downloads.is_empty())
        } else {
            0
        };
        let timing = (0..pairs)
            .map(|_| Ok((OwnedEvent::timing(gpu)?, OwnedEvent::timing(gpu)?)))
            .collect::<Result<Vec<_>, GpuError>>()
            .map_err(SlotError::Gpu)?;
        Ok(SlotGpu {
            gpu: Arc::clone(gpu),
            stream,
            event,
            waits,
            timing,
            callback_ns: AtomicU64::new(0),
            uploads: work
                .uploads
                .iter()
                .map(|&t| blocks.copy(plan, t))
                .collect::<Result<_, _>>()?,
            downloads: work
                .downloads
                .iter()
                .map(|&t| blocks.copy(plan, t))
                .collect::<Result<_, _>>()?,
            per_tile: schedule.per_tile[planned.stage.0],
            callback,
            enqueued_through: AtomicU64::new(0),
        })
    }
}

/// The host callbacks of slot `index` on `path`: without a graph one per GPU stage, on the
/// chain the tiled stage's own and the graph's. Returns them, each GPU stage's own callback,
/// and which of them the graph holds, in order.
fn callbacks(
    plan: &Plan,
    path: &GpuPath,
    index: usize,
) -> (Box<[Callback]>, Vec<Option<usize>>, Vec<usize>) {
    let mut callbacks = Vec::new();
    let mut own = vec![None; plan.stages.len()];
    let mut graph = Vec::new();
    match &path.chain {
        None => {
            for s in crate::plan::gpu_path::gpu_stages(plan) {
                own[s.0] = Some(callbacks.len());
                callbacks.push(Callback::new(index, vec![s], true));
            }
        }
        Some(chain) => {
            if let (Some(t), Some(c)) = (chain.tiles, &chain.tiles_callback) {
                own[t.0] = Some(callbacks.len());
                callbacks.push(Callback::new(index, c.finishes.clone(), c.ends_task));
            }
            for (_, c) in &chain.callbacks {
                graph.push(callbacks.len());
                callbacks.push(Callback::new(index, c.finishes.clone(), c.ends_task));
            }
        }
    }
    (callbacks.into_boxed_slice(), own, graph)
}

/// What every slot of a lane is built from.
pub(crate) struct SlotSpec<'a> {
    pub(crate) plan: &'a Plan,
    /// The run's constants, whose blocks every slot shares.
    pub(crate) constants: &'a Constants,
    pub(crate) schedule: &'a Schedule,
    /// The GPU path the lane's slots enqueue on.
    pub(crate) path: &'a GpuPath,
    /// Whether each GPU stage gets timing events ([`Slot::gpu_time`]).
    pub(crate) profile: bool,
    /// The function of every host callback a slot enqueues.
    pub(crate) callback: HostFn,
}

impl Slot {
    /// Builds slot `index` as `spec` says, taking blocks from `pools` and creating one kernel
    /// state per stage, for the spec's GPU path: on the chain, the slot's graph is captured
    /// last. When profiling, each GPU stage also gets a pair of timing events per launch (and
    /// one around its downloads) for [`Slot::gpu_time`]. A capture that fails is
    /// [`SlotError::Graph`], which a run may retry without graphs.
    pub(crate) fn new(
        spec: &SlotSpec<'_>,
        pools: &mut [Pool],
        index: usize,
    ) -> Result<Slot, SlotError> {
        let &SlotSpec {
            plan,
            constants,
            schedule,
            path,
            profile,
            callback: func,
        } = spec;
        let graph = &plan.graph;
        let blocks = Blocks::take(plan, pools, constants)?;
        // Streams and events first: a stage's waits name its producers' events. Each is owned,
        // so an error anywhere below releases whatever was made.
        let mut fences = fences(plan)?;
        // The raw fence of every GPU stage, for the waits of the stages that read its outputs.
        let raw_fences: Vec<Option<Event>> = fences
            .iter()
            .map(|f| f.as_ref().map(|(_, event)| event.raw()))
            .collect();
        let raw_streams: Vec<Option<Stream>> = fences
            .iter()
            .map(|f| f.as_ref().map(|(stream, _)| stream.raw()))
            .collect();
        let (callbacks, own_callbacks, graph_callbacks) = callbacks(plan, path, index);
        let mut stages: Vec<SlotStage> = Vec::with_capacity(plan.stages.len());
        for planned in &plan.stages {
            let spec = graph.stage(planned.stage);
            let state = plan
                .create_state(planned.stage)
                .map_err(SlotError::Create)?;
            // A CPU stage's launches use their worker's workspace.
            let workspaces = match planned.device() {
                Device::Cpu => Vec::new(),
                Device::Gpu(_) => (0..planned.launches)
                    .map(|_| take(plan, pools, PoolPurpose::Workspace(planned.stage)))
                    .collect::<Result<Vec<_>, _>>()?,
            };
            let from_set = set_ports(plan, spec);
            if planned.device() != Device::Cpu && !from_set.is_empty() {
                // The planner gives every tensor a GPU touches a slot's buffer.
                return Err(SlotError::PoolMissing);
            }
            let axis_extent = match spec.split {
                Some(s) => graph.tensor(spec.inputs[0]).shape[s.axis],
                None => graph.tensor(spec.inputs[0]).shape[0],
            };
            let gpu = match (
                &planned.gpu(),
                plan.gpu_of(planned.stage),
                fences[planned.stage.0].take(),
            ) {
                (Some(work), Some(gpu), Some((stream, event))) => Some(
                    GpuStage {
                        planned,
                        work,
                        gpu,
                        stream,
                        event,
                    }
                    .build(
                        plan,
                        schedule,
                        &blocks,
                        &raw_fences,
                        profile,
                        own_callbacks[planned.stage.0],
                    )?,
                ),
                _ => None,
            };
            let tensors = |ports: &[TensorId]| {
                ports
                    .iter()
                    .map(|&t| blocks.tensor(plan, t, planned.device()))
                    .collect::<Result<Vec<_>, _>>()
            };
            stages.push(SlotStage {
                state: UnsafeCell::new(state),
                inputs: tensors(&spec.inputs)?,
                outputs: tensors(&spec.outputs)?,
                from_set,
                workspaces,
                launches: planned.launches as u32,
                split_axis_tile: spec.split.map(|s| s.tile),
                axis_extent,
                gpu,
            });
        }
        let host_views = blocks.host_views(plan)?;
        let Blocks { buffers, .. } = blocks;
        let home = plan.graph.source.tensor;
        let own_source = buffers[home.0].map_or(std::ptr::null_mut(), |b| b.ptr);
        let chain = path.chain.as_ref();
        let chain_stream = match chain {
            Some(c) => Some(raw_streams[c.stream.0].ok_or_else(|| SlotError::Graph {
                stage: None,
                cause: "the chain's first GPU stage has no stream (an executor bug)".into(),
            })?),
            None => None,
        };
        let mut slot = Slot {
            chain: chain.zip(chain_stream).map(|(chain, stream)| SlotChain {
                stream,
                graph: None,
                tiles: chain.tiles,
                staged_reader: chain
                    .graph
                    .iter()
                    .copied()
                    .find(|&s| path.staged && reads_source(plan, s)),
            }),
            callbacks,
            graph_callbacks,
            staged: path.staged,
            source_from: AtomicPtr::new(own_source),
            buffers,
            host_views,
            set: AtomicU32::new(UNBOUND),
            waiting: schedule
                .initial_waiting
                .iter()
                .map(|&w| AtomicU32::new(w))
                .collect(),
            launches_left: schedule.tasks.iter().map(|&l| AtomicU32::new(l)).collect(),
            stages_left: AtomicU32::new(stages.len() as u32),
            pending: AtomicU32::new(0),
            stages,
            frame_id: AtomicU64::new(0),
            sequence: AtomicU64::new(0),
            first_packet_ns: AtomicU64::new(0),
            last_packet_ns: AtomicU64::new(0),
        };
        if let (Some(chain), Some(stream)) = (chain, chain_stream) {
            slot.capture_chain(plan, chain, stream, func)?;
        }
        Ok(slot)
    }

    /// Captures the slot's graph on the chain's `stream`, when the chain has a graph stage.
    fn capture_chain(
        &mut self,
        plan: &Plan,
        chain: &Chain,
        stream: Stream,
        func: HostFn,
    ) -> Result<(), SlotError> {
        let Some(lead) = chain.lead() else {
            return Ok(());
        };
        let gpu = plan.gpu_of(lead).ok_or_else(|| SlotError::Graph {
            stage: Some(plan.graph.stage(lead).name.clone()),
            cause: "the stage has no GPU (a planner bug)".into(),
        })?;
        let captured = self.capture(plan, chain, gpu, stream, func)?;
        if let Some(c) = self.chain.as_mut() {
            c.graph = Some((lead, captured));
        }
        Ok(())
    }
}

//! What a run builds before its threads start: the pools and, from them, the sets of stage
//! buffers, the frame slots and the workers' scratch memory ([`Built`]); the channels between
//! the threads ([`Channels`]), each bounded by all it can ever hold so that no send blocks;
//! and the state a lane's threads share ([`Shared`]): what the lane owns ([`LaneParts`])
//! wired into its run ([`LaneWiring`]).
//!
//! Guarantees: every allocation of a run happens here, before its first frame; a lane whose
//! slots' graphs cannot be captured is built again without graphs; placements that cannot
//! be switched between are refused ([`NotAdaptable`]) before anything is built.

use std::sync::OnceLock;
use std::sync::atomic::Ordering;

use crossbeam::channel::{self, Receiver, Sender};

use super::carry::{GpuBlocks, LaneCarry};
use super::constants::Constants;
use super::control::Control;
use super::pool::Pool;
use super::schedule::Schedule;
use super::scratch::{FrameSets, WorkerScratch, take};
use super::slot::{Slot, SlotSpec};
use super::slot_error::SlotError;
use super::turnstile::At;
use super::{Common, Event, RunError, RunOptions, Shared, Task, wait};
use crate::cuda::HostFn;
use crate::measure::trace::SpanBuffer;
use crate::model::placement::Device;
use crate::plan::gpu_path::{Delivery, GpuPath, NoGraph};
use crate::plan::{Plan, PoolPurpose};

/// What a lane allocates before the run starts: the pools, and from them what the lane owns
/// (its sets of stage buffers, frame slots and carries) and the workers' scratch memory.
pub(super) struct Built {
    /// What the lane's threads share, once wired into the run ([`Shared::new`]).
    pub(super) parts: LaneParts,
    /// Every block the parts and the scratches use: kept until the run's lanes are dropped.
    pub(super) pools: Vec<Pool>,
    /// One per worker of the lane.
    pub(super) scratches: Vec<WorkerScratch>,
}

/// What a lane owns: how its GPU stages reach their device, the order of its stages, its frame
/// slots, its sets of stage buffers and its stateful stages' carries.
pub(super) struct LaneParts {
    /// How the lane's GPU stages reach their device each frame.
    pub(super) path: GpuPath,
    pub(super) schedule: Schedule,
    pub(super) slots: Vec<Slot>,
    /// The buffers of the tensors that live only while a frame's stages run.
    pub(super) sets: FrameSets,
    /// Per stage: a stateful stage's carry in this lane.
    pub(super) carries: Vec<Option<LaneCarry>>,
}

/// What a lane is wired to in its run.
pub(super) struct LaneWiring<'a, 'p> {
    /// The lane's own task queues (the free slots are the source's).
    pub(super) channels: &'a Channels,
    /// The run's one channel to the collector.
    pub(super) events: &'a Sender<Event>,
    /// What every lane of the run shares.
    pub(super) common: &'p Common,
    /// The lane's place among the run's lanes.
    pub(super) index: usize,
    /// The spans each thread may keep.
    pub(super) span_limit: usize,
}

impl Built {
    /// What a lane running `plan` allocates, for a source that delivers `delivery`;
    /// `several` when the run has other lanes, which a stateful GPU stage's carry may move to.
    /// When a slot's graph cannot be captured, the lane is built again without graphs, and
    /// says why.
    pub(super) fn new(
        plan: &Plan,
        options: &RunOptions,
        several: bool,
        delivery: Delivery,
    ) -> Result<Built, RunError> {
        let path = GpuPath::new(plan, delivery, options.profile_gpu);
        match Built::on_path(plan, options, several, path.clone()) {
            Err(RunError::Slot(e @ SlotError::Graph { .. })) => {
                let reason = NoGraph::Capture(e.to_string());
                tracing::warn!(
                    "placement {}: {reason}; every GPU stage enqueues its own work on its own \
                     stream instead (runtime.gpu_graphs: false says so up front)",
                    plan.placement.name
                );
                Built::on_path(plan, options, several, path.without_graph(reason))
            }
            built => built,
        }
    }

    fn on_path(
        plan: &Plan,
        options: &RunOptions,
        several: bool,
        path: GpuPath,
    ) -> Result<Built, RunError> {
        let schedule = Schedule::new(plan, &path);
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
        let constants = Constants::new(plan, &mut pools)?;
        let spec = SlotSpec {
            plan,
            constants: &constants,
            schedule: &schedule,
            path: &path,
            profile: options.profile_gpu,
            callback: super::gpu::gpu_stage_done as HostFn,
        };
        let slots = (0..plan.runtime.slots)
            .map(|index| Slot::new(&spec, &mut pools, index))
            .collect::<Result<Vec<_>, _>>()?;
        let scratches = (0..plan.runtime.workers)
            .map(|_| WorkerScratch::new(plan, &mut pools))
            .collect::<Result<Vec<_>, _>>()?;
        let carries = plan
            .stages
            .iter()
            .map(|p| {
                p.carry
                    .map(|carry| {
                        let block = take(plan, &mut pools, PoolPurpose::Carry(p.stage))?;
                        Ok::<_, SlotError>(match p.device() {
                            Device::Cpu => LaneCarry::on_host(block, carry.bytes),
                            Device::Gpu(_) => {
                                let gpu = GpuBlocks {
                                    zeros: take(
                                        plan,
                                        &mut pools,
                                        PoolPurpose::CarryZeros(p.stage),
                                    )?,
                                    staging: take(
                                        plan,
                                        &mut pools,
                                        PoolPurpose::CarryStaging(p.stage),
                                    )?,
                                    keep: several,
                                };
                                LaneCarry::on_device(block, carry.bytes, gpu)
                            }
                        })
                    })
                    .transpose()
            })
            .collect::<Result<Vec<_>, _>>()?;
        tracing::debug!(
            "{} frame slots built, {} workers, profile_gpu {}",
            slots.len(),
            plan.runtime.workers,
            options.profile_gpu
        );
        Ok(Built {
            parts: LaneParts {
                path,
                schedule,
                slots,
                sets,
                carries,
            },
            pools,
            scratches,
        })
    }
}

/// A lane's channels, each bounded by all it can ever hold, so no send blocks: the three task
/// queues and the free slots. The collector's events are the run's, one channel for every
/// lane ([`Channels::events_bound`]).
pub(super) struct Channels {
    pub(super) ready: (Sender<Task>, Receiver<Task>),
    pub(super) streamed: (Sender<Task>, Receiver<Task>),
    pub(super) gpu: (Sender<Task>, Receiver<Task>),
    pub(super) free: (Sender<usize>, Receiver<usize>),
}

impl Channels {
    /// The channels of a lane of `slots` slots, every slot free.
    pub(super) fn new(plan: &Plan, schedule: &Schedule, slots: usize) -> Channels {
        let max_tasks = Self::max_tasks(plan, schedule, slots);
        let channels = Channels {
            ready: channel::bounded::<Task>(max_tasks),
            streamed: channel::bounded::<Task>(max_tasks),
            gpu: channel::bounded::<Task>(max_tasks),
            free: channel::bounded::<usize>(slots),
        };
        // crossbeam's one-time allocations for waiting on each channel, now rather than when a
        // thread first has to wait (wait.rs): every worker may wait on each task queue, the
        // source on a free slot.
        for queue in [&channels.ready.1, &channels.streamed.1, &channels.gpu.1] {
            wait::prepare_to_block(queue, plan.runtime.workers);
        }
        wait::prepare_to_block(&channels.free.1, 1);
        for i in 0..slots {
            let _ = channels.free.0.send(i);
        }
        channels
    }

    /// The most tasks a lane's queue can hold: every launch of every slot, and a stop per
    /// worker.
    fn max_tasks(plan: &Plan, schedule: &Schedule, slots: usize) -> usize {
        slots * schedule.tasks.iter().map(|&l| l as usize).sum::<usize>() + plan.runtime.workers
    }

    /// The most events a lane sends the collector at once: a frame's end per slot, and a
    /// failure per task.
    pub(super) fn events_bound(plan: &Plan, schedule: &Schedule, slots: usize) -> usize {
        slots + Self::max_tasks(plan, schedule, slots)
    }
}

impl<'p> Shared<'p> {
    /// The state a lane's threads share: what the lane owns, wired into its run.
    pub(super) fn new(
        plan: &'p Plan,
        parts: LaneParts,
        wiring: LaneWiring<'_, 'p>,
        options: &RunOptions,
    ) -> Shared<'p> {
        let LaneParts {
            path,
            schedule,
            slots,
            sets,
            carries,
        } = parts;
        let LaneWiring {
            channels,
            events,
            common,
            index: lane,
            span_limit,
        } = wiring;
        Shared {
            plan,
            path,
            staged_frames: std::sync::Mutex::new(Vec::new()),
            schedule,
            slots,
            sets,
            carries,
            control: Control::default(),
            ready: channels.ready.0.clone(),
            streamed: channels.streamed.0.clone(),
            gpu: channels.gpu.0.clone(),
            events: events.clone(),
            common,
            lane,
            trace: options.trace,
            span_limit,
            driver_spans: std::sync::Mutex::new(SpanBuffer::new(span_limit)),
            nvtx: if options.trace {
                let names: Vec<String> = plan.graph.stages.iter().map(|s| s.name.clone()).collect();
                crate::measure::nvtx::Nvtx::load(&names)
            } else {
                None
            },
            peers: OnceLock::new(),
            spin: plan.runtime.spin,
        }
    }

    /// Lane `lane` of the run.
    pub(super) fn peer(&self, lane: usize) -> &Shared<'p> {
        let peers = self
            .peers
            .get()
            .expect("the lanes are linked before workers start");
        assert!(lane < peers.len, "lane {lane} of {}", peers.len);
        // SAFETY: `peers` points at the run's lanes, in place and alive while any thread or
        // callback of the run runs (`Peers`); `lane` is one of them.
        unsafe { &*peers.first.cast::<Shared<'p>>().add(lane) }
    }

    /// Where the frame in `slot` of this lane is, for a gate.
    pub(super) fn at(&self, slot: usize) -> At {
        At {
            lane: self.lane,
            slot,
        }
    }

    /// Links this lane to the run's `lanes` (itself among them), which must not move from
    /// here on: every slot's GPU host callbacks point at this `Shared`, and its gates reach
    /// the other lanes.
    pub(super) fn link(&self, lanes: &[Shared<'p>]) {
        let _ = self.peers.set(Peers {
            first: lanes.as_ptr().cast(),
            len: lanes.len(),
        });
        let me = std::ptr::from_ref(self)
            .cast_mut()
            .cast::<std::ffi::c_void>();
        for slot in &self.slots {
            for callback in slot.callbacks() {
                callback.lane.store(me, Ordering::Release);
            }
        }
    }
}

/// Where a run's lanes are: set once they are in place, and dereferenced only while its
/// threads and callbacks run, before the lanes are dropped.
pub(super) struct Peers {
    first: *const Shared<'static>,
    len: usize,
}

// SAFETY: the pointer is to the run's lanes, which outlive every thread and callback that
// reads it; it is only read.
unsafe impl Send for Peers {}
// SAFETY: as for Send.
unsafe impl Sync for Peers {}

/// Why `plans` cannot be switched between under `rule` with `options`, if they cannot: they
/// must be placements of one graph, binding the source alike, whose stateful stages carry the
/// same (so that the carry can move between them), without parameter changes.
pub(super) fn adaptable(
    plans: &[Plan],
    rule: &crate::adapt::Rule,
    options: &RunOptions,
) -> Result<(), NotAdaptable> {
    let Some(first) = plans.first() else {
        return Err(NotAdaptable::NoPlacement);
    };
    rule.check()?;
    let most = crate::model::placement::MAX_ALTERNATIVES + 1;
    if plans.len() > most {
        return Err(NotAdaptable::TooMany {
            placements: plans.len(),
            most,
        });
    }
    if options.control.is_some() {
        return Err(NotAdaptable::ParameterChanges);
    }
    let packets = |plan: &Plan| {
        let graph = &plan.graph;
        (
            graph.source.packets(graph),
            graph.source.packet_bytes(graph),
        )
    };
    let first_packets = packets(first);
    for plan in plans {
        let same_stages = plan.graph.stages.len() == first.graph.stages.len()
            && (plan.graph.stages.iter().zip(&first.graph.stages))
                .all(|(a, b)| (&a.name, &a.kernel) == (&b.name, &b.kernel));
        if plan.graph.name != first.graph.name || !same_stages {
            return Err(NotAdaptable::OtherGraph {
                first: first.placement.name.clone(),
                first_graph: first.graph.name.clone(),
                other: plan.placement.name.clone(),
                other_graph: plan.graph.name.clone(),
            });
        }
        if packets(plan) != first_packets {
            return Err(NotAdaptable::OtherPackets {
                first: first.placement.name.clone(),
                other: plan.placement.name.clone(),
            });
        }
        for (p, q) in first.stages.iter().zip(&plan.stages) {
            if p.carry != q.carry {
                return Err(NotAdaptable::CarryDiffers {
                    stage: plan.graph.stage(p.stage).name.clone(),
                    first: CarryOf {
                        placement: first.placement.name.clone(),
                        carry: p.carry,
                    },
                    other: CarryOf {
                        placement: plan.placement.name.clone(),
                        carry: q.carry,
                    },
                });
            }
        }
    }
    Ok(())
}

/// Why placements cannot be switched between while the stream runs.
#[derive(Debug, thiserror::Error)]
pub enum NotAdaptable {
    /// No placement at all.
    #[error("no placement given")]
    NoPlacement,
    /// The switching rule could never judge or never settle.
    #[error(transparent)]
    Rule(#[from] crate::adapt::RuleError),
    /// More placements than a run plans.
    #[error("{placements} placements: at most {most}, each planned for the whole run")]
    TooMany {
        /// Placements given.
        placements: usize,
        /// The most a run takes.
        most: usize,
    },
    /// The run changes parameters ([`RunOptions::control`]) while it may switch placements.
    #[error("parameters cannot change while the run switches placements")]
    ParameterChanges,
    /// Two placements are of different graphs (or of graphs whose stages differ).
    #[error(
        "placement {first} is of graph {first_graph}, placement {other} of graph {other_graph}"
    )]
    OtherGraph {
        /// The first placement.
        first: String,
        /// Its graph.
        first_graph: String,
        /// The other placement.
        other: String,
        /// Its graph.
        other_graph: String,
    },
    /// Two placements bind the source to different packets.
    #[error("placements {first} and {other} bind the source to different packets per frame")]
    OtherPackets {
        /// The first placement.
        first: String,
        /// The other placement.
        other: String,
    },
    /// A stateful stage's kernels carry differently in two placements.
    #[error(
        "stage {stage}'s kernels differ in what they carry from frame to frame ({first}, {other}): \
         its carry cannot move between them; place it with one library in every placement, or \
         make both libraries' kernels carry the same"
    )]
    CarryDiffers {
        /// The stage.
        stage: String,
        /// What it carries in the first placement.
        first: CarryOf,
        /// What it carries in the other.
        other: CarryOf,
    },
}

/// What a stateful stage carries in one placement, as [`NotAdaptable::CarryDiffers`] says it.
#[derive(Debug)]
pub struct CarryOf {
    /// The placement.
    pub placement: String,
    /// Its carry; `None` when it carries nothing.
    pub carry: Option<crate::plan::PlannedCarry>,
}

impl std::fmt::Display for CarryOf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.carry {
            None => write!(f, "placement {} carries nothing", self.placement),
            Some(c) => write!(
                f,
                "placement {} carries {} B{}",
                self.placement,
                c.bytes,
                if c.reset_on_gap {
                    ", reset on a loss"
                } else {
                    ""
                }
            ),
        }
    }
}

//! What a run builds before its threads start: the pools and, from them, the sets of stage
//! buffers, the frame slots and the workers' scratch memory ([`Built`]); the channels between
//! the threads ([`Channels`]), each bounded by all it can ever hold so that no send blocks;
//! and the state the threads share. Every allocation of a run happens here, before its first
//! frame.

use super::constants::Constants;
use super::*;
use crate::model::placement::Device;

/// What a run allocates before it starts: the pools, and from them the sets of stage
/// buffers, the frame slots and the workers' scratch memory.
pub(super) struct Built {
    pub(super) schedule: Schedule,
    pub(super) pools: Vec<Pool>,
    pub(super) sets: FrameSets,
    pub(super) slots: Vec<Slot>,
    pub(super) scratches: Vec<WorkerScratch>,
    /// Per stage: the gate and carry of a stateful stage.
    pub(super) stateful: Vec<Option<Stateful>>,
}

impl Built {
    pub(super) fn new(plan: &Plan, options: &RunOptions) -> Result<Built, RunError> {
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
        let constants = Constants::new(plan, &mut pools)?;
        let slots = (0..plan.runtime.slots)
            .map(|_| Slot::new(plan, &mut pools, &constants, &schedule, options.profile_gpu))
            .collect::<Result<Vec<_>, _>>()?;
        let scratches = (0..plan.runtime.workers)
            .map(|_| WorkerScratch::new(plan, &mut pools))
            .collect::<Result<Vec<_>, _>>()?;
        let stateful = plan
            .stages
            .iter()
            .map(|p| {
                p.carry
                    .map(|carry| {
                        let block = take(plan, &mut pools, PoolPurpose::Carry(p.stage))?;
                        let zeros = match p.device {
                            Device::Cpu => None,
                            Device::Gpu(_) => {
                                Some(take(plan, &mut pools, PoolPurpose::CarryZeros(p.stage))?)
                            }
                        };
                        let (slots, cycle) = (slots.len(), options.cycle);
                        Ok::<_, SlotError>(Stateful::new(carry, block, zeros, slots, cycle))
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
            schedule,
            pools,
            sets,
            slots,
            scratches,
            stateful,
        })
    }
}

/// The run's channels, each bounded by all it can ever hold, so no send blocks: the three
/// task queues, the collector's events, and the free slots.
pub(super) struct Channels {
    pub(super) ready: (Sender<Task>, Receiver<Task>),
    pub(super) streamed: (Sender<Task>, Receiver<Task>),
    pub(super) gpu: (Sender<Task>, Receiver<Task>),
    pub(super) events: (Sender<Event>, Receiver<Event>),
    pub(super) free: (Sender<usize>, Receiver<usize>),
}

impl Channels {
    /// The channels of a run of `slots` slots, every slot free.
    pub(super) fn new(plan: &Plan, schedule: &Schedule, slots: usize) -> Channels {
        let max_tasks = slots * schedule.tasks.iter().map(|&l| l as usize).sum::<usize>()
            + plan.runtime.workers;
        let channels = Channels {
            ready: channel::bounded::<Task>(max_tasks),
            streamed: channel::bounded::<Task>(max_tasks),
            gpu: channel::bounded::<Task>(max_tasks),
            // Every slot sends at most one FrameDone per frame, plus the source's end and
            // failures.
            events: channel::bounded::<Event>(slots + max_tasks + 1),
            free: channel::bounded::<usize>(slots),
        };
        // crossbeam's one-time allocations for waiting on each channel, now rather than when a
        // thread first has to wait (wait.rs): every worker may wait on each task queue, the
        // source on a free slot and the collector (this thread) on the events.
        for queue in [&channels.ready.1, &channels.streamed.1, &channels.gpu.1] {
            wait::prepare_to_block(queue, plan.runtime.workers);
        }
        wait::prepare_to_block(&channels.free.1, 1);
        wait::prepare_to_block(&channels.events.1, 1);
        for i in 0..slots {
            let _ = channels.free.0.send(i);
        }
        channels
    }
}

impl<'p> Shared<'p> {
    /// The state the run's threads share, sending on `channels`.
    pub(super) fn new(
        plan: &'p Plan,
        schedule: Schedule,
        slots: Vec<Slot>,
        sets: FrameSets,
        stateful: Vec<Option<Stateful>>,
        channels: &Channels,
        options: &RunOptions,
    ) -> Shared<'p> {
        // Every thread's share of the spans: the workers, the source, the collector and the
        // driver.
        let span_limit = if options.trace {
            MAX_SPANS / (plan.runtime.workers + 3)
        } else {
            0
        };
        Shared {
            plan,
            schedule,
            slots,
            sets,
            stateful,
            control: Control::default(),
            ready: channels.ready.0.clone(),
            streamed: channels.streamed.0.clone(),
            gpu: channels.gpu.0.clone(),
            events: channels.events.0.clone(),
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
        }
    }

    /// Gives every slot's stages the context their GPU completion callbacks receive: a
    /// pointer to this `Shared`, which must not move from here on.
    pub(super) fn set_callbacks(&self) {
        let contexts = (0..self.slots.len())
            .map(|slot| {
                (0..self.plan.stages.len())
                    .map(|stage| CallbackContext {
                        shared: std::ptr::from_ref(self).cast(),
                        slot,
                        stage: StageId(stage),
                    })
                    .collect()
            })
            .collect();
        let _ = self.callbacks.set(contexts);
    }
}

//! Memory a frame needs only while its stages run: shared, where a slot would own it idle.
//!
//! A slot holds a frame from its first packet until the sink has read it; with several slots
//! the source fills them ahead of the workers. Buffers that are the slot's alone would make
//! every frame in flight touch its own copy of every tensor, so the memory the kernels sweep
//! grows with the slots (at 2048x256, 12 MiB a slot) and falls out of cache. Two kinds of
//! memory therefore do not belong to slots:
//!
//! - **A CPU stage's workspace** belongs to a worker ([`WorkerScratch`]): a CPU launch runs to
//!   its end on the worker that took it, so one workspace per worker and stage is never used
//!   by two launches at once, and it stays in that worker's cache from one launch to the next.
//!   (A GPU stage's workspace stays with the slot's launch: the work it enqueues runs later.)
//! - **A tensor that lives only while the frame's stages run** ([`Lifetime::Stages`]: CPU
//!   stages write and read it, no sink reads it) comes from a [`FrameSets`]. There are as many
//!   sets as slots, so a frame always finds one. A frame binds a set at its first launch that
//!   needs one ([`FrameSets::bind`]) and returns it once its stages have ended, or, for a
//!   partial frame, once its last launch has. Free sets form a stack: the set returned last,
//!   the warmest, is bound next, so a worker that runs frames one after another keeps using
//!   the same buffers.
//!
//! Guarantees: a set is bound to at most one frame at a time, and launches of one frame racing
//! to bind get the same set; binding and returning never allocate (the stack holds every set
//! from the start) and hold a lock only to check, pop or push; a set returned by one frame is
//! visible, with everything that frame wrote, to the next frame that binds it (the lock orders
//! them).
//!
//! [`Lifetime::Stages`]: crate::plan::Lifetime::Stages

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use kplace_abi::Tensor;

use super::pool::{Block, Pool};
use super::slot_error::SlotError;
use crate::model::graph::{StageSpec, TensorId};
use crate::model::placement::Device;
use crate::plan::{Lifetime, Plan, PoolPurpose};

/// A frame's binding when it has no set.
pub(crate) const UNBOUND: u32 = u32::MAX;

/// The shared buffers of the tensors that live only while a frame's stages run.
pub(crate) struct FrameSets {
    /// Per set, per graph tensor: its buffer for a [`Lifetime::Stages`] tensor, else `None`.
    sets: Vec<Vec<Option<Block>>>,
    free: Mutex<FreeSets>,
}

/// The sets no frame holds, and the most ever bound at once.
struct FreeSets {
    /// The last pushed is popped first.
    stack: Vec<u32>,
    peak: usize,
}

impl FrameSets {
    /// One set per slot, taken from the tensors' pools; none when the plan has no tensor that
    /// lives only while the stages run.
    pub(crate) fn new(plan: &Plan, pools: &mut [Pool]) -> Result<FrameSets, SlotError> {
        let staged: Vec<TensorId> = plan
            .edges
            .iter()
            .filter(|e| e.lifetime == Lifetime::Stages)
            .map(|e| e.tensor)
            .collect();
        let count = if staged.is_empty() {
            0
        } else {
            plan.runtime.slots
        };
        let sets = (0..count)
            .map(|_| {
                let mut set = vec![None; plan.edges.len()];
                for &t in &staged {
                    set[t.0] = Some(take(plan, pools, PoolPurpose::Tensor(t))?);
                }
                Ok(set)
            })
            .collect::<Result<Vec<_>, SlotError>>()?;
        // Set 0 on top: the first frame takes it, and so does every frame while one suffices.
        let stack = (0..count as u32).rev().collect();
        Ok(FrameSets {
            sets,
            free: Mutex::new(FreeSets { stack, peak: 0 }),
        })
    }

    /// The set bound to a frame whose binding is `bound` ([`UNBOUND`] if none): the one
    /// already bound, or the free set returned most recently, bound now. Checking and binding
    /// under one lock, launches of one frame racing here bind one set between them. `None`
    /// only if every set is bound, which the executor never lets happen (a frame holds at
    /// most one, and there is one per slot).
    pub(crate) fn bind(&self, bound: &AtomicU32) -> Option<u32> {
        let already = bound.load(Ordering::Acquire);
        if already != UNBOUND {
            return Some(already);
        }
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        let already = bound.load(Ordering::Acquire);
        if already != UNBOUND {
            return Some(already);
        }
        let set = free.stack.pop()?;
        free.peak = free.peak.max(self.sets.len() - free.stack.len());
        bound.store(set, Ordering::Release);
        Some(set)
    }

    /// Returns the set in `bound`, if any, for the next frame, and leaves `bound` unbound.
    /// Only once nothing of its frame runs or is queued.
    pub(crate) fn release(&self, bound: &AtomicU32) {
        let set = bound.swap(UNBOUND, Ordering::AcqRel);
        if set != UNBOUND {
            // Never beyond its capacity: it held every set at the start, and a set is given
            // back only by the frame it was bound to.
            self.free
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .stack
                .push(set);
        }
    }

    /// How many sets there are, and the most bound to frames at once so far.
    pub(crate) fn usage(&self) -> (usize, usize) {
        let free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        (self.sets.len(), free.peak)
    }

    /// The buffer of tensor `tensor` in set `set`, if the tensor lives only while the stages
    /// run.
    pub(crate) fn block(&self, set: u32, tensor: TensorId) -> Option<Block> {
        self.sets
            .get(set as usize)?
            .get(tensor.0)
            .copied()
            .flatten()
    }
}

/// One worker's own memory: a workspace per CPU stage, and room to build a launch's tensor
/// lists when some of them come from a frame's set.
pub(crate) struct WorkerScratch {
    /// Per stage: the worker's workspace for a CPU stage; `None` for a GPU stage.
    workspaces: Vec<Option<Block>>,
    /// A launch's inputs and outputs, refilled per launch within their first capacity.
    pub(crate) inputs: Vec<Tensor>,
    pub(crate) outputs: Vec<Tensor>,
}

// SAFETY: the tensors and blocks are addresses into pools that outlive the run's threads; the
// worker that owns this struct is the only thread that uses them.
unsafe impl Send for WorkerScratch {}

impl WorkerScratch {
    /// Takes one workspace per CPU stage from the workspace pools.
    pub(crate) fn new(plan: &Plan, pools: &mut [Pool]) -> Result<WorkerScratch, SlotError> {
        let workspaces = plan
            .stages
            .iter()
            .map(|p| match p.device() {
                Device::Cpu => take(plan, pools, PoolPurpose::Workspace(p.stage)).map(Some),
                Device::Gpu(_) => Ok(None),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let widest = |ports: fn(&StageSpec) -> usize| {
            let stages = plan.stages.iter().map(|p| ports(plan.graph.stage(p.stage)));
            stages.max().unwrap_or(0)
        };
        Ok(WorkerScratch {
            workspaces,
            inputs: Vec::with_capacity(widest(|s| s.inputs.len())),
            outputs: Vec::with_capacity(widest(|s| s.outputs.len())),
        })
    }

    /// The worker's workspace for CPU stage `stage`; `None` for a GPU stage.
    pub(crate) fn workspace(&self, stage: usize) -> Option<Block> {
        self.workspaces.get(stage).copied().flatten()
    }
}

/// A block from the pool for `purpose`.
pub(super) fn take(
    plan: &Plan,
    pools: &mut [Pool],
    purpose: PoolPurpose,
) -> Result<Block, SlotError> {
    let i = plan.pool_of(purpose).ok_or(SlotError::PoolMissing)?;
    pools[i]
        .take()
        .ok_or_else(|| SlotError::PoolExhausted(plan.pools[i].name.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `count` sets of one tensor with no buffer: enough to test binding.
    fn sets(count: u32) -> FrameSets {
        FrameSets {
            sets: (0..count).map(|_| vec![None]).collect(),
            free: Mutex::new(FreeSets {
                stack: (0..count).rev().collect(),
                peak: 0,
            }),
        }
    }

    #[test]
    fn the_set_returned_last_is_bound_next() {
        let sets = sets(4);
        let (a, b) = (AtomicU32::new(UNBOUND), AtomicU32::new(UNBOUND));
        assert_eq!(sets.bind(&a), Some(0), "set 0 first");
        assert_eq!(sets.bind(&a), Some(0), "a frame keeps its set");
        assert_eq!(sets.bind(&b), Some(1));
        sets.release(&a);
        assert_eq!(a.load(Ordering::Relaxed), UNBOUND);
        assert_eq!(sets.bind(&a), Some(0), "the warmest set again");
        sets.release(&a);
        sets.release(&b);
        assert_eq!(sets.bind(&a), Some(1), "the last returned first");
        sets.release(&a);
        sets.release(&a);
        assert_eq!(
            sets.usage(),
            (4, 2),
            "releasing an unbound frame returns nothing"
        );
    }

    #[test]
    fn every_set_bound_is_none_and_peak_counts_the_most_at_once() {
        let sets = sets(2);
        let frames: Vec<AtomicU32> = (0..3).map(|_| AtomicU32::new(UNBOUND)).collect();
        assert_eq!(sets.bind(&frames[0]), Some(0));
        assert_eq!(sets.bind(&frames[1]), Some(1));
        assert_eq!(sets.bind(&frames[2]), None);
        assert_eq!(frames[2].load(Ordering::Relaxed), UNBOUND);
        sets.release(&frames[0]);
        assert_eq!(sets.bind(&frames[2]), Some(0));
        assert_eq!(sets.usage(), (2, 2));
    }

    #[test]
    fn launches_of_one_frame_racing_bind_one_set() {
        for _ in 0..200 {
            let sets = sets(1);
            let frame = AtomicU32::new(UNBOUND);
            let bound: Vec<Option<u32>> = std::thread::scope(|s| {
                let racers: Vec<_> = (0..4).map(|_| s.spawn(|| sets.bind(&frame))).collect();
                racers.into_iter().map(|r| r.join().unwrap()).collect()
            });
            assert_eq!(bound, [Some(0); 4], "one set, bound once, for every launch");
            assert_eq!(sets.usage(), (1, 1));
        }
    }
}

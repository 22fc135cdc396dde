//! The run's constant tensors: one buffer each, filled from the graph before the first frame
//! and only read after it, by every frame's launches.
//!
//! A constant that GPU stages read lives in pinned host memory and is uploaded once to its
//! device mirror here, on a stream of its own that is synchronized before the run starts (the
//! one host wait on a copy, and it is not on the hot path). Slots hand the same addresses to
//! every frame: no launch writes a constant, so frames share it safely.

use std::sync::Arc;

use crate::cuda::owned::OwnedStream;
use crate::executor::pool::{Block, Pool};
use crate::model::graph::TensorId;
use crate::plan::{Lifetime, Plan, PoolPurpose};

use super::scratch::take;
use super::slot_error::SlotError;

/// Each constant tensor's buffer, and its device mirror when a GPU stage reads it.
pub(super) struct Constants {
    /// Per graph tensor: a constant's host buffer, else `None`.
    homes: Vec<Option<Block>>,
    /// Per graph tensor: a constant's device mirror, else `None`.
    mirrors: Vec<Option<Block>>,
}

impl Constants {
    /// Takes a block for every constant (and its mirror) from `pools`, copies the graph's
    /// contents into it and uploads them to the mirror, waiting for the upload to finish.
    pub(super) fn new(plan: &Plan, pools: &mut [Pool]) -> Result<Constants, SlotError> {
        let mut homes = vec![None; plan.edges.len()];
        let mut mirrors = vec![None; plan.edges.len()];
        for edge in plan.edges.iter().filter(|e| e.lifetime == Lifetime::Run) {
            let t = edge.tensor;
            let data = &plan.graph.constant(t).ok_or(SlotError::PoolMissing)?.data;
            let home = take(plan, pools, PoolPurpose::Tensor(t))?;
            if home.bytes < data.len() as u64 {
                return Err(SlotError::PoolExhausted(plan.graph.tensor(t).name.clone()));
            }
            // SAFETY: the block is this run's alone, host memory of at least `data.len()`
            // bytes (checked above), and no frame has started to read it.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), home.ptr, data.len()) };
            homes[t.0] = Some(home);
            if edge.mirror.is_some() {
                let mirror = take(plan, pools, PoolPurpose::Mirror(t))?;
                let gpu = edge
                    .space
                    .gpu()
                    .and_then(|n| plan.gpus.get(&n))
                    .ok_or(SlotError::PoolMissing)?;
                upload(gpu, home, mirror, data.len())?;
                mirrors[t.0] = Some(mirror);
            }
        }
        Ok(Constants { homes, mirrors })
    }

    /// Constant `t`'s host buffer, if `t` is a constant.
    pub(super) fn home(&self, t: TensorId) -> Option<Block> {
        self.homes.get(t.0).copied().flatten()
    }

    /// Constant `t`'s device mirror, if `t` is a constant that a GPU stage reads.
    pub(super) fn mirror(&self, t: TensorId) -> Option<Block> {
        self.mirrors.get(t.0).copied().flatten()
    }
}

/// Copies `bytes` from pinned `home` to device `mirror` and waits until the copy is done.
fn upload(
    gpu: &Arc<dyn crate::cuda::Gpu>,
    home: Block,
    mirror: Block,
    bytes: usize,
) -> Result<(), SlotError> {
    gpu.bind_thread().map_err(SlotError::Gpu)?;
    let stream = OwnedStream::new(gpu, 0).map_err(SlotError::Gpu)?;
    // SAFETY: `home` is pinned memory of this GPU and `mirror` its device memory, both at
    // least `bytes` long (the tensor's pools) and owned by the run's pools, which outlive this
    // call; the stream is synchronized before either can be used or freed.
    unsafe {
        gpu.copy_to_device(mirror.ptr, home.ptr, bytes, stream.raw())
            .map_err(SlotError::Gpu)?;
        gpu.synchronize(stream.raw()).map_err(SlotError::Gpu)
    }
}

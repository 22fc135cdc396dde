//! A stateful stage's carry in one lane: a block in its kernel's memory and, for a GPU stage,
//! the pinned blocks it is started afresh from and passes through when it moves to another
//! lane. The stage's [`Turnstile`](super::turnstile::Turnstile) decides when a launch runs and
//! what it is told; this module prepares the carry it runs with.
//!
//! Moving a carry between lanes goes through host memory, without waiting for a GPU: a CPU
//! lane's carry is host memory already; a GPU lane of a run with several lanes copies its
//! carry to its staging block after every launch, on the stage's stream, and the turnstile
//! admits another lane's frame only once that launch has executed. A lane that takes the
//! carry copies it from there into its own block (a CPU lane) or into its staging block,
//! which its stream uploads before the launch (a GPU lane).
//!
//! Guarantees: a carry is zeroed or moved only for the launch its turnstile admitted, before
//! that launch runs (CPU) or is enqueued (GPU); moving it never waits for a GPU.

use super::pool::Block;
use super::turnstile::Admission;
use crate::plugin::CarryArgs;

/// One lane's carry of a stateful stage.
pub(crate) struct LaneCarry {
    /// The carry, in the kernel's memory: host memory, or device memory for a GPU stage.
    block: Block,
    /// The carry's size, as the kernel asked.
    bytes: u64,
    /// For a GPU stage: its pinned blocks.
    gpu: Option<GpuBlocks>,
}

/// A GPU stage's pinned blocks, each of the carry's size.
#[derive(Clone, Copy)]
pub(crate) struct GpuBlocks {
    /// Zeros, copied over the carry to start afresh.
    pub(crate) zeros: Block,
    /// Where the carry passes between lanes.
    pub(crate) staging: Block,
    /// Whether the carry is copied to `staging` after every launch: the run has other lanes.
    pub(crate) keep: bool,
}

/// The launch of a stateful stage its turnstile admitted, in one lane.
pub(crate) struct Admitted<'a> {
    /// The stage's carry in this lane.
    pub(crate) carry: &'a LaneCarry,
    /// What the turnstile told the launch.
    pub(crate) admission: Admission,
    /// The carry of the lane the stream moves from, when it moves here.
    pub(crate) from: Option<&'a LaneCarry>,
}

impl Admitted<'_> {
    /// The arguments of the CPU launch ([`LaneCarry::cpu_args`]).
    pub(crate) fn cpu_args(&self) -> CarryArgs {
        self.carry.cpu_args(self.admission, self.from)
    }

    /// What the GPU launch's enqueue needs ([`LaneCarry::gpu_carry`]).
    pub(crate) fn gpu_carry(&self) -> GpuCarry {
        self.carry.gpu_carry(self.admission, self.from)
    }
}

/// What a stateful GPU stage's enqueue adds to its stream around its launch.
#[derive(Clone, Copy)]
pub(crate) struct GpuCarry {
    /// The launch's carry arguments.
    pub(crate) args: CarryArgs,
    /// Pinned memory to copy over the carry first: zeros when it starts afresh, the carry
    /// another lane left when it moves here.
    pub(crate) upload: Option<Block>,
    /// Pinned memory to copy the carry to after the launch, for another lane to take.
    pub(crate) keep: Option<Block>,
    /// The slot whose frame ran the stage before in this lane: the stream first waits for
    /// that slot's event of the stage, so the launches use the carry in turn, on the device
    /// too.
    pub(crate) after_slot: Option<usize>,
}

impl LaneCarry {
    /// A CPU stage's carry: `block`, of at least `bytes`, in host memory.
    pub(crate) fn on_host(block: Block, bytes: u64) -> LaneCarry {
        LaneCarry {
            block,
            bytes,
            gpu: None,
        }
    }

    /// A GPU stage's carry: `block` in device memory, with its pinned blocks.
    pub(crate) fn on_device(block: Block, bytes: u64, gpu: GpuBlocks) -> LaneCarry {
        LaneCarry {
            block,
            bytes,
            gpu: Some(gpu),
        }
    }

    /// Where the carry this lane left last lies in host memory, for another lane to take.
    fn left(&self) -> *const u8 {
        self.gpu.map_or(self.block.ptr, |g| g.staging.ptr)
    }

    /// Copies the carry `from` left into host memory at `to`.
    ///
    /// # Safety
    /// `to` is valid for the carry's bytes, and nothing else uses it or `from`'s carry now:
    /// the turnstile admitted this launch after `from`'s last one ended (and, on a GPU,
    /// executed, its copy to staging included), and admits no other until this one ends.
    unsafe fn take_from(&self, from: &LaneCarry, to: *mut u8) {
        // SAFETY: per the contract; both carries are the stage's, of equal size in every lane
        // (the run refuses placements whose carries differ).
        unsafe { std::ptr::copy_nonoverlapping(from.left(), to, self.bytes as usize) };
    }

    fn args(&self, admitted: Admission) -> CarryArgs {
        CarryArgs {
            carry: self.block.ptr.cast(),
            bytes: self.bytes,
            frame: admitted.frame,
            frames_missing: admitted.frames_missing,
            fresh: admitted.fresh,
        }
    }

    /// The arguments of the admitted CPU launch, its carry zeroed first when it must be, or
    /// taken from `from`, the lane whose frame ran the stage before.
    pub(crate) fn cpu_args(&self, admitted: Admission, from: Option<&LaneCarry>) -> CarryArgs {
        if admitted.fresh {
            // SAFETY: the block is the stage's carry in host memory, `bytes` long, and only
            // the admitted launch, which has not started, uses it.
            unsafe { std::ptr::write_bytes(self.block.ptr, 0, self.bytes as usize) };
        } else if let Some(from) = from {
            // SAFETY: as above for this block; `from` per `take_from`'s contract, which the
            // turnstile's admission of a launch moving the carry guarantees.
            unsafe { self.take_from(from, self.block.ptr) };
        }
        self.args(admitted)
    }

    /// What the admitted GPU launch's enqueue needs: its arguments, what to copy over the
    /// carry first (zeros to start afresh, or the carry taken from `from`, the lane whose
    /// frame ran the stage before), where to keep it after, and the slot to wait for.
    pub(crate) fn gpu_carry(&self, admitted: Admission, from: Option<&LaneCarry>) -> GpuCarry {
        let gpu = self
            .gpu
            .expect("gpu_carry is called for a GPU stage's carry only");
        let upload = if admitted.fresh {
            Some(gpu.zeros)
        } else if let Some(from) = from {
            // SAFETY: the staging block is pinned, of the carry's size, and idle: this lane's
            // last launch executed (its copy to staging with it) before the carry left, and
            // its upload is enqueued only after this; `from` per `take_from`'s contract.
            unsafe { self.take_from(from, gpu.staging.ptr) };
            Some(gpu.staging)
        } else {
            None
        };
        GpuCarry {
            args: self.args(admitted),
            upload,
            keep: gpu.keep.then_some(gpu.staging),
            after_slot: admitted.after_slot,
        }
    }
}

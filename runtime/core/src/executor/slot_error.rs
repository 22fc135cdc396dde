//! Why a frame slot, or the memory a frame shares while its stages run, could not be built:
//! the one error of [`super::slot`] and [`super::scratch`], which build them from the plan's
//! pools before the run. Each variant names a planner or executor bug, a kernel's refusal, or
//! the GPU's error (a failed capture of a slot's graph among them); none is raised once the run
//! has started.

use crate::cuda::GpuError;
use crate::plan::bind::CreateError;

/// Why a slot could not be built.
#[derive(Debug, thiserror::Error)]
pub enum SlotError {
    /// The plan has no pool for a buffer (a planner bug).
    #[error("the plan has no pool for a buffer")]
    PoolMissing,
    /// A pool had fewer blocks than the slots need (a planner bug).
    #[error("pool {0} is exhausted while building frame slots")]
    PoolExhausted(String),
    /// A frame found every set of stage buffers bound (an executor bug: there is one per slot).
    #[error("no free set of stage buffers for a frame (an executor bug)")]
    NoFreeSet,
    /// A kernel refused to create a state.
    #[error(transparent)]
    Create(CreateError),
    /// A stream or event could not be created.
    #[error(transparent)]
    Gpu(GpuError),
    /// A slot's GPU work could not be captured as a graph (the run may go on without graphs).
    #[error(
        "capturing a slot's GPU work as a graph failed{}: {cause}",
        stage.as_ref().map(|s| format!(" at stage {s}")).unwrap_or_default()
    )]
    Graph {
        /// The stage being captured, if the failure was one stage's.
        stage: Option<String>,
        /// The driver's or the kernel's error.
        cause: String,
    },
}

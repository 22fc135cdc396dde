//! Bounds measured beside the runtime: what the same kernels do with no runtime at all.
//!
//! [`kernel_only_rate`] launches a plan's kernels in graph order on the calling thread, on one
//! set of buffers with one workspace per stage, tile by tile, with the one copy per frame a
//! receiver makes: what an executor with one worker should reach (a few percent more when its
//! source writes the next frame on another core while the worker computes). Benchmarks report
//! the runtime's rate as a ratio of it.

use std::time::Instant;

use kplace_abi::{Tensor, Tile};

use kplace::executor::pool::{Pool, PoolError};
use kplace::model::graph::StageId;
use kplace::plan::{Plan, tensor_desc};
use kplace::plugin::LaunchError;

/// Why a bound could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum BoundError {
    /// A buffer could not be allocated.
    #[error(transparent)]
    Pool(#[from] PoolError),
    /// A kernel state could not be created.
    #[error(transparent)]
    Create(#[from] kplace::plan::bind::CreateError),
    /// A kernel failed.
    #[error(transparent)]
    Launch(#[from] LaunchError),
    /// A stage runs on a GPU: its bound is the GPU run itself, next to the PCIe copy rate
    /// (`bench/gpu-check.sh` measures both).
    #[error("the kernel-only bound runs kernels on this thread; stage {stage} runs on {device}")]
    NotOnCpu {
        /// The stage.
        stage: String,
        /// Its device.
        device: kplace::model::placement::Device,
    },
    /// The frames do not fit the plan's source tensor.
    #[error("a prepared frame has {got} bytes, the source tensor {want}")]
    FrameSize {
        /// Bytes of the prepared frame.
        got: usize,
        /// Bytes of the source tensor.
        want: u64,
    },
}

/// Frames per second through `plan`'s kernels back to back on this thread, for `count` frames
/// drawn cyclically from `frames` (each the bytes of the source tensor).
pub fn kernel_only_rate(plan: &Plan, frames: &[Vec<u8>], count: u64) -> Result<f64, BoundError> {
    let graph = &plan.graph;
    if let Some(p) = plan.stages.iter().find(|p| p.gpu().is_some()) {
        return Err(BoundError::NotOnCpu {
            stage: graph.stage(p.stage).name.clone(),
            device: p.device(),
        });
    }
    let mut pools = Vec::new();
    let mut tensors = Vec::new();
    for (i, t) in graph.tensors.iter().enumerate() {
        let mut pool = Pool::host(t.name.clone(), t.bytes, 1)?;
        let block = pool.take().ok_or_else(|| PoolError::OutOfMemory {
            name: t.name.clone(),
            bytes: t.bytes as usize,
        })?;
        tensors.push(Tensor {
            desc: tensor_desc(t, plan.edges[i].space),
            data: block.ptr.cast(),
        });
        pools.push(pool);
    }
    let source = tensors[graph.source.tensor.0];
    if let Some(bad) = frames.iter().find(|f| f.len() as u64 != source.desc.bytes) {
        return Err(BoundError::FrameSize {
            got: bad.len(),
            want: source.desc.bytes,
        });
    }
    let mut stages = Vec::new();
    for p in &plan.stages {
        let spec = graph.stage(p.stage);
        let state = plan.create_state(StageId(p.stage.0))?;
        let mut pool = Pool::host("workspace", state.workspace_bytes(), 1)?;
        let workspace = pool.take().ok_or_else(|| PoolError::OutOfMemory {
            name: "workspace".into(),
            bytes: 0,
        })?;
        let inputs: Vec<Tensor> = spec.inputs.iter().map(|t| tensors[t.0]).collect();
        let outputs: Vec<Tensor> = spec.outputs.iter().map(|t| tensors[t.0]).collect();
        let extent = graph.tensor(spec.inputs[0]).shape[spec.split.map_or(0, |s| s.axis)];
        let tile = spec.split.map_or(extent, |s| s.tile);
        pools.push(pool);
        stages.push((state, inputs, outputs, workspace, extent, tile));
    }
    let started = Instant::now();
    for f in 0..count {
        let frame = &frames[(f % frames.len().max(1) as u64) as usize];
        // SAFETY: the source buffer holds exactly one frame (checked above).
        unsafe {
            std::ptr::copy_nonoverlapping(frame.as_ptr(), source.data.cast::<u8>(), frame.len())
        };
        for (state, inputs, outputs, workspace, extent, tile) in &stages {
            for begin in (0..*extent).step_by(*tile as usize) {
                // SAFETY: buffers and workspace are sized by the plan; launches run one at a time.
                unsafe {
                    state.launch(
                        inputs,
                        outputs,
                        (workspace.ptr.cast(), workspace.bytes),
                        std::ptr::null_mut(),
                        Tile {
                            begin,
                            count: *tile,
                        },
                    )
                }?;
            }
        }
    }
    Ok(count as f64 / started.elapsed().as_secs_f64())
}

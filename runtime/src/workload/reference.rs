//! Where a recording's reference comes from: the same graph on a reference placement, run
//! here on the recording's frames before the run under test ([`reference_outputs`]), or golden
//! files, one `.npy` per sink tensor holding a frame per recording frame, as `kplace run
//! --write-sinks` writes them ([`golden_outputs`]); and what the command line calls each
//! ([`CheckSpec`]).
//!
//! Guarantees: the reference's outputs are bounded by [`REFERENCE_BUDGET_BYTES`] before they
//! are computed or read; golden files are checked against the graph's sinks (type, shape,
//! frame count) before they are used.

use std::path::Path;
use std::sync::Arc;

use super::npy;
use crate::executor::{self, CompletedFrame, FrameSink, PartialFrame, SinkError};
use crate::model::graph::Graph;
use crate::net::replay::FrameReplay;
use crate::plan::{Plan, human_bytes};

/// The most bytes of reference outputs (every sink of every recording frame) kept in memory.
pub const REFERENCE_BUDGET_BYTES: u64 = 1 << 30;

/// Each recording frame's sinks as the reference has them: `[frame][sink]`.
pub type Outputs = Arc<[Vec<Vec<u8>>]>;

/// Why a reference could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ReferenceError {
    /// The reference's outputs would not fit the budget.
    #[error(
        "the reference's outputs ({frames} frames of {} of sinks) exceed the {} kept in memory: use a recording of fewer frames",
        human_bytes(*frame_bytes),
        human_bytes(REFERENCE_BUDGET_BYTES)
    )]
    TooLarge {
        /// Recording frames.
        frames: usize,
        /// Sink bytes per frame.
        frame_bytes: u64,
    },
    /// The reference placement's run failed.
    #[error("the reference run on placement {placement} failed: {source}")]
    Run {
        /// The reference placement's name.
        placement: String,
        /// Why.
        #[source]
        source: executor::RunError,
    },
    /// A golden file is missing or does not hold the sink's frames.
    #[error("golden files: {0}")]
    Golden(#[from] npy::NpyError),
    /// The golden files hold another number of frames than the recording.
    #[error(
        "golden file {} holds {found} frames, but the recording has {want}: write it from a run of exactly the recording's frames (kplace run --frames {want} --write-sinks DIR)",
        path.display()
    )]
    GoldenFrames {
        /// The file.
        path: std::path::PathBuf,
        /// Frames it holds.
        found: usize,
        /// Frames the recording has.
        want: usize,
    },
}

fn check_budget(graph: &Graph, frames: usize) -> Result<(), ReferenceError> {
    let frame_bytes: u64 = graph.sinks.iter().map(|&t| graph.tensor(t).bytes).sum();
    if frame_bytes.saturating_mul(frames as u64) > REFERENCE_BUDGET_BYTES {
        return Err(ReferenceError::TooLarge {
            frames,
            frame_bytes,
        });
    }
    Ok(())
}

/// Keeps every completed frame's sinks, in order.
struct Collect<'a> {
    sinks: usize,
    out: &'a mut Vec<Vec<Vec<u8>>>,
}

impl FrameSink for Collect<'_> {
    fn frame(&mut self, frame: &CompletedFrame<'_>) -> Result<(), SinkError> {
        self.out
            .push((0..self.sinks).map(|i| frame.sink(i).to_vec()).collect());
        Ok(())
    }

    fn partial(&mut self, frame: &PartialFrame) -> Result<(), SinkError> {
        Err(SinkError(format!(
            "frame {} of a replay ended partial",
            frame.frame_id
        )))
    }
}

/// Runs `plan` (the graph on the reference placement) on each of `frames` once and returns
/// every frame's sinks.
pub fn reference_outputs(plan: &Plan, frames: &Arc<[Vec<u8>]>) -> Result<Outputs, ReferenceError> {
    check_budget(&plan.graph, frames.len())?;
    let mut out = Vec::with_capacity(frames.len());
    let mut collect = Collect {
        sinks: plan.graph.sinks.len(),
        out: &mut out,
    };
    let mut replay = FrameReplay::new(Arc::clone(frames), frames.len() as u64);
    executor::run(plan, &mut replay, &mut collect).map_err(|source| ReferenceError::Run {
        placement: plan.placement.name.clone(),
        source,
    })?;
    Ok(out.into())
}

/// Reads the golden files `dir/<sink>.npy` of `graph`'s sinks, each holding `frames` frames.
pub fn golden_outputs(dir: &Path, graph: &Graph, frames: usize) -> Result<Outputs, ReferenceError> {
    check_budget(graph, frames)?;
    let mut per_frame: Vec<Vec<Vec<u8>>> = (0..frames).map(|_| Vec::new()).collect();
    for &t in &graph.sinks {
        let tensor = graph.tensor(t);
        let path = dir.join(format!("{}.npy", tensor.name));
        let golden = npy::read(&path, tensor)?;
        if golden.len() != frames {
            return Err(ReferenceError::GoldenFrames {
                path,
                found: golden.len(),
                want: frames,
            });
        }
        for (frame, sink) in per_frame.iter_mut().zip(golden) {
            frame.push(sink);
        }
    }
    Ok(per_frame.into())
}

/// What a recording's frames are checked against.
#[derive(Clone, Debug)]
pub enum Check {
    /// Nothing: every frame counts as passed once it is reported.
    Nothing,
    /// Each recording frame's sinks, as a reference has them.
    Outputs {
        /// Named in the report: `reference placement all-cpu`, `golden files DIR`.
        against: String,
        /// `[frame][sink]`.
        outputs: Outputs,
    },
}

/// What a recording's frames are to be checked against, as the command line names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckSpec {
    /// No check (`none`).
    Nothing,
    /// The same graph on this placement, run here first (`reference:PLACEMENT`).
    Reference(std::path::PathBuf),
    /// `.npy` files, one per sink, in this directory (`golden:DIR`).
    Golden(std::path::PathBuf),
}

impl std::str::FromStr for CheckSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if s == "none" {
            return Ok(CheckSpec::Nothing);
        }
        match s.split_once(':') {
            Some(("reference", p)) if !p.is_empty() => Ok(CheckSpec::Reference(p.into())),
            Some(("golden", d)) if !d.is_empty() => Ok(CheckSpec::Golden(d.into())),
            _ => Err(format!(
                "unknown check {s:?}: expected reference:PLACEMENT, golden:DIR or none"
            )),
        }
    }
}

//! Where a recording's reference comes from: the same graph on a reference placement, run
//! here on the recording's frames before the run under test ([`reference_outputs`]), or golden
//! files, one `.npy` per sink tensor holding a frame per recording frame, as `kplace run
//! --write-sinks` writes them ([`golden_outputs`]); and what the command line calls each
//! ([`CheckSpec`]).
//!
//! A stream that loses frames is not the stream the reference computed: a stateful stage fills
//! what it lost (docs/graphs.md), so the frames after a loss differ from the reference's. Such
//! frames are judged again against a [`Replay`]: the graph replayed, on a placement, with the
//! run's own losses ([`replay_outputs`]).
//!
//! Guarantees: the reference's outputs are bounded by [`REFERENCE_BUDGET_BYTES`] before they
//! are computed or read; golden files are checked against the graph's sinks (type, shape,
//! frame count) before they are used, and one longer than the recording's frames and a
//! header can be is refused from its length, before it is read.

use std::path::Path;
use std::sync::Arc;

use super::npy;
use kplace_core::executor::{self, CompletedFrame, FrameSink, PartialFrame, SinkError};
use kplace_core::model::graph::Graph;
use kplace_core::plan::{Plan, human_bytes};
use kplace_net::replay::FrameReplay;

/// The most bytes of reference outputs (every sink of every recording frame) kept in memory.
pub const REFERENCE_BUDGET_BYTES: u64 = 1 << 30;

/// The most bytes an `.npy` file's magic, version, length and header take (a header is at
/// most 64 KiB).
const MAX_NPY_LEAD_BYTES: u64 = 12 + (1 << 16);

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
    /// A golden file is longer than the recording's frames of its sink can be.
    #[error(
        "golden file {} is {bytes} bytes, more than {want} frames of {frame_bytes} bytes and a header can be: write it from a run of exactly the recording's frames (kplace run --frames {want} --write-sinks DIR)",
        path.display()
    )]
    GoldenTooLong {
        /// The file.
        path: std::path::PathBuf,
        /// Its length.
        bytes: u64,
        /// Frames the recording has.
        want: usize,
        /// The sink's bytes per frame.
        frame_bytes: u64,
    },
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

/// Keeps the sinks of every completed frame of a replay, or of those numbered `wanted`
/// (increasing), in order.
struct Keep<'a> {
    sinks: usize,
    wanted: Option<&'a [u64]>,
    out: &'a mut Vec<Vec<Vec<u8>>>,
}

impl FrameSink for Keep<'_> {
    fn frame(&mut self, frame: &CompletedFrame<'_>) -> Result<(), SinkError> {
        let wanted = self
            .wanted
            .is_none_or(|w| w.get(self.out.len()) == Some(&frame.frame_id));
        if wanted {
            self.out
                .push((0..self.sinks).map(|i| frame.sink(i).to_vec()).collect());
        }
        Ok(())
    }

    fn partial(&mut self, frame: &PartialFrame) -> Result<(), SinkError> {
        Err(SinkError::Partial(frame.frame_id))
    }
}

/// A placement a stream is replayed on with a run's losses, to judge the frames that follow a
/// loss in a graph with a stateful stage.
#[derive(Clone)]
pub struct Replay {
    /// Named in the verdict: `reference placement all-cpu`, `placement cpu`.
    pub name: String,
    /// The graph on that placement.
    pub plan: Arc<Plan>,
}

impl std::fmt::Debug for Replay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replay").field("name", &self.name).finish()
    }
}

impl Replay {
    /// A replay on `plan`, named `name`, where its graph has a stateful stage (without one, a
    /// loss changes no other frame and there is nothing to replay).
    pub fn of_stateful(name: String, plan: Plan) -> Option<Replay> {
        plan.stages
            .iter()
            .any(|s| s.carry.is_some())
            .then(|| Replay {
                name,
                plan: Arc::new(plan),
            })
    }
}

/// Runs the replay's plan on the frames numbered `ids` (increasing) of the stream cycling
/// through `frames`, the others lost, and returns the sinks of the frames numbered `wanted`
/// (increasing, each in `ids`), in order.
pub fn replay_outputs(
    replay: &Replay,
    frames: &Arc<[Vec<u8>]>,
    ids: Vec<u64>,
    wanted: &[u64],
) -> Result<Vec<Vec<Vec<u8>>>, ReferenceError> {
    let mut out = Vec::with_capacity(wanted.len());
    let mut keep = Keep {
        sinks: replay.plan.graph.sinks.len(),
        wanted: Some(wanted),
        out: &mut out,
    };
    let mut source = FrameReplay::of_ids(Arc::clone(frames), ids);
    executor::run(&replay.plan, &mut source, &mut keep).map_err(|source| ReferenceError::Run {
        placement: replay.plan.placement.name.clone(),
        source,
    })?;
    Ok(out)
}

/// Runs `plan` (the graph on the reference placement) on each of `frames` once and returns
/// every frame's sinks.
pub fn reference_outputs(plan: &Plan, frames: &Arc<[Vec<u8>]>) -> Result<Outputs, ReferenceError> {
    check_budget(&plan.graph, frames.len())?;
    let mut out = Vec::with_capacity(frames.len());
    let mut collect = Keep {
        sinks: plan.graph.sinks.len(),
        wanted: None,
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
        let most = tensor
            .bytes
            .saturating_mul(frames as u64)
            .saturating_add(MAX_NPY_LEAD_BYTES);
        if let Ok(metadata) = std::fs::metadata(&path)
            && metadata.len() > most
        {
            return Err(ReferenceError::GoldenTooLong {
                path,
                bytes: metadata.len(),
                want: frames,
                frame_bytes: tensor.bytes,
            });
        }
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
        /// Where the frames after a loss are judged, for a graph with a stateful stage.
        replay: Option<Replay>,
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

/// A check's name that names none.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown check {0:?}: expected reference:PLACEMENT, golden:DIR or none")]
pub struct UnknownCheck(pub String);

impl std::str::FromStr for CheckSpec {
    type Err = UnknownCheck;

    fn from_str(s: &str) -> Result<Self, UnknownCheck> {
        if s == "none" {
            return Ok(CheckSpec::Nothing);
        }
        match s.split_once(':') {
            Some(("reference", p)) if !p.is_empty() => Ok(CheckSpec::Reference(p.into())),
            Some(("golden", d)) if !d.is_empty() => Ok(CheckSpec::Golden(d.into())),
            _ => Err(UnknownCheck(s.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kplace_core::model::graph::Overrides;

    #[test]
    fn a_golden_file_longer_than_its_frames_can_be_is_refused_before_it_is_read() {
        let spectrogram =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../workloads/spectrogram/graph.yaml");
        let graph = Graph::load(&spectrogram, &Overrides::default()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        // Sparse: 64 GiB long, not a byte of it written; a header could claim every frame.
        let file = std::fs::File::create(dir.path().join("psd.npy")).unwrap();
        file.set_len(64 << 30).unwrap();
        let e = golden_outputs(dir.path(), &graph, 3).unwrap_err();
        assert!(
            e.to_string().contains(
                "psd.npy is 68719476736 bytes, more than 3 frames of 4096 bytes and a header can be"
            ),
            "{e}"
        );
    }
}

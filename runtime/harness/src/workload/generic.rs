//! The generic workload, for every graph that names none: frames from a [`Recording`], each
//! completed frame's sinks compared element by element ([`compare`]) with what its reference
//! ([`super::reference`]) computed from the same input frame.
//!
//! Frame `f` of a run (counted from the run's first frame: the receiver numbers frames from
//! `--first-frame-id`) carries recording frame `f mod frames`, on a replay and over UDP alike,
//! as `kplace send --recording` sends them, so its reference is that frame's outputs.
//!
//! Guarantees: a frame passes only when every element of every sink is within its tolerance;
//! judging a frame that passes allocates nothing; a run passes only when every expected frame
//! was reported and passed.

use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use super::after_loss::{Kept, Losses, NotRejudged};
use super::compare::compare;
use super::recording::Recording;
use super::reference::{
    Check, CheckSpec, ReferenceError, Replay, golden_outputs, reference_outputs,
};
use super::{Judge, JudgeError, Verdict, Workload};
use kplace_core::executor::CompletedFrame;
use kplace_core::model::graph::{Graph, TensorSpec, Tolerance};
use kplace_core::plan::Plan;
use kplace_report::run::{Details, MAX_MISMATCHES, Mismatch, Verification};

/// A graph run on a recording, checked against a reference: the workload of every graph that
/// names none.
pub struct RecordingWorkload {
    /// The recording.
    pub recording: Recording,
    /// What its frames are checked against.
    pub check: Check,
    /// The sink tensors, in the graph's `sinks` order, with their tolerances.
    pub sinks: Vec<(TensorSpec, Tolerance)>,
    /// The source tensor.
    pub source: TensorSpec,
}

impl RecordingWorkload {
    /// A workload of `recording` for `graph`, checked by `check`.
    pub fn new(graph: &Graph, recording: Recording, check: Check) -> Self {
        RecordingWorkload {
            recording,
            check,
            sinks: graph
                .sinks
                .iter()
                .zip(&graph.tolerances)
                .map(|(&t, &tol)| (graph.tensor(t).clone(), tol))
                .collect(),
            source: graph.tensor(graph.source.tensor).clone(),
        }
    }
}

impl Workload for RecordingWorkload {
    fn describe(&self) -> String {
        format!(
            "recording {} ({} frames)",
            self.recording.path.display(),
            self.recording.frames.len()
        )
    }

    /// The source's dimensions innermost first, as `--shape` writes them: `1024x128` for
    /// `[128, 1024]` (elements per packet, then packets per frame).
    fn shape(&self) -> kplace_core::model::shape::FrameShape {
        use kplace_core::model::shape::FrameShape;
        FrameShape::of_tensor(&self.source.shape).unwrap_or_else(FrameShape::one)
    }

    fn frame_bytes(&self) -> u64 {
        self.source.bytes
    }

    fn frames(&self) -> Option<&Arc<[Vec<u8>]>> {
        Some(&self.recording.frames)
    }

    fn real_time_period(&self) -> Option<std::time::Duration> {
        self.recording.frame_period(&self.source)
    }

    fn judge(
        &self,
        frames_expected: u64,
        _results: Option<Box<dyn Write + Send>>,
    ) -> Result<Box<dyn Judge>, JudgeError> {
        let period = self.recording.frames.len() as u64;
        Ok(Box::new(ReferenceJudge {
            sinks: self.sinks.clone(),
            check: self.check.clone(),
            frames: Arc::clone(&self.recording.frames),
            period,
            frames_expected,
            reported: 0,
            passed: 0,
            failed: 0,
            elements_differing: 0,
            mismatches: Vec::with_capacity(MAX_MISMATCHES),
            losses: Losses::new(period),
            rejudged: Rejudged::default(),
        }))
    }
}

/// Why a recording workload could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// The graph or placement files cannot be loaded.
    #[error(transparent)]
    Files(#[from] kplace_core::model::files::FilesError),
    /// The recording cannot be read for this graph.
    #[error(transparent)]
    Recording(#[from] super::recording::RecordingError),
    /// The reference placement cannot be planned.
    #[error("reference placement {}: {source}", path.display())]
    Plan {
        /// The reference placement.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: Box<kplace_core::plan::PlanError>,
    },
    /// The reference could not be computed or read.
    #[error(transparent)]
    Reference(#[from] ReferenceError),
}

/// A graph bound to a recording as a run binds it: its dimensions the file's, then the
/// recording's frame shape where its metadata states one, then the command line's; `slots:
/// auto` sized at the recording's frame period. What `kplace run --recording` plans, and
/// `kplace plan --recording` prints: one path, so the two agree.
pub struct BoundRecording {
    /// The graph and placement files, with the recording's dimensions bound.
    pub files: kplace_core::model::files::GraphFiles,
    /// Dimension and parameter overrides.
    pub overrides: kplace_core::model::graph::Overrides,
    /// The real-time frame period: the recording's, or [`DEFAULT_FRAME_PERIOD`] when it states
    /// no sample rate.
    pub period: std::time::Duration,
    /// The recording, checked against the graph as bound.
    pub recording: Recording,
    /// The graph as bound.
    pub graph: Graph,
}

/// The frame period of a recording that states no sample rate.
pub const DEFAULT_FRAME_PERIOD: std::time::Duration = std::time::Duration::from_millis(10);

impl BoundRecording {
    /// Loads the graph of `files` and the recording at `recording`, and binds them: what the
    /// command line binds wins, and the recording is checked against the graph as bound.
    pub fn new(
        mut files: kplace_core::model::files::GraphFiles,
        overrides: kplace_core::model::graph::Overrides,
        recording: &Path,
    ) -> Result<BoundRecording, PrepareError> {
        let described = dims_from_recording(&files, &overrides, recording)?;
        files.dims.splice(0..0, described);
        let probe = DEFAULT_FRAME_PERIOD;
        let (graph, _) = files.load_with(overrides.clone(), probe)?;
        let recording = Recording::load(recording, &graph)?;
        let period = recording
            .frame_period(graph.tensor(graph.source.tensor))
            .unwrap_or(probe);
        Ok(BoundRecording {
            files,
            overrides,
            period,
            recording,
            graph,
        })
    }

    /// The graph and placement one pipeline plans, with slots sized for the recording's rate.
    pub fn load(
        &self,
    ) -> Result<
        (Graph, kplace_core::model::placement::Placement),
        kplace_core::model::files::FilesError,
    > {
        self.files.load_with(self.overrides.clone(), self.period)
    }
}

/// The graph's files and overrides, a recording, and its check: what every pipeline of a run
/// of a graph that names none shares.
pub struct RecordingSetup {
    /// The graph and placement files.
    pub files: kplace_core::model::files::GraphFiles,
    /// Dimension and parameter overrides.
    pub overrides: kplace_core::model::graph::Overrides,
    /// The real-time frame period: the recording's, or [`DEFAULT_FRAME_PERIOD`] when it states
    /// no sample rate.
    pub period: std::time::Duration,
    /// The workload: the recording and its reference.
    pub workload: RecordingWorkload,
}

impl RecordingSetup {
    /// Binds the graph and the recording at `recording` ([`BoundRecording::new`]), and
    /// computes or reads the reference `check` names.
    pub fn new(
        files: kplace_core::model::files::GraphFiles,
        overrides: kplace_core::model::graph::Overrides,
        recording: &Path,
        check: &CheckSpec,
    ) -> Result<RecordingSetup, PrepareError> {
        let BoundRecording {
            files,
            overrides,
            period,
            recording,
            graph,
        } = BoundRecording::new(files, overrides, recording)?;
        let check = match check {
            CheckSpec::Nothing => Check::Nothing,
            CheckSpec::Golden(dir) => Check::Outputs {
                against: format!("golden files {}", dir.display()),
                outputs: golden_outputs(dir, &graph, recording.frames.len())?,
                // Golden files hold the stream without a loss: the frames a loss changed are
                // judged against the run's own placement replayed with it.
                replay: files.load_with(overrides.clone(), period).ok().and_then(
                    |(graph, placement)| {
                        let name = format!("placement {}", placement.name);
                        Plan::new(graph, placement)
                            .ok()
                            .and_then(|plan| Replay::of_stateful(name, plan))
                    },
                ),
            },
            CheckSpec::Reference(written) => {
                // A name is one of the graph's placements (`reference:cpu`); a name found
                // nowhere is left to the placement's loader to refuse.
                let path = &kplace_core::model::locate::placement(written, files.graph_path())
                    .unwrap_or_else(|_| written.clone());
                let placement = kplace_core::model::placement::Placement::load(path)
                    .map_err(kplace_core::model::files::FilesError::from)?;
                // The reference runs as its file says: none of this run's executor overrides.
                let reference = kplace_core::model::files::GraphFiles {
                    slots: None,
                    stream_rate: None,
                    workers: None,
                    ..files.with_placement(placement)
                };
                let (graph, placement) = reference.load_with(overrides.clone(), period)?;
                let name = placement.name.clone();
                let plan = Plan::new(graph, placement).map_err(|e| PrepareError::Plan {
                    path: path.clone(),
                    source: Box::new(e),
                })?;
                let started = std::time::Instant::now();
                let outputs = reference_outputs(&plan, &recording.frames)?;
                tracing::info!(
                    "kplace run: reference outputs of {} frames on placement {name} in {:.2} s",
                    outputs.len(),
                    started.elapsed().as_secs_f64()
                );
                Check::Outputs {
                    against: format!("reference placement {name}"),
                    outputs,
                    replay: Replay::of_stateful(format!("reference placement {name}"), plan),
                }
            }
        };
        let workload = RecordingWorkload::new(&graph, recording, check);
        Ok(RecordingSetup {
            files,
            overrides,
            period,
            workload,
        })
    }

    /// The graph and placement one pipeline plans, with slots sized for the recording's rate.
    pub fn load(
        &self,
    ) -> Result<
        (Graph, kplace_core::model::placement::Placement),
        kplace_core::model::files::FilesError,
    > {
        self.files.load_with(self.overrides.clone(), self.period)
    }
}

/// The dimensions the recording's metadata gives the graph's source that neither `files` nor
/// `overrides` binds; none when its shape does not fit the source (loading the recording then
/// says how it differs).
fn dims_from_recording(
    files: &kplace_core::model::files::GraphFiles,
    overrides: &kplace_core::model::graph::Overrides,
    recording: &Path,
) -> Result<Vec<(String, u64)>, PrepareError> {
    let Some(mut extents) = Recording::described_shape(recording)? else {
        return Ok(Vec::new());
    };
    extents.reverse();
    let bound: Vec<(String, u64)> = files.dims.iter().chain(&overrides.dims).cloned().collect();
    let graph = files
        .graph
        .bind(&kplace_core::model::graph::Overrides {
            dims: bound.clone(),
            params: Vec::new(),
        })
        .map_err(kplace_core::model::files::FilesError::from)?;
    Ok(graph
        .bind_source_shape(&extents)
        .unwrap_or_default()
        .into_iter()
        .filter(|(name, _)| !bound.iter().any(|(b, _)| b == name))
        .collect())
}

/// Compares each completed frame with its reference; with a stateful stage, judges the frames
/// that differ after a loss again, against the stream replayed with that loss
/// ([`super::after_loss`]).
struct ReferenceJudge {
    sinks: Vec<(TensorSpec, Tolerance)>,
    check: Check,
    frames: Arc<[Vec<u8>]>,
    period: u64,
    frames_expected: u64,
    reported: u64,
    passed: u64,
    failed: u64,
    elements_differing: u64,
    mismatches: Vec<Mismatch>,
    losses: Losses,
    rejudged: Rejudged,
}

/// What judging frames again after a loss found.
#[derive(Default)]
struct Rejudged {
    /// Frames judged again (passed or failed), and those that passed.
    frames: u64,
    passed: u64,
    /// Frames that could not be judged again, and the first reason.
    not: u64,
    why_not: Option<NotRejudged>,
}

impl ReferenceJudge {
    /// Compares `got` (a frame's sinks) with `want`, counting the elements that differ and
    /// listing the first in the mismatches when `record`.
    fn differ(&mut self, frame: u64, got: &[&[u8]], want: &[Vec<u8>], record: bool) -> u64 {
        let mut differ = 0;
        for (i, (tensor, tolerance)) in self.sinks.iter().enumerate() {
            let mismatches = &mut self.mismatches;
            differ += compare(
                tensor,
                *tolerance,
                got[i],
                &want[i],
                &mut |at, got, want| {
                    if record && mismatches.len() < MAX_MISMATCHES {
                        mismatches.push(Mismatch {
                            frame,
                            tensor: tensor.name.clone(),
                            index: at,
                            got,
                            want,
                        });
                    }
                },
            );
        }
        differ
    }

    /// Counts a frame judged, whose sinks differ from its reference's in `differ` elements.
    fn count(&mut self, differ: u64) {
        self.elements_differing += differ;
        if differ == 0 {
            self.passed += 1;
        } else {
            self.failed += 1;
        }
    }

    /// Judges a kept frame against the replay's sinks for it, or fails it saying why not.
    fn rejudge(&mut self, kept: Kept, want: Result<Vec<Vec<u8>>, NotRejudged>) {
        let got: Vec<&[u8]> = kept.sinks.iter().map(Vec::as_slice).collect();
        match want {
            Ok(want) => {
                let differ = self.differ(kept.frame, &got, &want, true);
                self.rejudged.frames += 1;
                self.rejudged.passed += u64::from(differ == 0);
                self.count(differ);
            }
            Err(why) => {
                // Judged as it was: against the reference without the loss.
                let outputs = match &self.check {
                    Check::Outputs { outputs, .. } => Arc::clone(outputs),
                    Check::Nothing => return,
                };
                let want = &outputs[(kept.frame % self.period) as usize];
                let differ = self.differ(kept.frame, &got, want, true);
                self.rejudged.not += 1;
                self.rejudged.why_not.get_or_insert(why);
                self.count(differ);
            }
        }
    }
}

impl Judge for ReferenceJudge {
    fn frame(&mut self, frame: &CompletedFrame<'_>) -> Result<(), JudgeError> {
        self.reported += 1;
        self.losses.arrived(frame.frame_id, true);
        let (outputs, replays) = match &self.check {
            Check::Nothing => {
                self.passed += 1;
                return Ok(());
            }
            Check::Outputs {
                outputs, replay, ..
            } => (Arc::clone(outputs), replay.is_some()),
        };
        let want = &outputs[(frame.frame_id % self.period) as usize];
        let got: Vec<&[u8]> = (0..self.sinks.len()).map(|i| frame.sink(i)).collect();
        // A frame that differs after a loss is kept to be judged against the stream with
        // that loss; its mismatches here are not the run's.
        let defer = replays && self.losses.after_loss();
        let differ = self.differ(frame.frame_id, &got, want, !defer);
        if differ > 0 && defer {
            let sinks = got.iter().map(|s| s.to_vec()).collect();
            if self.losses.defer(frame.frame_id, sinks) {
                return Ok(());
            }
            // Past the budget: judged as it is, its mismatches listed.
            self.differ(frame.frame_id, &got, want, true);
        }
        self.count(differ);
        Ok(())
    }

    fn partial(&mut self, frame_id: u64) {
        self.losses.arrived(frame_id, false);
    }

    fn finish(mut self: Box<Self>) -> Result<Verdict, JudgeError> {
        let losses = std::mem::replace(&mut self.losses, Losses::new(self.period));
        let (lost, first_lost) = {
            let (n, first) = losses.lost();
            (n, first.to_vec())
        };
        let unkept = losses.unkept();
        let replay = match &self.check {
            Check::Outputs { replay, .. } => replay.clone(),
            Check::Nothing => None,
        };
        if let Some(replay) = &replay {
            let frames = Arc::clone(&self.frames);
            losses.recheck(replay, &frames, &mut |kept, want| self.rejudge(kept, want));
        }
        let missing = self.frames_expected.saturating_sub(self.reported);
        let against = match &self.check {
            Check::Nothing => "nothing".to_string(),
            Check::Outputs { against, .. } => against.clone(),
        };
        let mut reasons = Vec::new();
        if missing > 0 {
            reasons.push(format!(
                "{missing} of {} frames were never reported (lost, partial or not sent)",
                self.frames_expected
            ));
        }
        if self.failed > 0 {
            reasons.push(format!(
                "{} frames differ from {against}: {} elements outside their tolerance{}",
                self.failed,
                self.elements_differing,
                self.mismatches
                    .first()
                    .map(|m| format!(
                        ", the first frame {} {}[{}] = {} where the reference has {}",
                        m.frame, m.tensor, m.index, m.got, m.want
                    ))
                    .unwrap_or_default()
            ));
        }
        if unkept > 0 {
            reasons.push(format!(
                "{unkept} frames differed after a loss beyond the {} kept to judge again: judged against {against} as they were",
                kplace_core::plan::human_bytes(super::after_loss::RECHECK_BUDGET_BYTES)
            ));
        }
        if let Some(why) = &self.rejudged.why_not {
            reasons.push(format!(
                "{} frames after a loss could not be judged against the stream with that loss ({}): judged against {against} as they were",
                self.rejudged.not,
                match why {
                    NotRejudged::Budget => "too many to keep".to_string(),
                    NotRejudged::Disordered =>
                        "their frames began out of order, which the stream restarts on".to_string(),
                    NotRejudged::Replay(why) => format!("the replay failed: {why}"),
                }
            ));
        }
        let passed = reasons.is_empty();
        let mut text = String::new();
        let tolerances: Vec<String> = self
            .sinks
            .iter()
            .map(|(t, tol)| format!("{} {tol}", t.name))
            .collect();
        let _ = writeln!(
            text,
            "verification {}: {}/{} frames reported, {} passed, against {against} ({})",
            if passed { "PASSED" } else { "FAILED" },
            self.reported,
            self.frames_expected,
            self.passed,
            tolerances.join("; ")
        );
        if lost > 0 {
            let list: Vec<String> = first_lost.iter().map(u64::to_string).collect();
            let _ = writeln!(
                text,
                "  frames lost: {lost} (first: {}{}){}",
                list.join(", "),
                if lost as usize > list.len() {
                    ", ..."
                } else {
                    ""
                },
                match &replay {
                    Some(replay) => format!(
                        "; a stateful stage filled each as its rule says, and the {} frames after them that differ from {against} were judged against {} replayed with the same frames lost: {} passed",
                        self.rejudged.frames, replay.name, self.rejudged.passed
                    ),
                    None => String::new(),
                }
            );
        }
        for m in &self.mismatches {
            let _ = writeln!(
                text,
                "  frame {} {}[{}]: {} (reference {})",
                m.frame, m.tensor, m.index, m.got, m.want
            );
        }
        for r in &reasons {
            let _ = writeln!(text, "  {r}");
        }
        Ok(Verdict {
            verification: Verification {
                passed,
                against,
                frames_reported: self.reported,
                frames_passed: self.passed,
                frames_failed: self.failed,
                frames_missing: missing,
                lost_frames: first_lost,
                frames_rejudged: self.rejudged.frames,
                mismatches: self.mismatches,
                reasons,
            },
            text,
            details: Details::new(),
        })
    }
}

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

use super::compare::compare;
use super::recording::Recording;
use super::reference::{Check, CheckSpec, ReferenceError, golden_outputs, reference_outputs};
use super::{Judge, JudgeError, Verdict, Workload};
use crate::executor::CompletedFrame;
use crate::model::graph::{Graph, TensorSpec, Tolerance};
use crate::plan::Plan;
use crate::report::run::{Details, MAX_MISMATCHES, Mismatch, Verification};

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
    fn shape(&self) -> String {
        let dims: Vec<String> = self.source.shape.iter().rev().map(u64::to_string).collect();
        dims.join("x")
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
        Ok(Box::new(ReferenceJudge {
            sinks: self.sinks.clone(),
            check: self.check.clone(),
            period: self.recording.frames.len() as u64,
            frames_expected,
            reported: 0,
            passed: 0,
            failed: 0,
            elements_differing: 0,
            mismatches: Vec::with_capacity(MAX_MISMATCHES),
        }))
    }
}

/// Why a recording workload could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// The graph or placement files cannot be loaded.
    #[error(transparent)]
    Files(#[from] crate::model::files::FilesError),
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
        source: Box<crate::plan::PlanError>,
    },
    /// The reference could not be computed or read.
    #[error(transparent)]
    Reference(#[from] ReferenceError),
}

/// The graph's files and overrides, a recording, and its check: what every pipeline of a run
/// of a graph that names no workload shares.
pub struct RecordingSetup {
    /// The graph and placement files.
    pub files: crate::model::files::GraphFiles,
    /// Dimension and parameter overrides.
    pub overrides: crate::model::graph::Overrides,
    /// The real-time frame period: the recording's, or 10 ms when it states no sample rate.
    pub period: std::time::Duration,
    /// The workload: the recording and its reference.
    pub workload: RecordingWorkload,
}

impl RecordingSetup {
    /// Loads the graph and the recording at `recording`, and computes or reads the reference
    /// `check` names. The graph's dimensions are the file's, then the recording's frame shape
    /// where its metadata states one, then `files` and `overrides`: what the command line binds
    /// wins, and the recording is checked against the graph as bound.
    pub fn new(
        mut files: crate::model::files::GraphFiles,
        overrides: crate::model::graph::Overrides,
        recording: &Path,
        check: &CheckSpec,
    ) -> Result<RecordingSetup, PrepareError> {
        let described = dims_from_recording(&files, &overrides, recording)?;
        files.dims.splice(0..0, described);
        let probe = std::time::Duration::from_millis(10);
        let (graph, _) = files.load_with(overrides.clone(), probe)?;
        let recording = Recording::load(recording, &graph)?;
        let period = recording
            .frame_period(graph.tensor(graph.source.tensor))
            .unwrap_or(probe);
        let check = match check {
            CheckSpec::Nothing => Check::Nothing,
            CheckSpec::Golden(dir) => Check::Outputs {
                against: format!("golden files {}", dir.display()),
                outputs: golden_outputs(dir, &graph, recording.frames.len())?,
            },
            CheckSpec::Reference(written) => {
                // A name is one of the graph's placements (`reference:cpu`); a name found
                // nowhere is left to the placement's loader to refuse.
                let path = &crate::model::locate::placement(written, &files.graph)
                    .unwrap_or_else(|_| written.clone());
                let reference = crate::model::files::GraphFiles {
                    placement: path.clone(),
                    slots: None,
                    stream_rate: None,
                    workers: None,
                    ..files.clone()
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
    ) -> Result<(Graph, crate::model::placement::Placement), crate::model::files::FilesError> {
        self.files.load_with(self.overrides.clone(), self.period)
    }
}

/// The dimensions the recording's metadata gives the graph's source that neither `files` nor
/// `overrides` binds; none when its shape does not fit the source (loading the recording then
/// says how it differs).
fn dims_from_recording(
    files: &crate::model::files::GraphFiles,
    overrides: &crate::model::graph::Overrides,
    recording: &Path,
) -> Result<Vec<(String, u64)>, PrepareError> {
    let Some(mut extents) = Recording::described_shape(recording)? else {
        return Ok(Vec::new());
    };
    extents.reverse();
    let bound: Vec<(String, u64)> = files.dims.iter().chain(&overrides.dims).cloned().collect();
    let graph = Graph::load(
        &files.graph,
        &crate::model::graph::Overrides {
            dims: bound.clone(),
            params: Vec::new(),
        },
    )
    .map_err(crate::model::files::FilesError::from)?;
    Ok(graph
        .bind_source_shape(&extents)
        .unwrap_or_default()
        .into_iter()
        .filter(|(name, _)| !bound.iter().any(|(b, _)| b == name))
        .collect())
}

/// Compares each completed frame with its reference.
struct ReferenceJudge {
    sinks: Vec<(TensorSpec, Tolerance)>,
    check: Check,
    period: u64,
    frames_expected: u64,
    reported: u64,
    passed: u64,
    failed: u64,
    elements_differing: u64,
    mismatches: Vec<Mismatch>,
}

impl Judge for ReferenceJudge {
    fn frame(&mut self, frame: &CompletedFrame<'_>) -> Result<(), JudgeError> {
        self.reported += 1;
        let Check::Outputs { outputs, .. } = &self.check else {
            self.passed += 1;
            return Ok(());
        };
        let want = &outputs[(frame.frame_id % self.period) as usize];
        let mut differ = 0;
        for (i, (tensor, tolerance)) in self.sinks.iter().enumerate() {
            let mismatches = &mut self.mismatches;
            differ += compare(
                tensor,
                *tolerance,
                frame.sink(i),
                &want[i],
                &mut |at, got, want| {
                    if mismatches.len() < MAX_MISMATCHES {
                        mismatches.push(Mismatch {
                            frame: frame.frame_id,
                            tensor: tensor.name.clone(),
                            index: at,
                            got,
                            want,
                        });
                    }
                },
            );
        }
        self.elements_differing += differ;
        if differ == 0 {
            self.passed += 1;
        } else {
            self.failed += 1;
        }
        Ok(())
    }

    fn partial(&mut self, _frame_id: u64) {}

    fn finish(self: Box<Self>) -> Result<Verdict, JudgeError> {
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
                mismatches: self.mismatches,
                reasons,
            },
            text,
            details: Details::new(),
        })
    }
}

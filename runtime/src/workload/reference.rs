//! The generic workload: frames from a [`Recording`], each completed frame's sinks compared
//! element by element with what a reference computed from the same input frame.
//!
//! A reference is either the same graph on a reference placement ([`reference_outputs`]:
//! e.g. all-cpu, run here on the recording's frames before the run under test), or golden
//! files ([`golden_outputs`]: one `.npy` per sink tensor holding a frame per recording frame,
//! as `kplace run --write-sinks` writes them). Each sink is compared within the tolerance the
//! graph declares for it ([`compare`]); a mismatch names the frame, the tensor and the element.
//!
//! Frame `f` of a run (counted from the run's first frame: the receiver numbers frames from
//! `--first-frame-id`) carries recording frame `f mod frames`, on a replay and over UDP alike,
//! as `kplace send --recording` sends them, so its reference is that frame's outputs.
//!
//! Guarantees: a frame passes only when every element of every sink is within its tolerance;
//! comparing a frame that passes allocates nothing; the reference's outputs are bounded by
//! [`REFERENCE_BUDGET_BYTES`] before they are computed or read.

use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use kplace_abi::{DetectionList, Dtype};

use super::npy;
use super::recording::Recording;
use super::{Judge, JudgeError, Verdict, Workload};
use crate::executor::{self, CompletedFrame, FrameSink, PartialFrame, SinkError};
use crate::model::graph::{Graph, TensorSpec, Tolerance};
use crate::net::replay::FrameReplay;
use crate::plan::{Plan, human_bytes};
use crate::report::run::{MAX_MISMATCHES, Mismatch, Verification};

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

/// Compares `got` with `want`, two buffers of `tensor`, within `tolerance`; calls `found` with
/// each differing element's flat index and both values as text, and returns how many differ.
/// Allocates nothing when they agree.
pub fn compare(
    tensor: &TensorSpec,
    tolerance: Tolerance,
    got: &[u8],
    want: &[u8],
    found: &mut dyn FnMut(u64, String, String),
) -> u64 {
    let word = |b: &[u8], i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    let float = |b: &[u8], i: usize| f32::from_bits(word(b, i));
    // NaN compares false, so it never passes.
    let within = |diff: f64, w: f64, rtol: f64, atol: f64| diff <= atol + rtol * w.abs();
    let mut differ = 0;
    match (tensor.dtype, tolerance) {
        (Dtype::DETECTIONS, _) => {
            let (Ok(g), Ok(w)) = (DetectionList::parse(got), DetectionList::parse(want)) else {
                found(0, "a malformed detection list".into(), "a list".into());
                return 1;
            };
            let (gh, wh) = (g.header(), w.header());
            let mut records = g.records().zip(w.records()).enumerate();
            for (i, (a, b)) in &mut records {
                if a != b {
                    differ += 1;
                    found(i as u64, format!("{a:?}"), format!("{b:?}"));
                }
            }
            if gh.count != wh.count || gh.overflow != wh.overflow {
                differ += 1;
                found(
                    u64::from(gh.count.min(wh.count)),
                    format!("{} records, {} overflowed", gh.count, gh.overflow),
                    format!("{} records, {} overflowed", wh.count, wh.overflow),
                );
            }
        }
        (Dtype::F32, Tolerance::Close { rtol, atol }) => {
            for i in (0..got.len()).step_by(4) {
                let (g, w) = (float(got, i), float(want, i));
                let diff = (f64::from(g) - f64::from(w)).abs();
                if !within(diff, f64::from(w), rtol, atol) {
                    differ += 1;
                    found((i / 4) as u64, format!("{g:e}"), format!("{w:e}"));
                }
            }
        }
        (Dtype::CF32, Tolerance::Close { rtol, atol }) => {
            for i in (0..got.len()).step_by(8) {
                let (gr, gi) = (float(got, i), float(got, i + 4));
                let (wr, wi) = (float(want, i), float(want, i + 4));
                let diff = f64::from(gr - wr).hypot(f64::from(gi - wi));
                let w = f64::from(wr).hypot(f64::from(wi));
                if !within(diff, w, rtol, atol) {
                    differ += 1;
                    found(
                        (i / 8) as u64,
                        format!("({gr:e}, {gi:e})"),
                        format!("({wr:e}, {wi:e})"),
                    );
                }
            }
        }
        // Bit for bit, element by element.
        (dtype, _) => {
            let width = if dtype == Dtype::CF32 { 8 } else { 4 };
            for i in (0..got.len()).step_by(width) {
                if got[i..i + width] != want[i..i + width] {
                    differ += 1;
                    let show = |b: &[u8]| match dtype {
                        Dtype::CI16 => format!(
                            "({}, {})",
                            i16::from_le_bytes([b[i], b[i + 1]]),
                            i16::from_le_bytes([b[i + 2], b[i + 3]])
                        ),
                        Dtype::CF32 => format!("({:e}, {:e})", float(b, i), float(b, i + 4)),
                        _ => format!("{:e}", float(b, i)),
                    };
                    found((i / width) as u64, show(got), show(want));
                }
            }
        }
    }
    differ
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

    /// The source's dimensions innermost first, as `--cpi` writes them: `1024x128` for
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
    /// `check` names.
    pub fn new(
        files: crate::model::files::GraphFiles,
        overrides: crate::model::graph::Overrides,
        recording: &Path,
        check: &CheckSpec,
    ) -> Result<RecordingSetup, PrepareError> {
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
            CheckSpec::Reference(path) => {
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
                false_alarms_per_frame: None,
                false_alarm_bound: None,
                mismatches: self.mismatches,
                reasons,
            },
            text,
            clusters: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::graph::Producer;

    fn tensor(dtype: Dtype, shape: &[u64]) -> TensorSpec {
        TensorSpec {
            name: "t".into(),
            dtype,
            shape: shape.to_vec(),
            bytes: dtype.bytes_for(shape).unwrap(),
            producer: Producer::Source,
        }
    }

    fn floats(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn diffs(
        t: &TensorSpec,
        tol: Tolerance,
        got: &[u8],
        want: &[u8],
    ) -> Vec<(u64, String, String)> {
        let mut out = Vec::new();
        let n = compare(t, tol, got, want, &mut |i, g, w| out.push((i, g, w)));
        assert_eq!(n as usize, out.len());
        out
    }

    #[test]
    fn floats_pass_within_their_tolerance_and_fail_outside_it_with_the_index() {
        let t = tensor(Dtype::F32, &[4]);
        let tol = Tolerance::Close {
            rtol: 1e-3,
            atol: 1e-6,
        };
        let want = floats(&[1.0, -2.0, 0.0, 100.0]);
        assert!(diffs(&t, tol, &floats(&[1.0009, -2.001, 1e-7, 100.09]), &want).is_empty());
        let d = diffs(&t, tol, &floats(&[1.0, -2.0, 1e-5, 100.2]), &want);
        assert_eq!(d.iter().map(|x| x.0).collect::<Vec<_>>(), [2, 3]);
        let d = diffs(&t, tol, &floats(&[f32::NAN, -2.0, 0.0, 100.0]), &want);
        assert_eq!(d[0].0, 0);
        // Exact is bit for bit.
        let d = diffs(
            &t,
            Tolerance::Exact,
            &floats(&[1.0, -2.0, -0.0, 100.0]),
            &want,
        );
        assert_eq!(d[0].0, 2);
    }

    #[test]
    fn complex_elements_compare_by_modulus_and_integers_exactly() {
        let t = tensor(Dtype::CF32, &[2]);
        let tol = Tolerance::Close {
            rtol: 1e-3,
            atol: 0.0,
        };
        let want = floats(&[3.0, 4.0, 1.0, 0.0]);
        assert!(diffs(&t, tol, &floats(&[3.003, 3.996, 1.0, 0.0]), &want).is_empty());
        let d = diffs(&t, tol, &floats(&[3.0, 4.0, 1.0, 0.01]), &want);
        assert_eq!((d.len(), d[0].0), (1, 1));
        let t = tensor(Dtype::CI16, &[3]);
        let want: Vec<u8> = [1i16, 2, 3, 4, 5, 6]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let mut got = want.clone();
        got[8] ^= 1;
        let d = diffs(&t, Tolerance::Exact, &got, &want);
        assert_eq!(d, [(2, "(4, 6)".into(), "(5, 6)".into())]);
    }

    #[test]
    fn detection_lists_compare_records_and_counts() {
        let t = tensor(Dtype::DETECTIONS, &[4]);
        let list = |records: &[(u32, u32, f32)], overflow: u32| {
            let mut b = vec![0u8; t.bytes as usize];
            let header = [records.len() as u32, 4, overflow, 0];
            for (i, w) in header.iter().enumerate() {
                b[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
            }
            for (k, (r, d, p)) in records.iter().enumerate() {
                let at = 16 + 12 * k;
                b[at..at + 4].copy_from_slice(&r.to_le_bytes());
                b[at + 4..at + 8].copy_from_slice(&d.to_le_bytes());
                b[at + 8..at + 12].copy_from_slice(&p.to_le_bytes());
            }
            b
        };
        let want = list(&[(1, 2, 3.0), (4, 5, 6.0)], 0);
        assert!(diffs(&t, Tolerance::Exact, &want, &want).is_empty());
        let d = diffs(
            &t,
            Tolerance::Exact,
            &list(&[(1, 2, 3.0), (4, 6, 6.0)], 0),
            &want,
        );
        assert_eq!(d[0].0, 1);
        let d = diffs(&t, Tolerance::Exact, &list(&[(1, 2, 3.0)], 0), &want);
        assert_eq!(
            d[0],
            (
                1,
                "1 records, 0 overflowed".into(),
                "2 records, 0 overflowed".into()
            )
        );
    }
}

//! The verifier: checks reported clusters against the scene's truth, frame by frame.
//!
//! A frame passes when every target is matched by a distinct cluster within the tolerance
//! (1 bin by default) on both axes, measured circularly (range modulo N, Doppler modulo M,
//! as the FFTs fold them). Clusters left unmatched are false alarms: counted, and bounded on
//! average over the run. A run passes when, in addition, every expected frame was reported
//! exactly once.
//!
//! Coverage is kept in constant memory ([`crate::seen`]): duplicates and missing frames are
//! counted exactly for any run length and loss pattern, as long as no report comes [`WINDOW`]
//! or more frames after a newer one; such a report is counted as late, and fails the run, since
//! it can no longer be told from a duplicate.
//!
//! Guarantees:
//! - Matching is deterministic: greedy over candidate pairs in increasing distance (the larger
//!   of the two axis distances), ties broken by target index then cluster index.
//! - [`verify_frame`] and [`Verifier::check`] do not touch the heap when a frame passes (up to
//!   64 targets per frame), so the verifier can run inline with a receiver.

use std::cmp::Ordering;
use std::num::NonZeroU64;
use std::sync::Arc;

use crate::cpi::Cpi;
use crate::detections::Cluster;
use crate::scene::{Scene, TruthBin};
use crate::seen::{Insert, SeenFrames, WINDOW};

/// How many frame ids (missing, duplicated, unexpected) and failed verdicts a summary keeps.
const FIRST_FEW: usize = 8;

/// Targets per frame that [`verify_frame`] matches without allocating.
const INLINE_TARGETS: usize = 64;

/// Pass criteria.
#[derive(Clone, Debug)]
pub struct VerifyConfig {
    /// Greatest circular distance, in bins, on each axis between a target and its cluster.
    pub match_tolerance_bins: f64,
    /// Greatest mean number of false alarms per frame report.
    pub max_false_alarms_per_frame: f64,
}

impl VerifyConfig {
    /// The workload's criteria (docs/workload.md) for `cpi` with false-alarm probability `pfa`: tolerance 1 bin,
    /// mean false alarms at most `1 + 2 * pfa * N * M`.
    pub fn for_cpi(cpi: Cpi, pfa: f64) -> Self {
        VerifyConfig {
            match_tolerance_bins: 1.0,
            max_false_alarms_per_frame: 1.0 + 2.0 * pfa * cpi.cells() as f64,
        }
    }
}

/// The outcome of matching one frame's clusters against its truth.
#[derive(Clone, Debug, PartialEq)]
pub struct FrameVerdict {
    /// The frame.
    pub frame_id: u64,
    /// Targets matched by a cluster.
    pub matched: usize,
    /// Targets no cluster matched, in target order.
    pub missed: Vec<TruthBin>,
    /// Clusters that matched no target.
    pub false_alarms: usize,
}

impl FrameVerdict {
    /// Whether every target was matched.
    pub fn passed(&self) -> bool {
        self.missed.is_empty()
    }
}

/// Distance from `a` to `b` on a circle of circumference `len`.
fn circular_distance(a: f64, b: f64, len: usize) -> f64 {
    let len = len as f64;
    let d = (a - b).abs() % len;
    d.min(len - d)
}

/// Matches `clusters` to `truth` greedily and one-to-one (see the module doc).
///
/// A pair is a candidate when its circular distance is at most `tolerance_bins` on both axes.
pub fn verify_frame(
    frame_id: u64,
    truth: &[TruthBin],
    clusters: &[Cluster],
    cpi: Cpi,
    tolerance_bins: f64,
) -> FrameVerdict {
    const UNMATCHED: usize = usize::MAX;
    let mut inline = [UNMATCHED; INLINE_TARGETS];
    let mut spilled = Vec::new();
    let assigned: &mut [usize] = if truth.len() <= INLINE_TARGETS {
        &mut inline[..truth.len()]
    } else {
        spilled.resize(truth.len(), UNMATCHED);
        &mut spilled
    };

    // Each round takes the closest remaining candidate pair, which is the greedy order; with a
    // handful of targets per frame the repeated scan is cheaper than sorting the pairs.
    loop {
        let mut best: Option<(f64, usize, usize)> = None;
        for (ti, t) in truth.iter().enumerate() {
            if assigned[ti] != UNMATCHED {
                continue;
            }
            for (ci, c) in clusters.iter().enumerate() {
                let dr = circular_distance(t.range_bin, f64::from(c.range_bin), cpi.samples);
                let dd = circular_distance(t.doppler_bin, f64::from(c.doppler_bin), cpi.chirps);
                if !(dr <= tolerance_bins && dd <= tolerance_bins) {
                    continue;
                }
                let distance = dr.max(dd);
                // Strictly closer only: scanning in (target, cluster) order breaks ties.
                if best.is_some_and(|(b, _, _)| distance >= b) || assigned.contains(&ci) {
                    continue;
                }
                best = Some((distance, ti, ci));
            }
        }
        match best {
            Some((_, ti, ci)) => assigned[ti] = ci,
            None => break,
        }
    }

    let matched = assigned.iter().filter(|&&c| c != UNMATCHED).count();
    let missed = truth
        .iter()
        .zip(assigned.iter())
        .filter(|&(_, &c)| c == UNMATCHED)
        .map(|(t, _)| *t)
        .collect();
    FrameVerdict {
        frame_id,
        matched,
        missed,
        false_alarms: clusters.len() - matched,
    }
}

/// A report that came too late to check (see [`VerifySummary::late_reports`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LateReport {
    /// The frame reported.
    pub frame_id: u64,
    /// The newest frame reported before it.
    pub newest: u64,
}

/// The state of a verification run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VerifySummary {
    /// Frames the run should report: ids `0..frames_expected`.
    pub frames_expected: u64,
    /// Frame reports checked, duplicates, unexpected ids and late reports included.
    pub frames_reported: u64,
    /// Reports that matched every target.
    pub frames_passed: u64,
    /// Reports that missed a target.
    pub frames_failed: u64,
    /// Expected frames never reported.
    pub frames_missing: u64,
    /// The first few missing frame ids, ascending.
    pub missing_frames: Vec<u64>,
    /// Reports of a frame that had already been reported.
    pub duplicate_reports: u64,
    /// The first few frame ids reported more than once, in report order.
    pub duplicate_frames: Vec<u64>,
    /// Reports of a frame id `>= frames_expected`.
    pub unexpected_reports: u64,
    /// The first few such ids, in report order.
    pub unexpected_frames: Vec<u64>,
    /// Reports of a frame [`WINDOW`] or more frames older than the newest reported before
    /// it: too late to tell from a duplicate, so none of them covers its frame.
    pub late_reports: u64,
    /// The first few, in report order.
    pub late_frames: Vec<LateReport>,
    /// Clusters matching no target, over all reports.
    pub false_alarms: u64,
    /// The first few failed verdicts, in report order.
    pub first_failures: Vec<FrameVerdict>,
}

impl VerifySummary {
    /// False alarms per frame report (0 when nothing was reported).
    pub fn mean_false_alarms(&self) -> f64 {
        if self.frames_reported == 0 {
            0.0
        } else {
            self.false_alarms as f64 / self.frames_reported as f64
        }
    }

    /// Whether the run passed: every expected frame reported exactly once and nothing else,
    /// every report matched all its targets, and the mean false alarms are within the bound.
    pub fn passed(&self, config: &VerifyConfig) -> bool {
        self.failure_reasons(config).is_empty()
    }

    /// Why the run failed, one sentence per reason; empty when it passed.
    pub fn failure_reasons(&self, config: &VerifyConfig) -> Vec<String> {
        let mut reasons = Vec::new();
        if self.frames_missing > 0 {
            reasons.push(format!(
                "{} of {} frames were never reported (first: {})",
                self.frames_missing,
                self.frames_expected,
                list(&self.missing_frames)
            ));
        }
        if self.duplicate_reports > 0 {
            reasons.push(format!(
                "{} reports repeated a frame already reported (first: {})",
                self.duplicate_reports,
                list(&self.duplicate_frames)
            ));
        }
        if self.unexpected_reports > 0 {
            reasons.push(format!(
                "{} reports named frames outside 0..{} (first: {})",
                self.unexpected_reports,
                self.frames_expected,
                list(&self.unexpected_frames)
            ));
        }
        if self.late_reports > 0 {
            let first = self
                .late_frames
                .iter()
                .map(|l| {
                    format!(
                        "frame {}, {} frames after frame {}",
                        l.frame_id,
                        l.newest - l.frame_id,
                        l.newest
                    )
                })
                .collect::<Vec<_>>()
                .join("; ");
            reasons.push(format!(
                "{} reports came {WINDOW} or more frames after a newer frame, too late to tell from a duplicate (first: {first})",
                self.late_reports
            ));
        }
        if self.frames_failed > 0 {
            let example = self.first_failures.first().map_or(String::new(), |v| {
                let t = v.missed.first().copied();
                let at = t.map_or(String::new(), |t| {
                    format!(
                        " at range bin {:.2}, Doppler bin {:.2}",
                        t.range_bin, t.doppler_bin
                    )
                });
                format!(
                    "; first: frame {} missed {} target(s){at}, with {} cluster(s) matching nothing",
                    v.frame_id,
                    v.missed.len(),
                    v.false_alarms
                )
            });
            reasons.push(format!(
                "{} of {} frame reports missed a target{example}",
                self.frames_failed, self.frames_reported
            ));
        }
        let mean = self.mean_false_alarms();
        // A NaN bound (or mean) fails rather than passes.
        let within = matches!(
            mean.partial_cmp(&config.max_false_alarms_per_frame),
            Some(Ordering::Less | Ordering::Equal)
        );
        if !within {
            reasons.push(format!(
                "mean false alarms per frame {mean:.3} exceeds the bound {:.3}",
                config.max_false_alarms_per_frame
            ));
        }
        reasons
    }
}

fn list(ids: &[u64]) -> String {
    ids.iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks frame reports as they arrive against a [`Scene`]'s truth.
#[derive(Debug)]
pub struct Verifier {
    scene: Arc<Scene>,
    config: VerifyConfig,
    template_period: Option<NonZeroU64>,
    /// Expected frame ids reported so far (bounded: see [`crate::seen`]).
    seen: SeenFrames,
    truth: Vec<TruthBin>,
    last: FrameVerdict,
    summary: VerifySummary,
}

impl Verifier {
    /// A verifier expecting frames `0..frames_expected` of `scene` (a [`Scene`] or an
    /// `Arc<Scene>`), judged by `config`.
    pub fn new(scene: impl Into<Arc<Scene>>, config: VerifyConfig, frames_expected: u64) -> Self {
        let scene = scene.into();
        Verifier {
            truth: Vec::with_capacity(scene.config().targets.len()),
            scene,
            config,
            template_period: None,
            seen: SeenFrames::new(),
            last: FrameVerdict {
                frame_id: 0,
                matched: 0,
                missed: Vec::new(),
                false_alarms: 0,
            },
            summary: VerifySummary {
                frames_expected,
                ..VerifySummary::default()
            },
        }
    }

    /// Judges frame `i` against scene frame `i % period`, for runs that replay `period`
    /// pre-generated frames cyclically.
    pub fn with_template_period(mut self, period: NonZeroU64) -> Self {
        self.template_period = Some(period);
        self
    }

    /// The pass criteria.
    pub fn config(&self) -> &VerifyConfig {
        &self.config
    }

    /// The scene whose truth is used.
    pub fn scene(&self) -> &Scene {
        &self.scene
    }

    /// Checks one frame report and returns its verdict.
    ///
    /// Every report gets a verdict against its truth. Coverage is tracked beside it: a frame
    /// reported again counts as a duplicate, an id `>= frames_expected` as unexpected, and a
    /// report [`WINDOW`] or more frames older than the newest one as late, and each fails
    /// the run (coverage is kept in constant memory: see [`crate::seen`]).
    pub fn check(&mut self, frame_id: u64, clusters: &[Cluster]) -> &FrameVerdict {
        let s = &mut self.summary;
        s.frames_reported += 1;
        if frame_id >= s.frames_expected {
            s.unexpected_reports += 1;
            push_few(&mut s.unexpected_frames, frame_id);
        } else {
            match self.seen.insert(frame_id, 0) {
                Insert::New => {}
                Insert::Again(_) => {
                    s.duplicate_reports += 1;
                    push_few(&mut s.duplicate_frames, frame_id);
                }
                Insert::TooLate { newest } => {
                    s.late_reports += 1;
                    if s.late_frames.len() < FIRST_FEW {
                        s.late_frames.push(LateReport { frame_id, newest });
                    }
                }
            }
        }

        let scene_frame = self.template_period.map_or(frame_id, |p| frame_id % p);
        self.scene.truth_into(scene_frame, &mut self.truth);
        let verdict = verify_frame(
            frame_id,
            &self.truth,
            clusters,
            self.scene.cpi(),
            self.config.match_tolerance_bins,
        );
        s.false_alarms += verdict.false_alarms as u64;
        if verdict.passed() {
            s.frames_passed += 1;
        } else {
            s.frames_failed += 1;
            if s.first_failures.len() < FIRST_FEW {
                s.first_failures.push(verdict.clone());
            }
        }
        self.last = verdict;
        &self.last
    }

    /// The run so far, with missing frames counted as of now.
    pub fn summary(&self) -> VerifySummary {
        let mut summary = self.summary.clone();
        // Only ids below it are inserted, so the set's window never passes it.
        let expected = summary.frames_expected;
        summary.frames_missing = expected - self.seen.count_below(expected);
        summary.missing_frames = self.seen.first_missing(expected, FIRST_FEW);
        summary
    }
}

fn push_few(ids: &mut Vec<u64>, id: u64) {
    if ids.len() < FIRST_FEW {
        ids.push(id);
    }
}

#[cfg(test)]
mod tests;

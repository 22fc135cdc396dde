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
mod tests {
    use super::*;
    use crate::scene::SceneConfig;

    fn cpi() -> Cpi {
        "1024x128".parse().unwrap()
    }

    fn truth(range_bin: f64, doppler_bin: f64) -> TruthBin {
        TruthBin {
            range_bin,
            doppler_bin,
        }
    }

    fn cl(range_bin: u32, doppler_bin: u32) -> Cluster {
        Cluster {
            range_bin,
            doppler_bin,
            power: 1.0,
        }
    }

    /// What an ideal receiver reports: each target's nearest cell.
    fn ideal(truth: &[TruthBin], c: Cpi) -> Vec<Cluster> {
        truth
            .iter()
            .map(|t| {
                cl(
                    (t.range_bin.round() as usize % c.samples) as u32,
                    (t.doppler_bin.round() as usize % c.chirps) as u32,
                )
            })
            .collect()
    }

    #[test]
    fn config_bound_grows_with_the_map() {
        let small = VerifyConfig::for_cpi(cpi(), 1e-6);
        assert_eq!(small.match_tolerance_bins, 1.0);
        assert!((small.max_false_alarms_per_frame - 1.262144).abs() < 1e-9);
        let big = VerifyConfig::for_cpi("4096x512".parse().unwrap(), 1e-6);
        assert!((big.max_false_alarms_per_frame - 5.194304).abs() < 1e-9);
    }

    #[test]
    fn matches_within_tolerance_on_both_axes() {
        let t = [truth(61.48, 6.58)];
        let v = verify_frame(0, &t, &[cl(61, 7)], cpi(), 1.0);
        assert!(v.passed());
        assert_eq!((v.matched, v.false_alarms), (1, 0));
        // Exactly on the tolerance still matches; beyond on either axis does not.
        assert!(verify_frame(0, &[truth(60.0, 6.0)], &[cl(61, 7)], cpi(), 1.0).passed());
        let v = verify_frame(3, &t, &[cl(63, 7), cl(61, 9)], cpi(), 1.0);
        assert!(!v.passed());
        assert_eq!(v.missed, t.to_vec());
        assert_eq!((v.frame_id, v.matched, v.false_alarms), (3, 0, 2));
    }

    #[test]
    fn distance_is_circular_on_both_axes() {
        // 127.6 is 0.4 bins from Doppler bin 0 when M = 128.
        assert!(verify_frame(0, &[truth(61.0, 127.6)], &[cl(61, 0)], cpi(), 1.0).passed());
        assert!(verify_frame(0, &[truth(61.0, 0.0)], &[cl(61, 127)], cpi(), 1.0).passed());
        assert!(verify_frame(0, &[truth(1023.5, 5.0)], &[cl(0, 5)], cpi(), 1.0).passed());
        assert!(!verify_frame(0, &[truth(61.0, 126.5)], &[cl(61, 0)], cpi(), 1.0).passed());
        assert!((circular_distance(0.2, 127.0, 128) - 1.2).abs() < 1e-12);
        assert!((circular_distance(127.0, 0.2, 128) - 1.2).abs() < 1e-12);
    }

    #[test]
    fn matching_is_one_to_one() {
        // Two targets, one cluster: only one can be matched, the closer one.
        let t = [truth(10.9, 5.0), truth(10.2, 5.0)];
        let v = verify_frame(0, &t, &[cl(10, 5)], cpi(), 1.0);
        assert_eq!(v.matched, 1);
        assert_eq!(v.missed, vec![t[0]]);
        assert_eq!(v.false_alarms, 0);
        // Two clusters on one target: one matches, the other is a false alarm.
        let v = verify_frame(0, &[truth(10.0, 5.0)], &[cl(10, 5), cl(11, 5)], cpi(), 1.0);
        assert!(v.passed());
        assert_eq!((v.matched, v.false_alarms), (1, 1));
    }

    #[test]
    fn matching_is_greedy_by_distance() {
        // Greedy takes the closest pair (target 1 to cluster 11, 0.4 bins) first, leaving
        // target 0 nothing within tolerance, although a full matching exists.
        let t = [truth(10.5, 5.0), truth(11.4, 5.0)];
        let v = verify_frame(0, &t, &[cl(12, 5), cl(11, 5)], cpi(), 1.0);
        assert_eq!(v.missed, vec![t[0]]);
        assert_eq!((v.matched, v.false_alarms), (1, 1));
        // The distance of a pair is the larger axis distance.
        let t = [truth(10.0, 5.9), truth(10.5, 5.0)];
        let v = verify_frame(0, &t, &[cl(10, 5)], cpi(), 1.0);
        assert_eq!(v.missed, vec![t[0]]);
    }

    #[test]
    fn ties_go_to_the_first_target_then_cluster() {
        let t = [truth(10.5, 5.0), truth(9.5, 5.0)];
        let v = verify_frame(0, &t, &[cl(10, 5)], cpi(), 1.0);
        assert_eq!(v.missed, vec![t[1]]);
        let t = [truth(10.5, 5.0)];
        let v = verify_frame(0, &t, &[cl(11, 5), cl(10, 5)], cpi(), 1.0);
        assert_eq!((v.matched, v.false_alarms), (1, 1));
    }

    #[test]
    fn many_targets_spill_without_changing_the_answer() {
        let t: Vec<TruthBin> = (0..100).map(|i| truth(i as f64 * 10.0, 3.0)).collect();
        let clusters = ideal(&t, cpi());
        let v = verify_frame(0, &t, &clusters, cpi(), 1.0);
        assert_eq!((v.matched, v.false_alarms), (100, 0));
        let v = verify_frame(0, &t, &clusters[1..], cpi(), 1.0);
        assert_eq!(v.missed, vec![t[0]]);
    }

    fn scene() -> Scene {
        Scene::new(SceneConfig::new(cpi())).unwrap()
    }

    #[test]
    fn verifier_passes_a_complete_correct_run() {
        let scene = scene();
        let config = VerifyConfig::for_cpi(cpi(), 1e-6);
        let mut verifier = Verifier::new(scene.clone(), config.clone(), 10);
        // Out of order is fine.
        for f in (0..10).rev() {
            let mut clusters = ideal(&scene.truth(f), cpi());
            if f == 4 {
                clusters.push(cl(500, 64));
            }
            assert!(verifier.check(f, &clusters).passed());
        }
        let s = verifier.summary();
        assert_eq!(
            (
                s.frames_expected,
                s.frames_reported,
                s.frames_passed,
                s.frames_failed
            ),
            (10, 10, 10, 0)
        );
        assert_eq!(s.false_alarms, 1);
        assert!((s.mean_false_alarms() - 0.1).abs() < 1e-12);
        assert!(s.passed(&config), "{:?}", s.failure_reasons(&config));
        assert!(s.failure_reasons(&config).is_empty());
    }

    #[test]
    fn verifier_uses_each_frames_truth() {
        // Frame 2000's targets have moved ~20 bins: frame 0's clusters miss them.
        let scene = scene();
        let config = VerifyConfig::for_cpi(cpi(), 1e-6);
        let mut verifier = Verifier::new(scene.clone(), config.clone(), 2001);
        let v = verifier.check(2000, &ideal(&scene.truth(0), cpi())).clone();
        assert_eq!((v.matched, v.missed.len(), v.false_alarms), (0, 3, 3));
        let s = verifier.summary();
        assert_eq!(s.frames_failed, 1);
        assert_eq!(s.first_failures, vec![v]);
        assert_eq!(s.frames_missing, 2000);
        assert_eq!(s.missing_frames, (0..8).collect::<Vec<_>>());
        let reasons = s.failure_reasons(&config).join("\n");
        assert!(reasons.contains("2000 of 2001 frames were never reported (first: 0, 1, 2"));
        assert!(reasons.contains("1 of 1 frame reports missed a target; first: frame 2000"));
        assert!(reasons.contains("mean false alarms per frame 3.000 exceeds the bound 1.262"));
    }

    #[test]
    fn verifier_enforces_exact_coverage() {
        let scene = scene();
        let config = VerifyConfig::for_cpi(cpi(), 1e-6);
        let mut verifier = Verifier::new(Arc::new(scene.clone()), config.clone(), 4);
        for f in [0, 1, 1, 3, 7] {
            verifier.check(f, &ideal(&scene.truth(f), cpi()));
        }
        let s = verifier.summary();
        assert_eq!(s.frames_reported, 5);
        assert_eq!(s.frames_passed, 5);
        assert_eq!((s.frames_missing, s.missing_frames.clone()), (1, vec![2]));
        assert_eq!(
            (s.duplicate_reports, s.duplicate_frames.clone()),
            (1, vec![1])
        );
        assert_eq!(
            (s.unexpected_reports, s.unexpected_frames.clone()),
            (1, vec![7])
        );
        assert!(!s.passed(&config));
        let reasons = s.failure_reasons(&config);
        assert_eq!(reasons.len(), 3, "{reasons:?}");
        assert!(reasons[0].contains("1 of 4 frames were never reported (first: 2)"));
        assert!(reasons[1].contains("repeated a frame"));
        assert!(reasons[2].contains("outside 0..4 (first: 7)"));
    }

    /// The case: a long run with one lost frame. After 65,536 frames past the gap,
    /// every report was counted as unexpected, and as missing.
    #[test]
    fn a_long_run_with_one_lost_frame_misses_that_frame_only() {
        let scene = scene();
        let config = VerifyConfig::for_cpi(cpi(), 1e-6);
        let mut verifier = Verifier::new(scene.clone(), config.clone(), 70_000);
        for f in (0..70_000).filter(|&f| f != 5) {
            assert!(verifier.check(f, &ideal(&scene.truth(f), cpi())).passed());
        }
        let s = verifier.summary();
        assert_eq!((s.frames_reported, s.frames_passed), (69_999, 69_999));
        assert_eq!((s.frames_missing, s.missing_frames.clone()), (1, vec![5]));
        assert_eq!((s.unexpected_reports, s.duplicate_reports), (0, 0));
        assert_eq!(s.late_reports, 0);
        assert_eq!(
            s.failure_reasons(&config),
            vec!["1 of 70000 frames were never reported (first: 5)".to_string()]
        );
    }

    /// A report more than the window behind the newest cannot be told from a duplicate: it is
    /// counted late, and fails the run saying how late; within the window it is just out of
    /// order.
    #[test]
    fn a_report_a_window_behind_the_newest_is_late() {
        let scene = scene();
        let config = VerifyConfig::for_cpi(cpi(), 1e-6);
        let frames = WINDOW + 10;
        let mut verifier = Verifier::new(scene.clone(), config.clone(), frames);
        let report = |v: &mut Verifier, f: u64| {
            v.check(f, &ideal(&scene.truth(f), cpi()));
        };
        for f in (0..frames).filter(|&f| f != 5 && f != 9) {
            report(&mut verifier, f);
            if f == WINDOW + 8 {
                // Frame 9 is within the window of frame WINDOW + 8: out of order, counted.
                report(&mut verifier, 9);
            }
        }
        report(&mut verifier, 5);
        let s = verifier.summary();
        assert_eq!((s.frames_missing, s.missing_frames.clone()), (1, vec![5]));
        assert_eq!(s.late_reports, 1);
        assert_eq!(
            s.late_frames,
            vec![LateReport {
                frame_id: 5,
                newest: frames - 1
            }]
        );
        assert_eq!((s.unexpected_reports, s.duplicate_reports), (0, 0));
        let reasons = s.failure_reasons(&config);
        assert_eq!(reasons.len(), 2, "{reasons:?}");
        assert_eq!(
            reasons[1],
            format!(
                "1 reports came 65536 or more frames after a newer frame, too late to tell from a duplicate (first: frame 5, {} frames after frame {})",
                frames - 6,
                frames - 1
            )
        );
    }

    #[test]
    fn empty_run_with_expected_frames_fails() {
        let config = VerifyConfig::for_cpi(cpi(), 1e-6);
        let verifier = Verifier::new(scene(), config.clone(), 3);
        let s = verifier.summary();
        assert_eq!(s.frames_missing, 3);
        assert!(!s.passed(&config));
        assert_eq!(s.mean_false_alarms(), 0.0);
    }

    #[test]
    fn template_period_replays_truth() {
        let scene = scene();
        let config = VerifyConfig::for_cpi(cpi(), 1e-6);
        let period = NonZeroU64::new(4).unwrap();
        let mut verifier =
            Verifier::new(scene.clone(), config.clone(), 12).with_template_period(period);
        for f in 0..12 {
            let clusters = ideal(&scene.truth(f % 4), cpi());
            assert!(verifier.check(f, &clusters).passed(), "frame {f}");
        }
        assert!(verifier.summary().passed(&config));
        // Without templating, a late frame's truth has moved on.
        let mut plain = Verifier::new(scene.clone(), config, 2000);
        assert!(!plain.check(1999, &ideal(&scene.truth(3), cpi())).passed());
    }

    #[test]
    fn huge_frame_counts_do_not_preallocate() {
        let config = VerifyConfig::for_cpi(cpi(), 1e-6);
        let mut verifier = Verifier::new(scene(), config, u64::MAX);
        verifier.check(5, &[]);
        let s = verifier.summary();
        assert_eq!(s.frames_missing, u64::MAX - 1);
        assert_eq!(s.missing_frames, vec![0, 1, 2, 3, 4, 6, 7, 8]);
    }
}

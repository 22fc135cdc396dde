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

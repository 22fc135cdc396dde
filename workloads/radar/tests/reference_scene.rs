//! The reference receiver on the workload's scenes (docs/workload.md), judged by the verifier: the chain every
//! backend is compared against must itself pass.

use kplace_radar::detections::{Cluster, DetectionWriter, read_detections};
use kplace_radar::reference::{CfarParams, detect};
use kplace_radar::scene::{Scene, SceneConfig, Target, default_targets, high_snr_targets};
use kplace_radar::verify::{Verifier, VerifyConfig, verify_frame};

const PFA: f64 = 1e-6;

fn scene(cpi: &str, targets: Vec<Target>) -> Scene {
    Scene::new(SceneConfig {
        targets,
        ..SceneConfig::new(cpi.parse().unwrap())
    })
    .unwrap()
}

fn reference_clusters(scene: &Scene, frame: u64) -> Vec<Cluster> {
    let cpi = scene.cpi();
    let mut iq = vec![[0i16; 2]; cpi.cells()];
    scene.generate_frame(frame, &mut iq).unwrap();
    detect(&iq, cpi, &CfarParams::default())
        .into_iter()
        .map(Cluster::from)
        .collect()
}

/// Runs the reference on `frames` and checks every target is found; returns the false alarms.
fn check_frames(scene: &Scene, frames: &[u64]) -> usize {
    let cpi = scene.cpi();
    let mut false_alarms = 0;
    for &f in frames {
        let clusters = reference_clusters(scene, f);
        let verdict = verify_frame(f, &scene.truth(f), &clusters, cpi, 1.0);
        assert!(
            verdict.passed(),
            "frame {f}: {verdict:?}\nclusters {clusters:?}"
        );
        false_alarms += verdict.false_alarms;
    }
    false_alarms
}

#[test]
fn reference_finds_the_default_targets() {
    let s = scene("1024x128", default_targets());
    let fa = check_frames(&s, &[0, 1, 777]);
    eprintln!("default set, 1024x128: {fa} false alarms in 3 frames");
    assert!(fa <= 3, "{fa} false alarms in 3 frames");
}

#[test]
fn reference_finds_the_high_snr_targets() {
    let s = scene("1024x128", high_snr_targets());
    let fa = check_frames(&s, &[0, 1, 777]);
    eprintln!("high-SNR set, 1024x128: {fa} false alarms in 3 frames");
    assert!(fa <= 3, "{fa} false alarms in 3 frames");
}

#[test]
fn reference_output_survives_the_file_format_and_passes_the_verifier() {
    let s = scene("1024x128", high_snr_targets());
    let cpi = s.cpi();
    let frames = 3;
    let mut writer = DetectionWriter::new(Vec::new(), cpi).unwrap();
    for f in 0..frames {
        writer.write_frame(f, &reference_clusters(&s, f)).unwrap();
    }
    let bytes = writer.finish().unwrap();

    let (read_cpi, reported) = read_detections(bytes.as_slice(), "reference").unwrap();
    assert_eq!(read_cpi, cpi);
    let config = VerifyConfig::for_cpi(cpi, PFA);
    let mut verifier = Verifier::new(s, config.clone(), frames);
    for frame in &reported {
        verifier.check(frame.frame_id, &frame.clusters);
    }
    let summary = verifier.summary();
    assert!(
        summary.passed(&config),
        "{:?}",
        summary.failure_reasons(&config)
    );
    assert_eq!(summary.frames_passed, frames);
}

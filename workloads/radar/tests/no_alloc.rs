//! The pass path of the verifier and the detection writer do not touch the heap, so both can
//! run inline with a receiver, however long the run and whatever frames it loses. Counted with a per-thread counting allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use kplace_radar::detections::{Cluster, DetectionWriter};
use kplace_radar::scene::{Scene, SceneConfig};
use kplace_radar::verify::{Verifier, VerifyConfig, verify_frame};

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: defers every operation to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn allocations_during(f: impl FnOnce()) -> u64 {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

/// What an ideal receiver reports for a frame: each target's nearest cell, plus noise.
fn clusters_for(scene: &Scene, frame: u64) -> Vec<Cluster> {
    let mut clusters: Vec<Cluster> = scene
        .truth(frame)
        .iter()
        .map(|t| Cluster {
            range_bin: t.range_bin.round() as u32,
            doppler_bin: t.doppler_bin.round() as u32 % 128,
            power: 1e9,
        })
        .collect();
    clusters.push(Cluster {
        range_bin: 900,
        doppler_bin: 60,
        power: 1e6,
    });
    clusters
}

#[test]
fn verifying_passing_frames_does_not_allocate() {
    let scene = Scene::new(SceneConfig::new("1024x128".parse().unwrap())).unwrap();
    let cpi = scene.cpi();
    let frames = 100;
    let reports: Vec<Vec<Cluster>> = (0..frames).map(|f| clusters_for(&scene, f)).collect();
    let truths: Vec<_> = (0..frames).map(|f| scene.truth(f)).collect();

    // The counter itself works.
    assert!(allocations_during(|| drop(std::hint::black_box(vec![1u8]))) > 0);

    let n = allocations_during(|| {
        for f in 0..frames as usize {
            assert!(verify_frame(f as u64, &truths[f], &reports[f], cpi, 1.0).passed());
        }
    });
    assert_eq!(n, 0, "verify_frame allocated");

    let mut verifier = Verifier::new(scene, VerifyConfig::for_cpi(cpi, 1e-6), frames);
    let n = allocations_during(|| {
        for f in 0..frames {
            assert!(verifier.check(f, &reports[f as usize]).passed());
        }
    });
    assert_eq!(n, 0, "Verifier::check allocated");
    assert_eq!(verifier.summary().frames_passed, frames);
}

/// The case: with a frame lost, the set of frames reported grew by an entry per frame
/// after it (about 36 bytes each) until it refused them all. Now coverage costs no allocation
/// per frame, whatever is lost.
#[test]
fn a_lost_frame_costs_no_allocation_per_frame() {
    let scene = Scene::new(SceneConfig::new("1024x128".parse().unwrap())).unwrap();
    let cpi = scene.cpi();
    let period = 64;
    let reports: Vec<Vec<Cluster>> = (0..period).map(|f| clusters_for(&scene, f)).collect();
    let frames = 70_000;
    let mut verifier = Verifier::new(scene, VerifyConfig::for_cpi(cpi, 1e-6), frames)
        .with_template_period(std::num::NonZeroU64::new(period).unwrap());
    let n = allocations_during(|| {
        for f in (0..frames).filter(|&f| f != 5) {
            assert!(verifier.check(f, &reports[(f % period) as usize]).passed());
        }
    });
    assert_eq!(n, 0, "Verifier::check allocated");
    let summary = verifier.summary();
    assert_eq!(summary.frames_passed, frames - 1);
    assert_eq!(
        (summary.frames_missing, summary.missing_frames),
        (1, vec![5])
    );
    assert_eq!(summary.unexpected_reports, 0);
}

#[test]
fn writing_frames_does_not_allocate() {
    let scene = Scene::new(SceneConfig::new("1024x128".parse().unwrap())).unwrap();
    let clusters = clusters_for(&scene, 0);
    let mut writer = DetectionWriter::new(Vec::with_capacity(1 << 16), scene.cpi()).unwrap();
    let n = allocations_during(|| {
        for f in 0..100 {
            writer.write_frame(f, &clusters).unwrap();
        }
    });
    assert_eq!(n, 0, "write_frame allocated");
}

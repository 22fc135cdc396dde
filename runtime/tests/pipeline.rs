//! The radar graph through the CPU kernel library, against the f64 reference receiver:
//! identical detections on the default and high-SNR scenes, and byte-identical output for any
//! worker and slot count.

use std::num::NonZeroU64;
use std::path::Path;

use kplace::abi::RecordList;
use kplace::executor::{self, CompletedFrame, FrameSink, PartialFrame, SinkError};
use kplace::model::graph::{Graph, Overrides};
use kplace::model::placement::Placement;
use kplace::net::replay::FrameReplay;
use kplace::plan::Plan;
use kplace_radar::reference::{self, CfarParams};
use kplace_radar::scene::high_snr_targets;
use kplace_radar::{Cluster, Cpi, Scene, SceneConfig, Verifier, VerifyConfig};

fn plan(cpi: Cpi, workers: usize, slots: usize) -> Plan {
    let root = kplace_testkit::workspace();
    let overrides = Overrides {
        dims: vec![
            ("N".into(), cpi.samples as u64),
            ("M".into(), cpi.chirps as u64),
        ],
        params: Vec::new(),
    };
    let graph = Graph::load(&root.join("workloads/radar/graph.yaml"), &overrides).unwrap();
    let text =
        std::fs::read_to_string(root.join("workloads/radar/placements/all-cpu.yaml")).unwrap();
    let text = format!(
        "{text}\nlibraries: {{cpu: {}}}\n",
        kplace_testkit::cpu_library().display()
    );
    let mut placement =
        Placement::parse(&text, Path::new("workloads/radar/placements/all-cpu.yaml")).unwrap();
    placement.runtime.workers = workers;
    placement.runtime.slots = slots;
    Plan::new(graph, placement).unwrap()
}

fn frame_bytes(scene: &Scene, frame: u64) -> Vec<u8> {
    scene.frame_bytes(frame).unwrap()
}

#[derive(Default)]
struct Collect {
    frames: Vec<(u64, Vec<Cluster>)>,
}

impl FrameSink for Collect {
    fn frame(&mut self, frame: &CompletedFrame<'_>) -> Result<(), SinkError> {
        let list =
            RecordList::parse(frame.sink(0)).map_err(|e| SinkError::failed(e.to_string()))?;
        assert_eq!(list.header().overflow, 0);
        let clusters = list
            .records()
            .map(kplace_radar::Detection::from_record)
            .map(|d| Cluster {
                range_bin: d.range_bin,
                doppler_bin: d.doppler_bin,
                power: d.power,
            })
            .collect();
        self.frames.push((frame.frame_id, clusters));
        Ok(())
    }

    fn partial(&mut self, frame: &PartialFrame) -> Result<(), SinkError> {
        Err(SinkError::failed(format!(
            "frame {} is partial",
            frame.frame_id
        )))
    }
}

fn run(plan: &Plan, frames: &[Vec<u8>], count: u64) -> Vec<(u64, Vec<Cluster>)> {
    let mut sink = Collect::default();
    let report = executor::run(
        plan,
        &mut FrameReplay::new(frames.to_vec(), count),
        &mut sink,
    )
    .unwrap();
    assert_eq!(report.frames, count);
    sink.frames
}

/// Runs `scene` through the pipeline and checks every frame against the reference.
fn matches_reference(config: SceneConfig, frames: u64) {
    let cpi = config.cpi;
    let scene = Scene::new(config).unwrap();
    let prepared: Vec<Vec<u8>> = (0..frames).map(|f| frame_bytes(&scene, f)).collect();
    let got = run(&plan(cpi, 2, 3), &prepared, frames);
    let params = CfarParams::default();
    let mut verifier = Verifier::new(scene.clone(), VerifyConfig::for_cpi(cpi, 1e-6), frames)
        .with_template_period(NonZeroU64::new(frames).unwrap());
    for (id, clusters) in &got {
        let mut iq = vec![[0i16; 2]; cpi.cells()];
        scene.generate_frame(*id, &mut iq).unwrap();
        let want = reference::detect(&iq, cpi, &params);
        let cells = |c: &[Cluster]| {
            c.iter()
                .map(|c| (c.range_bin, c.doppler_bin))
                .collect::<Vec<_>>()
        };
        let want_cells: Vec<(u32, u32)> =
            want.iter().map(|d| (d.range_bin, d.doppler_bin)).collect();
        assert_eq!(
            cells(clusters),
            want_cells,
            "frame {id}: clusters differ from the reference"
        );
        for (c, w) in clusters.iter().zip(&want) {
            let rel = (f64::from(c.power) - w.power).abs() / w.power;
            assert!(
                rel < 1e-4,
                "frame {id}: power {} vs reference {} (relative {rel:e})",
                c.power,
                w.power
            );
        }
        assert!(
            verifier.check(*id, clusters).passed(),
            "frame {id} fails verification"
        );
    }
    assert!(
        verifier.summary().passed(verifier.config()),
        "{:?}",
        verifier.summary()
    );
}

#[test]
fn default_scene_matches_the_reference() {
    matches_reference(
        SceneConfig::new(Cpi {
            samples: 1024,
            chirps: 128,
        }),
        3,
    );
}

#[test]
fn high_snr_scene_matches_the_reference() {
    let mut config = SceneConfig::new(Cpi {
        samples: 1024,
        chirps: 128,
    });
    config.targets = high_snr_targets();
    config.seed = 7;
    matches_reference(config, 3);
}

#[test]
fn pure_noise_gives_the_references_false_alarms() {
    let mut config = SceneConfig::new(Cpi {
        samples: 1024,
        chirps: 128,
    });
    config.targets.clear();
    config.seed = 11;
    let cpi = config.cpi;
    let scene = Scene::new(config).unwrap();
    let prepared: Vec<Vec<u8>> = (0..4).map(|f| frame_bytes(&scene, f)).collect();
    let got = run(&plan(cpi, 2, 2), &prepared, 4);
    let mut crossings = 0;
    for (id, clusters) in &got {
        let mut iq = vec![[0i16; 2]; cpi.cells()];
        scene.generate_frame(*id, &mut iq).unwrap();
        let want: Vec<(u32, u32)> = reference::detect(&iq, cpi, &CfarParams::default())
            .iter()
            .map(|d| (d.range_bin, d.doppler_bin))
            .collect();
        let cells: Vec<(u32, u32)> = clusters
            .iter()
            .map(|c| (c.range_bin, c.doppler_bin))
            .collect();
        assert_eq!(cells, want, "frame {id}");
        crossings += cells.len();
    }
    assert!(
        crossings <= 8,
        "noise alone crosses rarely at Pfa 1e-6: {crossings} clusters in 4 frames"
    );
}

#[test]
fn targets_across_both_wrap_edges_match_the_reference() {
    // A target near range bin 0 moving away at a speed whose Doppler bin folds near M.
    let cpi = Cpi {
        samples: 512,
        chirps: 64,
    };
    let mut config = SceneConfig::new(cpi);
    config.targets = vec![
        kplace_radar::Target {
            range_m: 0.3,
            velocity_mps: -0.4,
            snr_db: 12.0,
        },
        kplace_radar::Target {
            range_m: 40.0,
            velocity_mps: 3.0,
            snr_db: 6.0,
        },
    ];
    matches_reference(config, 2);
}

#[test]
fn output_is_byte_identical_across_workers_and_slots() {
    let cpi = Cpi {
        samples: 1024,
        chirps: 128,
    };
    let scene = Scene::new(SceneConfig::new(cpi)).unwrap();
    let prepared: Vec<Vec<u8>> = (0..3).map(|f| frame_bytes(&scene, f)).collect();
    let baseline = run(&plan(cpi, 1, 1), &prepared, 12);
    assert!(
        baseline.iter().all(|(_, c)| c.len() >= 3),
        "every frame has its targets"
    );
    for (workers, slots) in [(2, 2), (3, 4), (1, 6)] {
        let other = run(&plan(cpi, workers, slots), &prepared, 12);
        type Bits = Vec<(u64, Vec<(u32, u32, u32)>)>;
        let bits = |f: &[(u64, Vec<Cluster>)]| -> Bits {
            f.iter()
                .map(|(id, c)| {
                    (
                        *id,
                        c.iter()
                            .map(|c| (c.range_bin, c.doppler_bin, c.power.to_bits()))
                            .collect(),
                    )
                })
                .collect()
        };
        assert_eq!(
            bits(&baseline),
            bits(&other),
            "{workers} workers, {slots} slots"
        );
    }
}

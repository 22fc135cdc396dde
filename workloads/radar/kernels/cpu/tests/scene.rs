//! The CPU kernels on scene data, stage by stage, against the f64 reference receiver of
//! `kplace-radar`: the range-Doppler power map within a stated bound, and CFAR and clustering
//! on that same map giving the reference's detections exactly.

mod common;

use common::{Buf, Setup, desc, launch, read_list, whole};
use kplace_abi::Dtype;
use kplace_cpu::{Cfar, Cluster, DopplerFft, RangeFft};
use kplace_kernels::Detection;
use kplace_radar::reference::{self, CfarParams};
use kplace_radar::scene::high_snr_targets;
use kplace_radar::{Cpi, Scene, SceneConfig};

/// The map through the library's range and Doppler kernels, as f32.
fn power_map(iq: &[[i16; 2]], cpi: Cpi) -> Vec<f32> {
    let (n, m) = (cpi.samples as u64, cpi.chirps as u64);
    let iq_desc = desc(Dtype::CI16, &[m, n]);
    let map_desc = desc(Dtype::CF32, &[n, m]);
    let power_desc = desc(Dtype::F32, &[n, m]);
    let mut input = Buf::for_desc(&iq_desc);
    input.slice_mut::<[i16; 2]>().copy_from_slice(iq);
    let map = Buf::for_desc(&map_desc);
    let power = Buf::for_desc(&power_desc);
    let range: RangeFft = Setup::new(&[], &[iq_desc], &[map_desc]).create().unwrap();
    launch(&range, (iq_desc, &input), (map_desc, &map), whole(m)).unwrap();
    let doppler: DopplerFft = Setup::new(&[], &[map_desc], &[power_desc])
        .create()
        .unwrap();
    launch(&doppler, (map_desc, &map), (power_desc, &power), whole(n)).unwrap();
    power.slice::<f32>().to_vec()
}

fn cfar_and_cluster(power: &[f32], cpi: Cpi) -> (Vec<Detection>, Vec<Detection>) {
    let (n, m) = (cpi.samples as u64, cpi.chirps as u64);
    let power_desc = desc(Dtype::F32, &[n, m]);
    let list_desc = desc(Dtype::RECORDS, &[16384]);
    let clusters_desc = desc(Dtype::RECORDS, &[4096]);
    let mut input = Buf::for_desc(&power_desc);
    input.slice_mut::<f32>().copy_from_slice(power);
    let list = Buf::for_desc(&list_desc);
    let clusters = Buf::for_desc(&clusters_desc);
    let cfar: Cfar = Setup::new(&[], &[power_desc], &[list_desc])
        .create()
        .unwrap();
    launch(&cfar, (power_desc, &input), (list_desc, &list), whole(n)).unwrap();
    let (n_text, m_text) = (n.to_string(), m.to_string());
    let params = [
        ("range_bins", n_text.as_str()),
        ("doppler_bins", m_text.as_str()),
    ];
    let cluster: Cluster = Setup::new(&params, &[list_desc], &[clusters_desc])
        .create()
        .unwrap();
    launch(
        &cluster,
        (list_desc, &list),
        (clusters_desc, &clusters),
        whole(16384),
    )
    .unwrap();
    let (h1, detections) = read_list(&list);
    let (h2, clusters) = read_list(&clusters);
    assert_eq!((h1.overflow, h2.overflow), (0, 0));
    (detections, clusters)
}

fn check_scene(config: SceneConfig, frames: u64) {
    let cpi = config.cpi;
    let scene = Scene::new(config).unwrap();
    let mut iq = vec![[0i16; 2]; cpi.cells()];
    for frame in 0..frames {
        scene.generate_frame(frame, &mut iq).unwrap();
        let got = power_map(&iq, cpi);
        let want = reference::range_doppler_power(&iq, cpi);
        // f32 FFTs against f64: error relative to the map's peak, the bound rustfft and FFTW
        // both meet on random data.
        let peak = want.iter().cloned().fold(0.0, f64::max);
        let worst = got
            .iter()
            .zip(&want)
            .map(|(&g, &w)| (f64::from(g) - w).abs())
            .fold(0.0, f64::max);
        assert!(
            worst / peak < 1e-5,
            "frame {frame}: power error {:.2e} of peak",
            worst / peak
        );

        // CFAR and clustering on the library's own map, against the reference on that map.
        let (detections, clusters) = cfar_and_cluster(&got, cpi);
        let as_f64: Vec<f64> = got.iter().map(|&p| f64::from(p)).collect();
        let want_detections = reference::cfar(&as_f64, cpi, &CfarParams::default());
        let cells = |d: &[Detection]| {
            d.iter()
                .map(|d| (d.range_bin, d.doppler_bin, d.power))
                .collect::<Vec<_>>()
        };
        let want_cells: Vec<(u32, u32, f32)> = want_detections
            .iter()
            .map(|d| (d.range_bin, d.doppler_bin, d.power as f32))
            .collect();
        assert_eq!(
            cells(&detections),
            want_cells,
            "frame {frame}: CFAR detections"
        );
        let want_clusters: Vec<(u32, u32, f32)> = reference::cluster(&want_detections, cpi)
            .iter()
            .map(|d| (d.range_bin, d.doppler_bin, d.power as f32))
            .collect();
        assert_eq!(cells(&clusters), want_clusters, "frame {frame}: clusters");
        assert!(
            clusters.len() >= scene.config().targets.len(),
            "frame {frame}: every target clusters"
        );
    }
}

#[test]
fn default_scene_stage_by_stage() {
    check_scene(
        SceneConfig::new(Cpi {
            samples: 1024,
            chirps: 128,
        }),
        2,
    );
}

#[test]
fn high_snr_scene_stage_by_stage() {
    let mut config = SceneConfig::new(Cpi {
        samples: 1024,
        chirps: 128,
    });
    config.targets = high_snr_targets();
    check_scene(config, 2);
}

#[test]
fn larger_cpi_stage_by_stage() {
    let mut config = SceneConfig::new(Cpi {
        samples: 2048,
        chirps: 256,
    });
    config.targets = high_snr_targets();
    config.seed = 5;
    check_scene(config, 1);
}

#[test]
fn largest_cpi_high_snr_stage_by_stage() {
    // The strongest powers of the workload (about 1e19): the fixed point must not saturate.
    let mut config = SceneConfig::new(Cpi {
        samples: 4096,
        chirps: 512,
    });
    config.targets = high_snr_targets();
    config.seed = 2;
    check_scene(config, 1);
}

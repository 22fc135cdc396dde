//! Times `Scene::generate_frame` at each CPI size of docs/workload.md.
//!
//! `cargo run --release -p kplace-radar --example scene_timing`

use std::time::Instant;

use kplace_radar::scene::{Scene, SceneConfig, high_snr_targets};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for size in ["1024x128", "2048x256", "4096x512"] {
        let scene = Scene::new(SceneConfig {
            targets: high_snr_targets(),
            ..SceneConfig::new(size.parse()?)
        })?;
        let mut out = vec![[0i16; 2]; scene.cpi().cells()];
        scene.generate_frame(0, &mut out)?; // warm-up
        let frames = 20;
        let start = Instant::now();
        for f in 0..frames {
            scene.generate_frame(f, &mut out)?;
        }
        let per_frame = start.elapsed() / frames as u32;
        println!("{size}: {per_frame:?} per frame");
    }
    Ok(())
}

//! `kplace verify`: check any receiver's detections file against the scene's truth.

use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;
use kplace_radar::{Verifier, VerifyConfig, read_detections};

use super::args::SceneArgs;
use super::radar::{self, DEFAULT_PFA};

/// Options of `kplace verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The detections file to check.
    #[arg(long, value_name = "FILE")]
    detections: PathBuf,
    /// Frames the receiver was sent (ids 0..FRAMES); every one must be reported exactly once.
    #[arg(long)]
    frames: u64,
    #[command(flatten)]
    scene: SceneArgs,
    /// False-alarm probability the receiver used; sets the false-alarm bound.
    #[arg(long, default_value_t = DEFAULT_PFA)]
    pfa: f64,
}

/// Reads the file and judges every frame in it.
pub fn main(args: VerifyArgs) -> anyhow::Result<ExitCode> {
    let path = &args.detections;
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let (cpi, reports) = read_detections(BufReader::new(file), &path.display().to_string())?;
    if cpi != args.scene.cpi {
        bail!(
            "{} reports CPI {cpi}, but the scene is {} (pass --cpi {cpi})",
            path.display(),
            args.scene.cpi
        );
    }
    let scene = args.scene.scene()?;
    let period = args.scene.scene_frames(args.frames)?;
    let mut verifier = Verifier::new(scene, VerifyConfig::for_cpi(cpi, args.pfa), args.frames)
        .with_template_period(period);
    for report in &reports {
        verifier.check(report.frame_id, &report.clusters);
    }
    let passed = radar::print_verdict(&verifier, args.frames);
    Ok(if passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

//! `kplace verify`: check any receiver's detections file against the scene's truth.

use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;
use kplace_radar::graph::{DEFAULT_PFA, check_pfa};
use kplace_radar::{DetectionReader, Verifier, VerifyConfig, verdict_text};

use super::args::SceneArgs;

/// Options of `kplace verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The detections file to check, read frame by frame (a pipe or FIFO works too).
    #[arg(long, value_name = "FILE")]
    detections: PathBuf,
    /// Frames the receiver was sent (ids 0..FRAMES); every one must be reported exactly once
    /// (a report of an id outside 0..FRAMES, or of one id twice, is an input error at its line).
    #[arg(long)]
    frames: u64,
    #[command(flatten)]
    scene: SceneArgs,
    /// False-alarm probability the receiver used; sets the false-alarm bound.
    #[arg(long, default_value_t = DEFAULT_PFA)]
    pfa: f64,
}

/// Reads the file frame by frame and judges each frame as it is read. A frame id outside
/// `0..--frames` is an input error at its line, so an endless input ends within `--frames`
/// frames.
pub fn main(args: VerifyArgs) -> anyhow::Result<ExitCode> {
    check_pfa(args.pfa, "--pfa")?;
    if args.frames == 0 {
        bail!("--frames must be at least 1: a verification of no frames would pass vacuously");
    }
    let path = &args.detections;
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut reader = DetectionReader::new(BufReader::new(file), &path.display().to_string())?
        .with_frame_limit(args.frames);
    let cpi = reader.cpi();
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
    while let Some(report) = reader.next_frame()? {
        verifier.check(report.frame_id, &report.clusters);
    }
    let (passed, verdict) = verdict_text(&verifier, args.frames);
    print!("{verdict}");
    Ok(if passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

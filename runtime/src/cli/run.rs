//! `kplace run`: the radar graph on a generated scene, every frame verified.

use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use kplace::executor;
use kplace::plan::Plan;
use kplace::source::FrameReplay;
use kplace_radar::{DetectionWriter, Verifier, VerifyConfig};

use super::args::{GraphArgs, SceneArgs};
use super::radar::{self, RadarSink};

/// Options of `kplace run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    graph: GraphArgs,
    #[command(flatten)]
    scene: SceneArgs,
    /// Frames to process.
    #[arg(long, default_value_t = 200)]
    frames: u64,
    /// CFAR false-alarm probability (overrides the graph's; also sets the verifier's bound).
    #[arg(long)]
    pfa: Option<f64>,
    /// Write every frame's clusters to this file, in the detection line format.
    #[arg(long, value_name = "FILE")]
    detections: Option<PathBuf>,
}

/// Plans, prepares the scene, runs, verifies and reports.
pub fn main(args: RunArgs) -> anyhow::Result<ExitCode> {
    let cpi = args.scene.cpi;
    let pfa_set = radar::pfa_override(&args.graph.graph, args.pfa)?;
    let (graph, placement) = args.graph.load(cpi, &pfa_set)?;
    radar::check_graph_fits(&graph, cpi)?;
    let pfa = radar::graph_pfa(&graph)?;
    let plan = Plan::new(graph, placement)?;

    let scene = args.scene.scene()?;
    let period = args.scene.scene_frames(args.frames);
    let prepared_at = Instant::now();
    let frames = radar::prepare_frames(&scene, period.get())?;
    eprintln!(
        "kplace run: graph {} on placement {}, CPI {cpi}, {} frames ({} distinct scene frames prepared in {:.2} s), seed {}",
        plan.graph.name,
        plan.placement.name,
        args.frames,
        period,
        prepared_at.elapsed().as_secs_f64(),
        args.scene.seed
    );

    let writer = match &args.detections {
        Some(path) => {
            let file =
                File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
            Some(
                DetectionWriter::new(BufWriter::new(file), cpi)
                    .with_context(|| format!("cannot write {}", path.display()))?,
            )
        }
        None => None,
    };
    let verifier = Verifier::new(scene, VerifyConfig::for_cpi(cpi, pfa), args.frames)
        .with_template_period(period);
    let mut sink = RadarSink::new(verifier, writer);
    let mut source = FrameReplay::new(frames, args.frames);

    let report = executor::run(&plan, &mut source, &mut sink)?;
    print!("{report}");
    println!(
        "clusters {:.2}/frame{}",
        sink.total_clusters as f64 / report.frames.max(1) as f64,
        if sink.overflowed_frames > 0 {
            format!(
                ", {} frames overflowed the cluster list",
                sink.overflowed_frames
            )
        } else {
            String::new()
        }
    );
    let verifier = sink.finish()?;
    let passed = radar::print_verdict(&verifier, args.frames);
    Ok(if passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

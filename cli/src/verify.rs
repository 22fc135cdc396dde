//! `kplace verify`: check what any receiver wrote (the radar's detections file) against the
//! graph's workload, frame by frame ([`kplace::workload::kind::ResultsFiles::judge_results`]).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::bail;
use clap::Args;
use kplace::workload::kind::Request;

use super::args::ShapeArgs;
use super::workloads::WorkloadArgs;

/// Options of `kplace verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The results file to check (the radar: a detections file), read frame by frame (a pipe
    /// or FIFO works too).
    #[arg(long, visible_alias = "results", value_name = "FILE")]
    detections: PathBuf,
    /// Frames the receiver was sent (ids 0..FRAMES); every one must be reported exactly once
    /// (a report of an id outside 0..FRAMES, or of one id twice, is an input error at its line).
    #[arg(long)]
    frames: u64,
    /// The graph whose workload generated the frames and judges the results: a file or a name.
    #[arg(long, default_value = "radar", value_name = "FILE|NAME")]
    graph: PathBuf,
    #[command(flatten)]
    shape: ShapeArgs,
    #[command(flatten)]
    workload: WorkloadArgs,
}

/// Reads the file frame by frame and judges each frame as it is read. A frame id outside
/// `0..--frames` is an input error at its line, so an endless input ends within `--frames`
/// frames.
pub fn main(args: VerifyArgs) -> anyhow::Result<ExitCode> {
    if args.frames == 0 {
        bail!("--frames must be at least 1: a verification of no frames would pass vacuously");
    }
    let files = args.shape.graph_only(&args.graph)?;
    let options = args.workload.options();
    let request = Request {
        files: &files,
        options: &options,
        recording: None,
        seed: args.workload.seed,
        frames: args.frames,
        pipelines: 0,
        replay: false,
    };
    let verdict = crate::workloads::registry()
        .kind_for(&request)?
        .judge_results(&request, &args.detections)?;
    print!("{}", verdict.text);
    Ok(if verdict.verification.passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

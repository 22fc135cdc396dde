//! What the replay source costs per frame when the first stage is on a GPU (issue 50, item 1):
//! all-gpu on the simulated GPU (`kplace::cuda::sim`, no GPU needed), the replay writing each
//! frame into its slot packet by packet (`FrameReplay::by_packets`, as every replay did before)
//! against handing over frames it staged once in pinned memory (the default when only a GPU
//! stage reads the samples), in one process, rounds alternating. It prints the source thread's
//! time per frame from the run report's overhead (`source_us_per_frame`), the one-time staging,
//! and the frames per second of the whole simulated pipeline.
//!
//! The GPU library is a stand-in with CUDA variants that compute on the host (the runtime's
//! test kernels `runtime/tests/c/radar_shapes.c`), so only the host's side is real: the
//! source's copies are this machine's, the "GPU" is its other threads. Build it first:
//!
//! ```text
//! cc -shared -fPIC -O2 -std=c11 -I runtime/include runtime/tests/c/radar_shapes.c -lm \
//!    -o target/libradar_shapes.so
//! cargo build -p kplace-bench --bin source_cost
//! target/debug/source_cost --library target/libradar_shapes.so --cpi 1024x128,4096x512
//! ```

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Parser;
use kplace::cuda::sim::SimProvider;
use kplace::executor::{self, CompletedFrame, FrameSink, PartialFrame, SinkError};
use kplace::model::graph::{Graph, Overrides};
use kplace::model::placement::Placement;
use kplace::net::replay::FrameReplay;
use kplace::plan::{Plan, PlanMode};
use kplace_radar::Cpi;

#[derive(Debug, Parser)]
struct Args {
    /// The stand-in kernel library (CUDA variants computing on the host), for both device
    /// kinds.
    #[arg(long)]
    library: PathBuf,
    /// CPI sizes, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "1024x128,4096x512")]
    cpi: Vec<Cpi>,
    /// Frames per measurement.
    #[arg(long, default_value_t = 200)]
    frames: u64,
    /// Distinct prepared frames replayed in turn.
    #[arg(long, default_value_t = 8)]
    prepared: usize,
    /// Alternating rounds.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Graph file.
    #[arg(long, default_value = "workloads/radar/graph.yaml")]
    graph: PathBuf,
    /// Placement file (its libraries are replaced by `--library`).
    #[arg(long, default_value = "workloads/radar/placements/all-gpu.yaml")]
    placement: PathBuf,
}

/// Takes every frame and keeps nothing.
struct Discard;

impl FrameSink for Discard {
    fn frame(&mut self, _frame: &CompletedFrame<'_>) -> Result<(), SinkError> {
        Ok(())
    }

    fn partial(&mut self, _frame: &PartialFrame) -> Result<(), SinkError> {
        Ok(())
    }
}

/// One run's figures: source us per frame, staging ms, frames per second.
fn measure(
    args: &Args,
    cpi: Cpi,
    frames: &Arc<[Vec<u8>]>,
    staged: bool,
) -> anyhow::Result<[f64; 3]> {
    let overrides = Overrides {
        dims: vec![
            ("N".into(), cpi.samples as u64),
            ("M".into(), cpi.chirps as u64),
        ],
        params: Vec::new(),
    };
    let graph = Graph::load(&args.graph, &overrides).context("graph")?;
    let mut placement = Placement::load(&args.placement).context("placement")?;
    for kind in ["cpu", "gpu"] {
        placement
            .libraries
            .insert(kind.into(), args.library.clone());
    }
    placement.runtime.slots = 4;
    placement.runtime.auto_slots = None;
    let gpus = SimProvider::new(1);
    let plan = Plan::with_gpus(graph, placement, &gpus, PlanMode::Run).context("plan")?;
    let replay = FrameReplay::new(Arc::clone(frames), args.frames);
    let mut source = if staged { replay } else { replay.by_packets() };
    let metrics = executor::run(&plan, &mut source, &mut Discard).context("run")?;
    let per_frame = metrics.overhead.per_frame();
    let rate = metrics.frames as f64 / metrics.wall.as_secs_f64().max(1e-9);
    Ok([per_frame.source_us, per_frame.source_staging_ms, rate])
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    println!(
        "| CPI | frame | source per frame, packets (us) | source per frame, staged (us) | staging once (ms) | sim frames/s, packets | sim frames/s, staged |"
    );
    println!("|---|---|---|---|---|---|---|");
    for &cpi in &args.cpi {
        let bytes = cpi.samples * cpi.chirps * 4;
        let frames: Arc<[Vec<u8>]> = (0..args.prepared)
            .map(|i| (0..bytes).map(|b| (b * 31 + i * 7) as u8).collect())
            .collect();
        let mut rounds: [Vec<[f64; 3]>; 2] = [Vec::new(), Vec::new()];
        for _ in 0..args.rounds {
            for (i, staged) in [false, true].into_iter().enumerate() {
                rounds[i].push(measure(&args, cpi, &frames, staged)?);
            }
        }
        let of = |i: usize, k: usize| median(rounds[i].iter().map(|r| r[k]).collect());
        println!(
            "| {}x{} | {:.1} MiB | {:.1} | {:.1} | {:.1} | {:.0} | {:.0} |",
            cpi.samples,
            cpi.chirps,
            bytes as f64 / (1 << 20) as f64,
            of(0, 0),
            of(1, 0),
            of(1, 1),
            of(0, 2),
            of(1, 2)
        );
    }
    Ok(())
}

//! The tune model against closed-loop runs on the CPU: calibrates this machine for the radar
//! (as `kplace tune` does), predicts every CPU placement's closed-loop rate (workers crossed
//! with slots), then runs each closed loop in the same process, in rounds that alternate the
//! placements, every frame verified. Prints the prediction, the median measured rate and the
//! error per placement.
//!
//! ```text
//! cargo build --release --workspace
//! target/release/tune_model --cpi 1024x128,2048x256 --workers 1,2 --slots 1,2,4 --rounds 3
//! ```

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use kplace::cuda::driver::CudaProvider;
use kplace::model::files::GraphFiles;
use kplace::model::graph::Graph;
use kplace::model::placement::Device;
use kplace::plan::bind::find_default_library;
use kplace::workload::Workload;
use kplace_lab::tune::calibrate::{self, CalibrationKey, LibraryBuild, Setup};
use kplace_lab::tune::model::Feed;
use kplace_lab::tune::space::{self, Knobs, Offers};
use kplace_radar::Cpi;
use kplace_radar::run::{RunConfig, Setup as RadarSetup};
use kplace_radar::scene::SceneConfig;

#[derive(Debug, Parser)]
struct Args {
    /// CPI sizes, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "1024x128,2048x256")]
    cpi: Vec<Cpi>,
    /// Worker counts.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    workers: Vec<usize>,
    /// Slot counts.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    slots: Vec<usize>,
    /// Rounds of closed-loop runs, each placement once per round.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// About how long each run (calibration and measurement) lasts, seconds.
    #[arg(long, default_value_t = 1.5)]
    seconds: f64,
    /// Graph file.
    #[arg(long, default_value = "workloads/radar/graph.yaml")]
    graph: PathBuf,
    /// A placement the workload is prepared with (its stages are not used).
    #[arg(long, default_value = "workloads/radar/placements/all-cpu.yaml")]
    placement: PathBuf,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "| CPI | placement | predicted CPI/s | bound | measured CPI/s (median of {}) | error |",
        args.rounds
    );
    println!("|---|---|---|---|---|---|");
    for &cpi in &args.cpi {
        let files = GraphFiles::read(&args.graph, &args.placement)?;
        let run = RunConfig::replay_of(files, SceneConfig::new(cpi))?;
        let workload = RadarSetup::new(&run)?;
        let graph = Graph::load(
            &args.graph,
            &kplace_radar::graph::cpi_overrides(cpi, Vec::new()),
        )?;
        let cpu = find_default_library(Device::Cpu)?;
        let offers = Offers::of_libraries(Some(&cpu), None)?;
        let libraries = format!(
            "libraries: {{cpu: {}}}\n",
            serde_json::to_string(&cpu.display().to_string())?
        );
        let setup = Setup {
            graph: &graph,
            offers: &offers,
            libraries: &libraries,
            workload: &workload,
            gpus: CudaProvider::global(),
            gpu: None,
            seconds: args.seconds,
            key: CalibrationKey {
                machine: "bench".into(),
                cores,
                gpu: None,
                libraries: vec![LibraryBuild::of(&cpu)?],
                graph: calibrate::graph_identity(&graph),
                shape: workload.shape().to_string(),
                workload: workload.describe(),
                cotenant: None,
            },
        };
        let calibration = calibrate::measure(&setup).context("calibration")?;
        let knobs = Knobs {
            workers: args.workers.clone(),
            slots: args.slots.clone(),
            gpu_tiles: Vec::new(),
            gpu: 0,
        };
        let space = space::enumerate(&graph, &offers, &knobs);
        let (predicted, _) =
            kplace_lab::tune::predict_all(&graph, &space, &calibration, Feed::Replay, cores as f64);
        let mut measured = vec![Vec::new(); predicted.len()];
        for _ in 0..args.rounds {
            for (p, rates) in predicted.iter().zip(&mut measured) {
                let frames = (p.prediction.rate * args.seconds).clamp(30.0, 20_000.0) as u64;
                let (report, _) = calibrate::replay(&setup, &p.candidate, &p.label, frames, false)?;
                rates.push(report.frames_per_s);
            }
        }
        for (p, rates) in predicted.iter().zip(&mut measured) {
            rates.sort_by(f64::total_cmp);
            let median = rates[rates.len() / 2];
            println!(
                "| {cpi} | {} | {:.1} | {} | {:.1} | {:+.1}% |",
                p.label,
                p.prediction.rate,
                p.prediction.bottleneck.name(),
                median,
                (p.prediction.rate / median - 1.0) * 100.0
            );
        }
    }
    Ok(())
}

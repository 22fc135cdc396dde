//! Runtime overhead: the radar kernels back to back on one thread with no runtime
//! (kernel-only), against `kplace`'s executor with the in-process source on one worker, same
//! kernels, same CPI, in one process, for each slot count and worker spin asked for. Rounds
//! alternate the measurements so that machine noise hits all of them; the first table reports
//! medians and ratios, the second where the runtime's time per frame went in the median round
//! (`kplace::report::overhead`): the kernels inside the runtime (against kernel-only's time per
//! frame), completion bookkeeping, the worker parked waiting for work or spinning for it, the
//! source's and the collector's time, and how many sets of stage buffers (the tensors that
//! live only while a frame's stages run) the frames bound at once.
//!
//! ```text
//! cargo build --release --workspace
//! target/release/overhead --cpi 1024x128,2048x256 --slots 1,4 --spin-us 0,50 --frames 300 --rounds 3
//! ```

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use kplace::executor::{self, CompletedFrame, FrameSink, PartialFrame, SinkError};
use kplace::model::graph::{Graph, Overrides};
use kplace::model::placement::Placement;
use kplace::net::replay::FrameReplay;
use kplace::plan::Plan;
use kplace::report::metrics::RunMetrics;
use kplace_radar::{Cpi, Scene, SceneConfig};

#[derive(Debug, Parser)]
struct Args {
    /// CPI sizes, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "1024x128,2048x256")]
    cpi: Vec<Cpi>,
    /// Frames per measurement.
    #[arg(long, default_value_t = 400)]
    frames: u64,
    /// Frame slots in flight for the runtime measurements, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "1,4")]
    slots: Vec<usize>,
    /// How long an idle executor thread spins before it sleeps, in us (a placement's
    /// `runtime.spin_us`), comma separated: each is measured.
    #[arg(long, value_delimiter = ',', default_value = "0,50")]
    spin_us: Vec<u64>,
    /// Alternating rounds of kernel-only and runtime measurements.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Graph file.
    #[arg(long, default_value = "workloads/radar/graph.yaml")]
    graph: PathBuf,
    /// Placement file (its workers setting is replaced by 1).
    #[arg(long, default_value = "workloads/radar/placements/all-cpu.yaml")]
    placement: PathBuf,
    /// Pin the worker to this core (the source and collector then keep to the others), as a
    /// placement's `pin_cores: [CORE]` does; unpinned without it.
    #[arg(long)]
    pin: Option<usize>,
}

/// One runtime configuration measured: slots and spin.
#[derive(Clone, Copy)]
struct Config {
    slots: usize,
    spin: Duration,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let configs: Vec<Config> = args
        .slots
        .iter()
        .flat_map(|&slots| {
            args.spin_us.iter().map(move |&us| Config {
                slots,
                spin: Duration::from_micros(us),
            })
        })
        .collect();
    let mut breakdown = Vec::new();
    print!("| CPI | kernel-only CPI/s |");
    for c in &configs {
        print!(
            " runtime, {} slot(s), spin {} us | ratio |",
            c.slots,
            c.spin.as_micros()
        );
    }
    println!();
    println!("|---|---|{}", "---|---|".repeat(configs.len()));
    for &cpi in &args.cpi {
        let plans = configs
            .iter()
            .map(|&c| plan(&args, cpi, c))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let scene = Scene::new(SceneConfig::new(cpi))?;
        let frames = prepare(&scene, 8)?;
        let mut kernel_only = Vec::new();
        let mut runs: Vec<Vec<RunMetrics>> = vec![Vec::new(); configs.len()];
        for round in 0..args.rounds {
            kernel_only.push(kplace_lab::bounds::kernel_only_rate(
                &plans[0],
                &frames,
                args.frames,
            )?);
            for (metrics, plan) in runs.iter_mut().zip(&plans) {
                metrics.push(runtime_run(plan, &frames, args.frames)?);
            }
            let last: Vec<String> = runs
                .iter()
                .map(|r| format!("{:.1}", r[round].frames_per_second()))
                .collect();
            eprintln!(
                "{cpi} round {round}: kernel-only {:.1}, runtime {} CPI/s",
                kernel_only[round],
                last.join(" / ")
            );
        }
        let k = median(&mut kernel_only);
        print!("| {cpi} | {k:.1} |");
        for (metrics, config) in runs.iter_mut().zip(&configs) {
            metrics.sort_by(|a, b| a.frames_per_second().total_cmp(&b.frames_per_second()));
            let m = &metrics[metrics.len() / 2];
            let r = m.frames_per_second();
            print!(" {r:.1} | {:.3} |", r / k);
            breakdown.push(breakdown_row(cpi, *config, k, m));
        }
        println!();
    }
    println!();
    println!(
        "Per frame, in the median round: kernel-only's time, the runtime's, and where the \
         runtime's went (one worker)."
    );
    println!();
    println!(
        "| CPI | slots | spin us | kernel-only ms | runtime ms | kernels ms | bookkeeping us \
         | parked us (parks) | spins | source us | collector us | stage sets bound |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for row in breakdown {
        println!("{row}");
    }
    Ok(())
}

/// One row of the breakdown table: `metrics` of a run of `config` at `cpi`, against
/// kernel-only's `kernel_only` CPI/s.
fn breakdown_row(cpi: Cpi, config: Config, kernel_only: f64, metrics: &RunMetrics) -> String {
    let p = metrics.overhead.per_frame();
    format!(
        "| {cpi} | {} | {} | {:.3} | {:.3} | {:.3} | {:.1} | {:.1} ({:.2}) | {:.2} | {:.1} | {:.1} | {} of {} |",
        config.slots,
        config.spin.as_micros(),
        1e3 / kernel_only,
        1e3 / metrics.frames_per_second(),
        p.launch_ms,
        p.bookkeeping_us,
        p.parked_us,
        p.parks,
        p.spins,
        p.source_us,
        p.collector_us,
        metrics.overhead.stage_sets_peak,
        metrics.overhead.stage_sets,
    )
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn plan(args: &Args, cpi: Cpi, config: Config) -> anyhow::Result<Plan> {
    let overrides = Overrides {
        dims: vec![
            ("N".into(), cpi.samples as u64),
            ("M".into(), cpi.chirps as u64),
        ],
        params: Vec::new(),
    };
    let graph = Graph::load(&args.graph, &overrides)?;
    let mut placement = Placement::load(&args.placement)?;
    placement.runtime.workers = 1;
    placement.runtime.slots = config.slots;
    placement.runtime.spin = config.spin;
    placement.runtime.pin_cores = args.pin.into_iter().collect();
    Ok(Plan::new(graph, placement)?)
}

fn prepare(scene: &Scene, count: u64) -> anyhow::Result<Vec<Vec<u8>>> {
    (0..count)
        .map(|f| scene.frame_bytes(f).context("scene"))
        .collect()
}

struct Discard;

impl FrameSink for Discard {
    fn frame(&mut self, frame: &CompletedFrame<'_>) -> Result<(), SinkError> {
        std::hint::black_box(frame.sink(0));
        Ok(())
    }

    fn partial(&mut self, frame: &PartialFrame) -> Result<(), SinkError> {
        Err(SinkError::failed(format!(
            "frame {} is partial",
            frame.frame_id
        )))
    }
}

fn runtime_run(plan: &Plan, frames: &[Vec<u8>], count: u64) -> anyhow::Result<RunMetrics> {
    let mut source = FrameReplay::new(frames.to_vec(), count);
    Ok(executor::run(plan, &mut source, &mut Discard)?)
}

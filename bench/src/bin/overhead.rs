//! Runtime overhead: the radar kernels back to back on one thread with no runtime
//! (kernel-only), against `kplace`'s executor with the in-process source on one worker, same
//! kernels, same CPI, in one process, for each slot count asked for. Rounds alternate the
//! measurements so that machine noise hits all of them; the table reports medians and ratios.
//!
//! ```text
//! cargo build --release --workspace
//! target/release/overhead --cpi 1024x128,2048x256 --slots 1,4 --frames 400 --rounds 5
//! ```

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use kplace::executor::{self, CompletedFrame, FrameSink, PartialFrame, SinkError};
use kplace::model::graph::{Graph, Overrides};
use kplace::model::placement::Placement;
use kplace::net::replay::FrameReplay;
use kplace::plan::Plan;
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
    /// Alternating rounds of kernel-only and runtime measurements.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Graph file.
    #[arg(long, default_value = "graphs/radar.yaml")]
    graph: PathBuf,
    /// Placement file (its workers setting is replaced by 1).
    #[arg(long, default_value = "placements/all-cpu.yaml")]
    placement: PathBuf,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    print!("| CPI | kernel-only CPI/s |");
    for slots in &args.slots {
        print!(" runtime, 1 worker, {slots} slot(s) | ratio |");
    }
    println!();
    println!("|---|---|{}", "---|---|".repeat(args.slots.len()));
    for &cpi in &args.cpi {
        let plans = args
            .slots
            .iter()
            .map(|&slots| plan(&args, cpi, slots))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let scene = Scene::new(SceneConfig::new(cpi))?;
        let frames = prepare(&scene, 8)?;
        let mut kernel_only = Vec::new();
        let mut runtime = vec![Vec::new(); plans.len()];
        for round in 0..args.rounds {
            kernel_only.push(kplace_lab::bounds::kernel_only_rate(
                &plans[0],
                &frames,
                args.frames,
            )?);
            for (rates, plan) in runtime.iter_mut().zip(&plans) {
                rates.push(runtime_rate(plan, &frames, args.frames)?);
            }
            let last: Vec<String> = runtime.iter().map(|r| format!("{:.1}", r[round])).collect();
            eprintln!(
                "{cpi} round {round}: kernel-only {:.1}, runtime {} CPI/s",
                kernel_only[round],
                last.join(" / ")
            );
        }
        let k = median(&mut kernel_only);
        print!("| {cpi} | {k:.1} |");
        for rates in &mut runtime {
            let r = median(rates);
            print!(" {r:.1} | {:.3} |", r / k);
        }
        println!();
    }
    Ok(())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn plan(args: &Args, cpi: Cpi, slots: usize) -> anyhow::Result<Plan> {
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
    placement.runtime.slots = slots;
    placement.runtime.pin_cores.clear();
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
        Err(SinkError(format!("frame {} is partial", frame.frame_id)))
    }
}

fn runtime_rate(plan: &Plan, frames: &[Vec<u8>], count: u64) -> anyhow::Result<f64> {
    let mut source = FrameReplay::new(frames.to_vec(), count);
    let report = executor::run(plan, &mut source, &mut Discard)?;
    Ok(report.frames_per_second())
}

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
use std::time::Instant;

use anyhow::Context;
use clap::Parser;
use kplace::abi::{Tensor, Tile};
use kplace::executor::{self, CompletedFrame, FrameSink, PartialFrame, SinkError};
use kplace::graph::{Graph, Overrides, StageId};
use kplace::placement::Placement;
use kplace::plan::{Plan, tensor_desc};
use kplace::pool::Pool;
use kplace::source::FrameReplay;
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
            kernel_only.push(kernel_only_rate(&plans[0], &frames, args.frames)?);
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

/// The plan's kernels launched in graph order on this thread, on buffers of one slot.
fn kernel_only_rate(plan: &Plan, frames: &[Vec<u8>], count: u64) -> anyhow::Result<f64> {
    let graph = &plan.graph;
    let mut buffers = Vec::new();
    let mut tensors = Vec::new();
    for (i, t) in graph.tensors.iter().enumerate() {
        let mut pool = Pool::host(t.name.clone(), t.bytes, 1)?;
        let block = pool.take().context("pool")?;
        tensors.push(Tensor {
            desc: tensor_desc(t, plan.edges[i].space),
            data: block.ptr.cast(),
        });
        buffers.push(pool);
    }
    let mut stages = Vec::new();
    for p in &plan.stages {
        let spec = graph.stage(p.stage);
        let state = plan.create_state(StageId(p.stage.0))?;
        let mut ws = Pool::host("ws", state.workspace_bytes(), 1)?;
        let block = ws.take().context("workspace")?;
        let inputs: Vec<Tensor> = spec.inputs.iter().map(|t| tensors[t.0]).collect();
        let outputs: Vec<Tensor> = spec.outputs.iter().map(|t| tensors[t.0]).collect();
        let extent = graph.tensor(spec.inputs[0]).shape[spec.split.map_or(0, |s| s.axis)];
        let tile = spec.split.map_or(extent, |s| s.tile);
        stages.push((state, inputs, outputs, ws, block, extent, tile));
    }
    let source = tensors[graph.source.tensor.0];
    let started = Instant::now();
    for f in 0..count {
        let frame = &frames[(f % frames.len() as u64) as usize];
        // The copy a receiver makes, as the runtime's source does.
        // SAFETY: the source buffer holds exactly one frame.
        unsafe {
            std::ptr::copy_nonoverlapping(frame.as_ptr(), source.data.cast::<u8>(), frame.len())
        };
        for (state, inputs, outputs, _, block, extent, tile) in &stages {
            for begin in (0..*extent).step_by(*tile as usize) {
                // SAFETY: buffers and workspace are sized by the plan; launches run one at a time.
                unsafe {
                    state.launch(
                        inputs,
                        outputs,
                        (block.ptr.cast(), block.bytes),
                        std::ptr::null_mut(),
                        Tile {
                            begin,
                            count: *tile,
                        },
                    )
                }?;
            }
        }
    }
    Ok(count as f64 / started.elapsed().as_secs_f64())
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

//! `kplace plan`: print what a graph on a placement resolves to.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use kplace::cuda::driver::CudaProvider;
use kplace::model::graph::{Graph, Overrides};
use kplace::plan::{Plan, PlanError, PlanMode};
use kplace::workload::generic::{BoundRecording, DEFAULT_FRAME_PERIOD};

use super::args::GraphArgs;

/// Options of `kplace plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    graph: GraphArgs,
    /// Plan as `kplace run --recording FILE` would: the graph bound to the recording's frame
    /// shape, and `slots: auto` sized at its frame period (a frame's samples at its sample
    /// rate).
    #[arg(long, value_name = "FILE")]
    recording: Option<PathBuf>,
}

/// Plans and prints. A GPU placement is described even where no GPU is usable (the plan says
/// so, and `kplace run` refuses it), so placements can be inspected on any machine; a plan
/// whose pools exceed this machine's memory is refused, as `kplace run` would refuse it.
pub fn main(args: PlanArgs) -> anyhow::Result<ExitCode> {
    let files = args.graph.files()?;
    let (graph, placement) = match &args.recording {
        // Bound and sized by the code `kplace run --recording` plans with.
        Some(recording) => BoundRecording::new(files, Overrides::default(), recording)?.load()?,
        None => {
            let probe = files.shaped_graph()?;
            // `slots: auto` is sized for the workload's real-time rate, where the graph
            // decides it.
            let period = crate::workloads::registry()
                .for_graph(&probe, false)
                .ok()
                .and_then(|kind| kind.frame_period(&probe));
            let loaded =
                files.load_with(Overrides::default(), period.unwrap_or(DEFAULT_FRAME_PERIOD))?;
            if period.is_none()
                && files.stream_rate.is_none()
                && loaded.1.runtime.auto_slots.is_some()
            {
                tracing::info!(
                    "kplace plan: slots: auto sized at {} ms a frame, a default: the graph's \
                     stream has no rate of its own here; give --recording FILE (what a run on \
                     it uses) or --stream-rate",
                    DEFAULT_FRAME_PERIOD.as_millis()
                );
            }
            loaded
        }
    };
    let shape = frame_shape(&graph);
    let plan = Plan::with_gpus(graph, placement, CudaProvider::global(), PlanMode::Describe)
        .map_err(|e| plan_error(e, &shape))?;
    print!("{plan}");
    Ok(ExitCode::SUCCESS)
}

/// The source's frame shape, innermost axis first (`1024x128`), as `--shape` takes it.
fn frame_shape(graph: &Graph) -> String {
    let extents: Vec<String> = graph
        .tensor(graph.source.tensor)
        .shape
        .iter()
        .rev()
        .map(u64::to_string)
        .collect();
    extents.join("x")
}

/// Adds the frame shape to a plan error about memory, which it decides; other plan errors pass
/// as they are.
fn plan_error(error: PlanError, shape: &str) -> anyhow::Error {
    match error {
        PlanError::OutOfMemory { .. } | PlanError::MemoryOverflow { .. } => {
            anyhow::Error::new(error).context(format!("frames of {shape} cannot run here"))
        }
        other => other.into(),
    }
}

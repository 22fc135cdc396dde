//! `kplace plan`: print what a graph on a placement resolves to.

use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use kplace::cuda::driver::CudaProvider;
use kplace::model::graph::{Graph, Overrides};
use kplace::plan::{Plan, PlanError, PlanMode};

use super::args::GraphArgs;

/// Options of `kplace plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    graph: GraphArgs,
}

/// Plans and prints. A GPU placement is described even where no GPU is usable (the plan says
/// so, and `kplace run` refuses it), so placements can be inspected on any machine; a plan
/// whose pools exceed this machine's memory is refused, as `kplace run` would refuse it.
pub fn main(args: PlanArgs) -> anyhow::Result<ExitCode> {
    let files = args.graph.files()?;
    let probe = files.shaped_graph()?;
    // `slots: auto` is sized for the workload's real-time rate, where the graph decides it.
    let period = crate::workloads::registry()
        .for_graph(&probe, false)
        .ok()
        .and_then(|kind| kind.frame_period(&probe))
        .unwrap_or(DEFAULT_FRAME_PERIOD);
    let (graph, placement) = files.load_with(Overrides::default(), period)?;
    let shape = frame_shape(&graph);
    let plan = Plan::with_gpus(graph, placement, CudaProvider::global(), PlanMode::Describe)
        .map_err(|e| plan_error(e, &shape))?;
    print!("{plan}");
    Ok(ExitCode::SUCCESS)
}

/// The frame period `slots: auto` is sized for when the workload does not decide it.
const DEFAULT_FRAME_PERIOD: Duration = Duration::from_millis(10);

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

//! `kplace plan`: print what a graph on a placement resolves to.

use std::process::ExitCode;

use clap::Args;
use kplace::cuda::driver::CudaProvider;
use kplace::plan::{Plan, PlanError, PlanMode};
use kplace_radar::Cpi;

use super::args::GraphArgs;

/// Options of `kplace plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    graph: GraphArgs,
    /// CPI size: SAMPLESxCHIRPS, bound to the graph's N and M.
    #[arg(long, default_value = "1024x128")]
    cpi: Cpi,
}

/// Plans and prints. A GPU placement is described even where no GPU is usable (the plan says
/// so, and `kplace run` refuses it), so placements can be inspected on any machine; a plan
/// whose pools exceed this machine's memory is refused, as `kplace run` would refuse it.
pub fn main(args: PlanArgs) -> anyhow::Result<ExitCode> {
    let (graph, placement) = args.graph.load(args.cpi)?;
    let plan = Plan::with_gpus(graph, placement, CudaProvider::global(), PlanMode::Describe)
        .map_err(|e| plan_error(e, args.cpi))?;
    print!("{plan}");
    Ok(ExitCode::SUCCESS)
}

/// Adds the CPI to a plan error about memory, which it decides; other plan errors pass as
/// they are.
fn plan_error(error: PlanError, cpi: Cpi) -> anyhow::Error {
    match error {
        PlanError::OutOfMemory { .. } | PlanError::MemoryOverflow { .. } => {
            anyhow::Error::new(error).context(format!("CPI {cpi} cannot run here"))
        }
        other => other.into(),
    }
}

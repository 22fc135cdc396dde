//! `kplace plan`: print what a graph on a placement resolves to.

use std::process::ExitCode;

use clap::Args;
use kplace::plan::Plan;
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

/// Plans and prints.
pub fn main(args: PlanArgs) -> anyhow::Result<ExitCode> {
    let (graph, placement) = args.graph.load(args.cpi, &[])?;
    let plan = Plan::new(graph, placement)?;
    print!("{plan}");
    Ok(ExitCode::SUCCESS)
}

//! `kplace compare-results` (also `compare-detections`): two results files of the same
//! frames, as the graph's workload writes them (the radar's detections), compared by that
//! workload ([`kplace::workload::kind::ResultsFiles::compare_results`]).
//!
//! Exit status 0 when they agree, 1 when they do not (every difference counted, the first
//! listed with its frame), 2 when an input cannot be read (the file and line named).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;
use kplace::model::graph::{Graph, Overrides};
use kplace::workload::kind::ResultsPair;

/// Options of `kplace compare-results`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The reference results file (e.g. the all-cpu placement's).
    #[arg(value_name = "REFERENCE")]
    reference: PathBuf,
    /// The results file to judge against it (e.g. a GPU placement's, on the same frames).
    #[arg(value_name = "CANDIDATE")]
    candidate: PathBuf,
    /// The graph whose workload wrote both files, and compares them: a file or a name.
    #[arg(long, default_value = "radar", value_name = "FILE|NAME")]
    graph: PathBuf,
    /// Values agree when `|a - b| <= REL_TOL * max(|a|, |b|)`.
    #[arg(long, default_value_t = 1e-5, conflicts_with = "exact")]
    rel_tol: f64,
    /// Values must be the same, bit for bit (a placement that shares the reference's
    /// arithmetic).
    #[arg(long)]
    exact: bool,
    /// Frames expected (ids 0..FRAMES on both sides; an id outside is an input error at its
    /// line, so an endless input ends).
    #[arg(long)]
    frames: Option<u64>,
    /// Print the comparison as one JSON object (the workload's schema; the radar's is
    /// `kplace-compare/1`) on stdout instead of text.
    #[arg(long)]
    json: bool,
}

/// Compares the two files and prints the verdict.
pub fn main(args: CompareArgs) -> anyhow::Result<ExitCode> {
    if !(args.rel_tol.is_finite() && (0.0..1.0).contains(&args.rel_tol)) {
        bail!(
            "--rel-tol {} must be in [0, 1) (e.g. 1e-5; --exact for bit-identical values)",
            args.rel_tol
        );
    }
    let path = super::args::graph_file(&args.graph)?;
    let graph = Graph::load(&path, &Overrides::default())
        .with_context(|| format!("--graph {}", path.display()))?;
    let registry = crate::workloads::registry();
    let comparison = registry
        .for_graph(&graph, false)?
        .compare_results(&ResultsPair {
            reference: &args.reference,
            candidate: &args.candidate,
            rel_tol: (!args.exact).then_some(args.rel_tol),
            frames: args.frames,
        })?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&comparison.json)?);
    } else {
        print!("{}", comparison.text);
    }
    Ok(if comparison.agrees {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

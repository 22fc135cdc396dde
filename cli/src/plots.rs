//! `kplace plot`: the five plots of one or more `bisect-rate.json` results files
//! ([`kplace_lab::plots`]).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use kplace_lab::plots;

/// Options of `kplace plot`.
#[derive(Debug, Args)]
pub struct PlotArgs {
    /// Results files of `kplace bisect-rate` (schema kplace-bisect-rate/4; versions 2 and 3 are
    /// read as it); their searches are plotted together, in the order given.
    #[arg(value_name = "RESULT.json", required = true)]
    results: Vec<PathBuf>,
    /// Where to write latency.svg, sustained.svg, cdf.svg, stages.svg and loads.svg (created if
    /// needed); default: the first results file's directory.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// Reads every file, writes the plots, prints their paths.
pub fn main(args: PlotArgs) -> Result<ExitCode> {
    if let Some(dir) = &args.out {
        kplace::report::output::file_only(dir, "--out")?;
    }
    let files = args
        .results
        .iter()
        .map(|p| plots::read_results(p))
        .collect::<Result<Vec<_>, _>>()?;
    let out = match args.out {
        Some(dir) => dir,
        None => match args.results[0].parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
            _ => PathBuf::from("."),
        },
    };
    for path in plots::write_all(&files, &out)? {
        println!("{}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

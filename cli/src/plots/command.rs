//! `kplace plot`: the four plots of one or more `bisect-rate.json` results files.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use kplace_lab::rate::sweep::{SCHEMA, SweepFile};
use serde::Deserialize;

/// Options of `kplace plot`.
#[derive(Debug, Args)]
pub struct PlotArgs {
    /// Results files of `kplace bisect-rate` (schema kplace-bisect-rate/2); their searches are
    /// plotted together, in the order given.
    #[arg(value_name = "RESULT.json", required = true)]
    results: Vec<PathBuf>,
    /// Where to write latency.svg, sustained.svg, cdf.svg and stages.svg (created if
    /// needed); default: the first results file's directory.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// Reads every file, writes the plots, prints their paths.
pub fn main(args: PlotArgs) -> Result<ExitCode> {
    let files = args
        .results
        .iter()
        .map(|p| read_results(p))
        .collect::<Result<Vec<_>>>()?;
    let out = match args.out {
        Some(dir) => dir,
        None => match args.results[0].parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
            _ => PathBuf::from("."),
        },
    };
    for path in super::write_all(&files, &out)? {
        println!("{}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Just the schema of a results file, read before the rest so that a file of another kind
/// is named as such rather than by its first unexpected field.
#[derive(Deserialize)]
struct SchemaOnly {
    schema: Option<String>,
}

/// Reads and checks one results file. Errors name the file, and a parse error its line and
/// column.
pub fn read_results(path: &Path) -> Result<SweepFile> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the results file {}", path.display()))?;
    let head: SchemaOnly = serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is not JSON (a results file of kplace bisect-rate is)",
            path.display()
        )
    })?;
    match head.schema.as_deref() {
        Some(SCHEMA) => {}
        Some(other) => bail!(
            "{} has schema {other:?}, not {SCHEMA:?}: rerun kplace bisect-rate with this kplace \
             to write it",
            path.display()
        ),
        None => bail!(
            "{} has no \"schema\" field: not a results file of kplace bisect-rate ({SCHEMA})",
            path.display()
        ),
    }
    serde_json::from_str(&text)
        .with_context(|| format!("{} is not a valid {SCHEMA} results file", path.display()))
}

//! `kplace plot-trace`: a window of a run's timeline (`kplace run --trace`) as an SVG
//! ([`kplace_lab::plots::timeline`]).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;
use kplace::report::trace::Trace;

/// Options of `kplace plot-trace`.
#[derive(Debug, Args)]
pub struct PlotTraceArgs {
    /// A trace written by `kplace run --trace`.
    #[arg(value_name = "TRACE.json")]
    trace: PathBuf,
    /// Where the picture goes [default: the trace's name with .svg].
    #[arg(long, value_name = "FILE.svg")]
    out: Option<PathBuf>,
    /// The window's start, ms on the run's clock [default: the first span].
    #[arg(long, value_name = "MS")]
    from_ms: Option<f64>,
    /// The window's length, ms.
    #[arg(long, value_name = "MS", default_value_t = 20.0)]
    span_ms: f64,
}

/// Reads the trace, draws the window, prints the picture's path.
pub fn main(args: PlotTraceArgs) -> anyhow::Result<ExitCode> {
    if let Some(out) = &args.out {
        kplace::report::output::file_only(out, "--out")?;
    }
    if !(args.span_ms.is_finite() && args.span_ms > 0.0) {
        bail!(
            "--span-ms must be a positive number of ms, not {}",
            args.span_ms
        );
    }
    if let Some(from) = args.from_ms
        && !(from.is_finite() && from >= 0.0)
    {
        bail!("--from-ms must be a number of ms from 0, not {from}");
    }
    let text = kplace::os::files::read_to_string_bounded(
        &args.trace,
        kplace::report::trace::MAX_TRACE_BYTES,
    )
    .with_context(|| format!("cannot read {}", args.trace.display()))?;
    let trace = Trace::read_chrome(&text, &args.trace.display().to_string())?;
    let from_ns = match args.from_ms {
        Some(ms) => (ms * 1e6) as u64,
        None => trace.spans.iter().map(|s| s.start_ns).min().unwrap_or(0),
    };
    let to_ns = from_ns.saturating_add((args.span_ms * 1e6) as u64);
    let out = args.out.unwrap_or_else(|| args.trace.with_extension("svg"));
    kplace_lab::plots::timeline::write(&out, &trace, from_ns, to_ns)?;
    println!("{}", out.display());
    Ok(ExitCode::SUCCESS)
}

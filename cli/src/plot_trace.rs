//! `kplace plot-trace`: a window of a run's timeline (`kplace run --trace`) as an SVG
//! ([`kplace_lab::plots::timeline`]).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::bail;
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
    /// The window's start on the run's clock, e.g. `120ms` (a bare number is ms) [default: the
    /// first span].
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::or_ms, alias = "from-ms")]
    from: Option<std::time::Duration>,
    /// The window's length, e.g. `16ms` (a bare number is ms).
    #[arg(long, value_name = "DURATION", default_value = "20ms", value_parser = crate::duration::or_ms, alias = "span-ms")]
    span: std::time::Duration,
    /// For a run that adapts (`kplace run --adapt --trace`): draw the whole run instead, each
    /// frame's post-frame latency by the placement that ran it, and every switch
    /// (docs/adapt.md).
    #[arg(long)]
    switches: bool,
    /// With --switches: draw this latency budget too, e.g. `5ms`.
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::positive, requires = "switches")]
    budget: Option<std::time::Duration>,
}

/// Reads the trace, draws the window, prints the picture's path.
pub fn main(args: PlotTraceArgs) -> anyhow::Result<ExitCode> {
    if let Some(out) = &args.out {
        kplace::report::output::file_only(out, "--out")?;
    }
    if args.span.is_zero() {
        bail!("--span must be longer than zero");
    }
    // A trace longer than the limit is refused from its length, before a byte is read.
    let text = kplace::os::files::read_text_bounded(
        &args.trace,
        kplace::report::trace::MAX_TRACE_BYTES,
        "trace",
    )?;
    let trace = Trace::read_chrome(&text, &args.trace.display().to_string())?;
    if args.switches {
        let out = args.out.unwrap_or_else(|| args.trace.with_extension("svg"));
        let budget_ms = args.budget.map(|b| b.as_secs_f64() * 1e3);
        kplace_lab::plots::switches::write(&out, &trace, budget_ms)?;
        println!("{}", out.display());
        return Ok(ExitCode::SUCCESS);
    }
    let nanos = |d: std::time::Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    let from_ns = match args.from {
        Some(from) => nanos(from),
        None => trace.spans.iter().map(|s| s.start_ns).min().unwrap_or(0),
    };
    let to_ns = from_ns.saturating_add(nanos(args.span));
    let out = args.out.unwrap_or_else(|| args.trace.with_extension("svg"));
    kplace_lab::plots::timeline::write(&out, &trace, from_ns, to_ns)?;
    println!("{}", out.display());
    Ok(ExitCode::SUCCESS)
}

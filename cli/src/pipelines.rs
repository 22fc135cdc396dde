//! `kplace run --pipelines N`: several independent pipelines at once, as threads of this
//! process or as child `kplace run` processes ([`kplace::session::several`],
//! [`kplace::session::children`]), with per-pipeline and aggregate reports.
//!
//! The run passes only if every pipeline passes. With `--report FILE` the JSON is
//! `kplace-multi-run-report/2`: every pipeline's own `kplace-run-report/2` and an aggregate
//! (docs/report.md).

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use kplace::interrupt;
use kplace::net::metrics::EndpointCounts;
use kplace::report::output::ReportOutput;
use kplace::report::ready::Readiness;
use kplace::report::run::PipelineEntry;
use kplace::session::children::{self, ChildOptions, run_children};
use kplace::session::several::{MultiRun, PipelineMode};
use kplace::session::{self, several};

use super::run::{RunArgs, check_mps, exit_status};

/// How long a child pipeline may take to become ready (a GPU pipeline creates its context,
/// modules and plans first: seconds, not minutes).
const READY_TIMEOUT: Duration = Duration::from_secs(300);

/// Runs `kplace run --pipelines N` (N > 1) in the mode asked for.
pub fn main(args: RunArgs) -> anyhow::Result<ExitCode> {
    args.check()?;
    interrupt::install().context("cannot install the SIGINT, SIGTERM and SIGHUP handler")?;
    if args.ingest_only {
        bail!("--ingest-only measures one receiver: drop --pipelines");
    }
    super::admit::check_run(&args)?;
    match args.pipeline_mode.into() {
        PipelineMode::Thread => threads(&args),
        PipelineMode::Process => processes(&args),
    }
}

/// N pipelines as threads of this process.
fn threads(args: &RunArgs) -> anyhow::Result<ExitCode> {
    let report_out = args.report.as_deref().map(ReportOutput::open).transpose()?;
    let n = args.pipelines as usize;
    let graph_files = args.files()?;
    let prepared = args.prepare(&graph_files)?;
    let live = args.live(&prepared, n)?;
    let paths = args.output_paths();
    let (outputs, files): (Vec<_>, Vec<_>) = (0..n)
        .map(|i| paths.open(&prepared, Some(i), live.reporter(Some(i))))
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .unzip();
    let readiness = Readiness::new(n, args.ready_file.clone());
    // Bind every receiver first, in order, so each pipeline's port is known (and printed)
    // before any sender can start.
    let mut sources = Vec::with_capacity(n);
    for i in 0..n {
        sources.push(match args.source.udp() {
            None => None,
            Some(addr) => {
                let mut udp =
                    session::listen(args.udp_config(addr, &graph_files)?, Some(i), &readiness)?;
                if let Some((every, tell)) = live.ingest(Some(i)) {
                    udp.on_counters(every, tell);
                }
                Some(udp)
            }
        });
    }
    let inputs: Vec<_> = sources.into_iter().zip(outputs).collect();
    let outcomes = several::in_threads(inputs, |i, (udp, outputs)| {
        prepared.run(udp, Some(i), outputs, &check_mps)
    });
    let mut run = MultiRun::new(PipelineMode::Thread);
    let mut text = String::new();
    for (i, (outcome, files)) in outcomes.into_iter().zip(files).enumerate() {
        match outcome {
            Ok(mut o) => {
                let _ = write!(text, "== pipeline {i}\n{}", o.text);
                let failed = files.finish(o.trace.as_ref());
                run.failures
                    .extend(failed.iter().map(|f| format!("pipeline {i}: {f}")));
                o.report.output_errors = failed;
                run.pipelines.push(PipelineEntry::Ran(Box::new(o.report)));
            }
            Err(e) => {
                files.finish(None);
                let _ = writeln!(text, "== pipeline {i}\nfailed: {e}");
                run.failures.push(format!("pipeline {i}: {e}"));
                run.pipelines.push(several::failed(e.to_string()));
            }
        }
    }
    let live = live.commit();
    text.extend(live.endpoint_line());
    print!("{text}");
    if let Err(e) = live.progress {
        tracing::error!("kplace run: {e}");
        run.failures.push(e);
    }
    finish(run, report_out, live.endpoint)
}

/// N pipelines as child `kplace run` processes ([`kplace::session::children`]): each gets
/// this command line but for the per-child options.
fn processes(args: &RunArgs) -> anyhow::Result<ExitCode> {
    if let Some(addr) = args.metrics {
        bail!(
            "--metrics {addr} serves one process's pipelines: with --pipeline-mode process each \
             pipeline is a process of its own; use the default mode (threads) for one endpoint"
        );
    }
    let report_out = args.report.as_deref().map(ReportOutput::open).transpose()?;
    let exe = std::env::current_exe().context("cannot find the kplace executable")?;
    let options = ChildOptions {
        argv: std::env::args_os().skip(1).collect(),
        pipelines: args.pipelines as usize,
        udp: args.source.udp(),
        detections: args.detections.clone(),
        done_times: args.done_times.clone(),
        trace: args.trace.clone(),
        write_sinks: args.write_sinks.clone(),
        progress_out: args.progress_path().map(Path::to_path_buf),
    };
    let outcomes = run_children(&exe, &options, args.ready_file.as_deref(), READY_TIMEOUT)?;
    for (i, outcome) in outcomes.iter().enumerate() {
        print!(
            "== pipeline {i} (process {})\n{}",
            outcome.pid, outcome.stdout
        );
    }
    finish(children::multi_run(outcomes), report_out, None)
}

/// Prints the aggregate, writes the report (with what the metrics endpoint did, if there was
/// one), and says whether every pipeline passed.
fn finish(
    run: MultiRun,
    report_out: Option<ReportOutput>,
    endpoint: Option<EndpointCounts>,
) -> anyhow::Result<ExitCode> {
    let mut done = run.finish();
    done.report.metrics_endpoint = endpoint;
    print!("{}", done.summary);
    if let Some(out) = report_out {
        out.write(&done.report)?;
    }
    Ok(exit_status(done.passed))
}

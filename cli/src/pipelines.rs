//! `kplace run --pipelines N`: several independent radar pipelines at once, as threads of this
//! process or as child `kplace run` processes ([`kplace::session::several`]), with
//! per-pipeline and aggregate reports.
//!
//! The run passes only if every pipeline passes. With `--report FILE` the JSON is
//! `kplace-multi-run-report/2`: every pipeline's own `kplace-run-report/2` and an aggregate
//! (docs/report.md).

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, ExitCode};
use std::time::Duration;

use anyhow::{Context, bail};
use kplace::interrupt;
use kplace::report::output::{self, ReportOutput};
use kplace::report::ready::Readiness;
use kplace::report::run::{MULTI_SCHEMA, MultiRunReport, PipelineEntry};
use kplace::session::several::{ChildPipeline, PipelineMode, pipeline_addr, pipeline_path};
use kplace::session::{self, several};

use super::progress::ProgressOut;
use super::run::workload::{self, Prepared};
use super::run::{
    RunArgs, SourceArg, exit_status, open_outputs, open_trace, report_failed_outputs, write_trace,
};

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
    match args.pipeline_mode.into() {
        PipelineMode::Thread => threads(&args),
        PipelineMode::Process => processes(&args),
    }
}

/// N pipelines as threads of this process.
fn threads(args: &RunArgs) -> anyhow::Result<ExitCode> {
    let report_out = args.report.as_deref().map(ReportOutput::open).transpose()?;
    let n = args.pipelines as usize;
    let progress = args
        .progress_path()
        .map(|path| ProgressOut::open(path, args.frames))
        .transpose()?;
    let prepared = Prepared::new(args)?;
    let (outputs, mut files): (Vec<_>, Vec<_>) = (0..n)
        .map(|i| open_outputs(args, &prepared, Some(i), progress.as_ref()))
        .collect::<anyhow::Result<Vec<_>>>()?
        .into_iter()
        .unzip();
    let shape = workload::wire(args)?;
    let readiness = Readiness::new(n, args.ready_file.clone());
    // Bind every receiver first, in order, so each pipeline's port is known (and printed)
    // before any sender can start.
    let mut sources = Vec::with_capacity(n);
    for i in 0..n {
        sources.push(match args.source {
            SourceArg::Replay => None,
            SourceArg::Udp(addr) => Some(session::listen(
                args.udp_config(addr, shape)?,
                Some(i),
                &readiness,
            )?),
        });
    }
    let traces = (0..n)
        .map(|i| open_trace(args, Some(i)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let inputs: Vec<_> = sources.into_iter().zip(outputs).collect();
    let outcomes = several::in_threads(inputs, |i, (udp, outputs)| {
        prepared.run(udp, Some(i), outputs)
    });
    let mut reports = Vec::with_capacity(n);
    let mut failures = Vec::new();
    let mut text = String::new();
    for (i, (outcome, trace_out)) in outcomes.into_iter().zip(traces).enumerate() {
        let mut failed = output::commit_all(std::mem::take(&mut files[i]));
        match outcome {
            Ok(mut o) => {
                let _ = write!(text, "== pipeline {i}\n{}", o.text);
                failed.extend(write_trace(trace_out, o.trace.as_ref()).err());
                report_failed_outputs(&failed);
                failures.extend(failed.iter().map(|f| format!("pipeline {i}: {f}")));
                o.report.output_errors = failed;
                reports.push(PipelineEntry::Ran(Box::new(o.report)));
            }
            Err(e) => {
                let _ = writeln!(text, "== pipeline {i}\nfailed: {e}");
                failures.push(format!("pipeline {i}: {e}"));
                reports.push(several::failed(e));
            }
        }
    }
    print!("{text}");
    if let Some(p) = progress
        && let Err(e) = p.commit()
    {
        report_failed_outputs(std::slice::from_ref(&e));
        failures.push(e);
    }
    finish(PipelineMode::Thread, reports, failures, report_out)
}

/// N pipelines as child `kplace run` processes: each gets this command line but for the
/// per-child options, its own port (or ephemeral port), report, ready file and output files.
fn processes(args: &RunArgs) -> anyhow::Result<ExitCode> {
    let report_out = args.report.as_deref().map(ReportOutput::open).transpose()?;
    let n = args.pipelines as usize;
    let exe = std::env::current_exe().context("cannot find the kplace executable")?;
    let dir = pipeline_dir(&std::env::temp_dir())
        .context("cannot create a directory for the pipelines' reports")?;
    let argv: Vec<OsString> = std::env::args_os().skip(1).collect();
    let base = child_args(&argv);
    let mut children = Vec::with_capacity(n);
    for i in 0..n {
        let report = dir.path().join(format!("pipeline-{i}.json"));
        let mut command = Command::new(&exe);
        command.args(&base).arg("--report").arg(&report);
        let ready = match args.source {
            SourceArg::Replay => {
                command.args(["--source", "replay"]);
                None
            }
            SourceArg::Udp(addr) => {
                let addr = pipeline_addr(addr, i)
                    .context("--source: the port plus the pipeline count exceeds 65535")?;
                let ready = dir.path().join(format!("pipeline-{i}.ready"));
                command
                    .arg("--source")
                    .arg(format!("udp://{addr}"))
                    .arg("--ready-file")
                    .arg(&ready);
                Some(ready)
            }
        };
        if let Some(path) = &args.detections {
            command
                .arg("--detections")
                .arg(pipeline_path(path, Some(i)));
        }
        if let Some(path) = &args.done_times {
            command
                .arg("--done-times")
                .arg(pipeline_path(path, Some(i)));
        }
        if let Some(path) = &args.trace {
            command.arg("--trace").arg(pipeline_path(path, Some(i)));
        }
        if let Some(dir) = &args.write_sinks {
            command.arg("--write-sinks").arg(dir.join(format!("p{i}")));
        }
        if let Some(path) = args.progress_path() {
            command
                .arg("--progress-out")
                .arg(pipeline_path(path, Some(i)));
        }
        children.push(ChildPipeline {
            command,
            report,
            ready,
        });
    }
    let outcomes = several::in_processes(children, args.ready_file.as_deref(), READY_TIMEOUT)?;
    let mut reports = Vec::with_capacity(n);
    let mut failures = Vec::new();
    for (i, outcome) in outcomes.into_iter().enumerate() {
        print!(
            "== pipeline {i} (process {})\n{}",
            outcome.pid, outcome.stdout
        );
        match outcome.report {
            Ok(report) => reports.push(PipelineEntry::Ran(Box::new(report))),
            Err(why) => {
                failures.push(format!("pipeline {i} {why}"));
                reports.push(several::failed(why));
            }
        }
    }
    finish(PipelineMode::Process, reports, failures, report_out)
}

/// The start of the name of the directory a process-mode run keeps its pipelines' reports
/// in: `kplace-pipelines-PID-XXXXXX` in the system's temporary directory.
const PIPELINE_DIR_PREFIX: &str = "kplace-pipelines-";

/// A directory in `tmp` for this run's pipeline reports, removed when the run ends; first,
/// those of runs whose process is gone (killed before it could remove its own) are removed.
fn pipeline_dir(tmp: &Path) -> std::io::Result<tempfile::TempDir> {
    remove_orphaned_pipeline_dirs(tmp);
    tempfile::Builder::new()
        .prefix(&format!("{PIPELINE_DIR_PREFIX}{}-", std::process::id()))
        .tempdir_in(tmp)
}

/// Removes every `kplace-pipelines-PID-*` directory in `tmp` whose process no longer runs.
fn remove_orphaned_pipeline_dirs(tmp: &Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PIPELINE_DIR_PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new("/proc").join(pid.to_string()).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Prints the aggregate, writes the report, and says whether every pipeline passed.
fn finish(
    mode: PipelineMode,
    reports: Vec<PipelineEntry>,
    failures: Vec<String>,
    report_out: Option<ReportOutput>,
) -> anyhow::Result<ExitCode> {
    let aggregate = several::aggregate(&reports, mode);
    let mut text = aggregate.to_string();
    for f in &failures {
        let _ = writeln!(text, "  {f}");
    }
    print!("{text}");
    let passed = failures.is_empty() && aggregate.all_passed;
    if let Some(out) = report_out {
        out.write(&MultiRunReport {
            schema: MULTI_SCHEMA.to_string(),
            aggregate,
            pipelines: reports,
            interrupted: interrupt::received().map(|s| interrupt::name(s).to_string()),
        })?;
    }
    Ok(exit_status(passed))
}

/// Options each child gets from the parent's command line: everything but those the parent
/// sets per child (`--pipelines`, `--pipeline-mode`, `--source`, `--report`, `--detections`,
/// `--done-times`, `--ready-file`, `--progress-out`, `--trace`, `--write-sinks`), in either
/// `--flag value` or `--flag=value` form.
pub fn child_args(argv: &[OsString]) -> Vec<OsString> {
    const PER_CHILD: [&str; 10] = [
        "--write-sinks",
        "--trace",
        "--progress-out",
        "--pipelines",
        "--pipeline-mode",
        "--source",
        "--report",
        "--detections",
        "--done-times",
        "--ready-file",
    ];
    let mut out = Vec::with_capacity(argv.len());
    let mut skip_value = false;
    for arg in argv {
        if skip_value {
            skip_value = false;
            continue;
        }
        let text = arg.to_string_lossy();
        if let Some(flag) = PER_CHILD.iter().find(|f| text.starts_with(**f)) {
            if text.len() == flag.len() {
                skip_value = true;
                continue;
            }
            if text.as_bytes().get(flag.len()) == Some(&b'=') {
                continue;
            }
        }
        out.push(arg.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn a_killed_runs_pipeline_directory_is_removed_by_the_next() {
        let tmp = tempfile::tempdir().unwrap();
        // A process id above Linux's largest: that run is gone.
        let orphan = tmp
            .path()
            .join(format!("{PIPELINE_DIR_PREFIX}4194305-abc123"));
        std::fs::create_dir(&orphan).unwrap();
        std::fs::write(orphan.join("pipeline-0.json"), "{}").unwrap();
        let unrelated = tmp.path().join("kplace-pipelines-notapid");
        std::fs::create_dir(&unrelated).unwrap();
        let mine = pipeline_dir(tmp.path()).unwrap();
        assert!(!orphan.exists(), "the gone run's directory is removed");
        assert!(
            unrelated.exists(),
            "a name without a process id is not ours to remove"
        );
        // A second run beside this one keeps this one's directory: its process runs.
        let second = pipeline_dir(tmp.path()).unwrap();
        assert!(mine.path().exists() && second.path().exists());
        let kept = mine.path().to_path_buf();
        drop(mine);
        assert!(!kept.exists(), "a run removes its own when it ends");
    }

    #[test]
    fn children_get_every_option_but_the_per_child_ones() {
        let argv = os(&[
            "run",
            "--pipelines",
            "3",
            "--pipeline-mode=process",
            "--cpi",
            "2048x256",
            "--source",
            "udp://127.0.0.1:9000",
            "--report=r.json",
            "--detections",
            "d.txt",
            "--frames",
            "10",
            "--placement",
            "workloads/radar/placements/all-gpu.yaml",
        ]);
        assert_eq!(
            child_args(&argv),
            os(&[
                "run",
                "--cpi",
                "2048x256",
                "--frames",
                "10",
                "--placement",
                "workloads/radar/placements/all-gpu.yaml"
            ])
        );
    }
}

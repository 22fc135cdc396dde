//! `kplace run --pipelines N`: several independent radar pipelines at once, in this process
//! (threads sharing one CUDA context, each with its own slots, pools, kernel states, GPU
//! streams, source and verifier) or as child processes (one context each: how MPS shares a
//! GPU), with per-pipeline and aggregate reports.
//!
//! The run passes only if every pipeline passes. With `--report FILE` the JSON is
//! `kplace-multi-run-report/1`: every pipeline's own `kplace-run-report/1` and an aggregate
//! (docs/report.md).

use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, ChildStderr, ChildStdout, Command, ExitCode, ExitStatus, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};
use kplace::interrupt;
use kplace::report::run::{
    Aggregate, MULTI_SCHEMA, MultiRunReport, PipelineEntry, PipelineFailure, RunReport,
};

use super::output::ReportOutput;
use super::ready::{Readiness, announce, wait_ready};
use super::run::{
    PipelineMode, PipelineOutcome, PipelineOutputs, RunArgs, Setup, SourceArg, bind, exit_status,
    interrupted, pipeline_addr, run_pipeline,
};

/// N pipelines as threads of this process.
pub fn threads(args: &RunArgs) -> anyhow::Result<ExitCode> {
    let report_out = args.report.as_deref().map(ReportOutput::open).transpose()?;
    let n = args.pipelines as usize;
    let outputs = (0..n)
        .map(|i| PipelineOutputs::open(args, Some(i)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let setup = Setup::new(args)?;
    let readiness = Readiness::new(n, args.ready_file.clone());
    // Bind every receiver first, in order, so each pipeline's port is known (and printed)
    // before any sender can start.
    let mut sources = Vec::with_capacity(n);
    for i in 0..n {
        sources.push(match args.source {
            SourceArg::Replay => None,
            SourceArg::Udp(addr) => Some(bind(args, addr, setup.cpi, Some(i), &readiness)?),
        });
    }
    let outcomes: Vec<anyhow::Result<PipelineOutcome>> = std::thread::scope(|scope| {
        let setup = &setup;
        let handles: Vec<_> = sources
            .into_iter()
            .zip(outputs)
            .enumerate()
            .map(|(i, (udp, outputs))| {
                std::thread::Builder::new()
                    .name(format!("pipeline-{i}"))
                    .spawn_scoped(scope, move || {
                        run_pipeline(args, setup, udp, Some(i), outputs)
                    })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h {
                Ok(h) => h
                    .join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("the pipeline's thread panicked"))),
                Err(e) => Err(anyhow::Error::from(e).context("cannot start a pipeline thread")),
            })
            .collect()
    });
    let mut reports = Vec::with_capacity(n);
    let mut failures = Vec::new();
    let mut text = String::new();
    for (i, outcome) in outcomes.into_iter().enumerate() {
        match outcome {
            Ok(o) => {
                let _ = write!(text, "== pipeline {i}\n{}", o.text);
                reports.push(PipelineEntry::Ran(Box::new(o.report)));
            }
            Err(e) => {
                let _ = writeln!(text, "== pipeline {i}\nfailed: {e:#}");
                failures.push(format!("pipeline {i}: {e:#}"));
                reports.push(failed(format!("{e:#}")));
            }
        }
    }
    print!("{text}");
    finish(PipelineMode::Thread, reports, failures, report_out)
}

/// Child processes that are killed and reaped if they outlive this guard (an error, a panic).
struct Children(Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for child in &mut self.0 {
            if matches!(child.try_wait(), Ok(None)) {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// N pipelines as child `kplace run` processes. Each child dies with this process (a parent
/// killed outright takes its children with it), writes its stderr through this process line
/// by line, prefixed `[pipeline i]`, and tells its port through its readiness file; an
/// interrupt of this process is passed on to every child.
pub fn processes(args: &RunArgs) -> anyhow::Result<ExitCode> {
    let report_out = args.report.as_deref().map(ReportOutput::open).transpose()?;
    let n = args.pipelines as usize;
    let exe = std::env::current_exe().context("cannot find the kplace executable")?;
    let dir =
        tempfile::tempdir().context("cannot create a directory for the pipelines' reports")?;
    let argv: Vec<OsString> = std::env::args_os().skip(1).collect();
    let base = child_args(&argv);
    let mut children = Children(Vec::with_capacity(n));
    let mut relays = Vec::with_capacity(n);
    let mut paths = Vec::with_capacity(n);
    for i in 0..n {
        let report = dir.path().join(format!("pipeline-{i}.json"));
        let ready = dir.path().join(format!("pipeline-{i}.ready"));
        let mut command = Command::new(&exe);
        command.args(&base).arg("--report").arg(&report);
        match args.source {
            SourceArg::Replay => command.args(["--source", "replay"]),
            SourceArg::Udp(addr) => {
                let addr = pipeline_addr(addr, i)?;
                command
                    .arg("--source")
                    .arg(format!("udp://{addr}"))
                    .arg("--ready-file")
                    .arg(&ready)
            }
        };
        if let Some(path) = &args.detections {
            command
                .arg("--detections")
                .arg(super::run::pipeline_path(path, Some(i)));
        }
        if let Some(path) = &args.done_times {
            command
                .arg("--done-times")
                .arg(super::run::pipeline_path(path, Some(i)));
        }
        kplace::os::process::die_with_parent(&mut command);
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start pipeline {i}"))?;
        relays.push(relay(i, child.stdout.take(), child.stderr.take()));
        children.0.push(child);
        paths.push((report, ready));
    }
    if let SourceArg::Udp(_) = args.source {
        let mut sources = Vec::with_capacity(n);
        for (i, (child, (_, ready))) in children.0.iter_mut().zip(&paths).enumerate() {
            // A GPU pipeline creates its context, modules and plans first: seconds, not minutes.
            match wait_ready(child, ready, READY_TIMEOUT) {
                Ok(mut addrs) => sources.append(&mut addrs),
                Err(why) => {
                    drop(children);
                    bail!("pipeline {i} did not start: {why}");
                }
            }
        }
        announce(&sources, args.ready_file.as_deref());
    }
    let statuses = wait_all(&mut children.0)?;
    let mut reports = Vec::with_capacity(n);
    let mut failures = Vec::new();
    for (i, ((status, relay), (report, _))) in
        statuses.into_iter().zip(relays).zip(&paths).enumerate()
    {
        let stdout = relay.join().unwrap_or_default();
        print!("== pipeline {i} (process {})\n{stdout}", status.0);
        match read_report(report) {
            Ok(report) => reports.push(PipelineEntry::Ran(Box::new(report))),
            Err(why) => {
                let why = format!("exited ({}) {why}", status.1);
                failures.push(format!("pipeline {i} {why}"));
                reports.push(failed(why));
            }
        }
    }
    finish(PipelineMode::Process, reports, failures, report_out)
}

/// How long a child pipeline may take to become ready.
const READY_TIMEOUT: Duration = Duration::from_secs(300);

/// Relays a child's stderr line by line, `[pipeline i] ` first, in one write per line, and
/// collects its stdout; the handle returns the stdout.
fn relay(
    index: usize,
    stdout: Option<ChildStdout>,
    stderr: Option<ChildStderr>,
) -> std::thread::JoinHandle<String> {
    if let Some(stderr) = stderr {
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                match line {
                    Ok(line) => super::say(&format!("[pipeline {index}] {line}")),
                    Err(_) => break,
                }
            }
        });
    }
    std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut out) = stdout {
            let _ = out.read_to_string(&mut text);
        }
        text
    })
}

/// Waits for every child, passing an interrupt of this process on to those still running;
/// returns each one's pid and status.
fn wait_all(children: &mut [Child]) -> anyhow::Result<Vec<(u32, ExitStatus)>> {
    let mut statuses: Vec<Option<ExitStatus>> = vec![None; children.len()];
    let mut forwarded = false;
    while statuses.iter().any(Option::is_none) {
        if let (Some(signal), false) = (interrupt::received(), forwarded) {
            forwarded = true;
            for (child, status) in children.iter().zip(&statuses) {
                if status.is_none() {
                    // Not yet reaped, so its pid is still its own.
                    let _ = kplace::os::process::send_signal(child.id(), signal);
                }
            }
        }
        for (child, status) in children.iter_mut().zip(statuses.iter_mut()) {
            if status.is_none() {
                *status = child.try_wait().context("waiting for a pipeline")?;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(children
        .iter()
        .zip(statuses)
        .map(|(c, s)| (c.id(), s.unwrap_or_default()))
        .collect())
}

/// A child's report, or why there is none usable.
fn read_report(path: &Path) -> Result<RunReport, String> {
    let text = std::fs::read_to_string(path).map_err(|_| "without a report".to_string())?;
    kplace::report::read_json(&text, &path.display().to_string())
        .map_err(|e| format!("with a report that cannot be read: {e}"))
}

fn failed(error: String) -> PipelineEntry {
    PipelineEntry::Failed(PipelineFailure { error })
}

/// Prints the aggregate, writes the report, and says whether every pipeline passed.
fn finish(
    mode: PipelineMode,
    reports: Vec<PipelineEntry>,
    failures: Vec<String>,
    report_out: Option<ReportOutput>,
) -> anyhow::Result<ExitCode> {
    let aggregate = aggregate(&reports, mode);
    let mut text = aggregate_text(&aggregate);
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
            interrupted: interrupted(),
        })?;
    }
    Ok(exit_status(passed))
}

/// The aggregate of per-pipeline reports (a failure for a pipeline that did not run): summed
/// frames and rates, the worst latency, and whether every pipeline verified.
pub fn aggregate(reports: &[PipelineEntry], mode: PipelineMode) -> Aggregate {
    let ran: Vec<&RunReport> = reports.iter().filter_map(PipelineEntry::report).collect();
    let passed = ran.iter().filter(|r| r.verification.passed).count();
    let cores = ran.iter().map(|r| r.cores_used);
    Aggregate {
        pipelines: reports.len(),
        mode: match mode {
            PipelineMode::Thread => "thread",
            PipelineMode::Process => "process",
        }
        .to_string(),
        frames: ran.iter().map(|r| r.frames).sum(),
        partial_frames: ran.iter().map(|r| r.partial_frames).sum(),
        dropped_frames: ran.iter().map(|r| r.dropped_frames).sum(),
        throughput_cpi_per_s: ran.iter().map(|r| r.throughput_cpi_per_s).sum(),
        input_gbit_per_s: ran.iter().map(|r| r.input_gbit_per_s).sum(),
        min_pipeline_cpi_per_s: ran.iter().map(|r| r.throughput_cpi_per_s).reduce(f64::min),
        cores_used: if mode == PipelineMode::Process {
            cores.sum()
        } else {
            // Threads of one process each report the whole process's CPU time.
            cores.fold(0.0, f64::max)
        },
        worst_post_cpi_p99_ms: ran
            .iter()
            .map(|r| r.latency.post_cpi.p99_ms)
            .reduce(f64::max),
        worst_post_cpi_p999_ms: ran
            .iter()
            .map(|r| r.latency.post_cpi.p999_ms)
            .reduce(f64::max),
        pipelines_passed: passed,
        all_passed: passed == reports.len(),
    }
}

fn aggregate_text(a: &Aggregate) -> String {
    let mut text = String::new();
    let _ = writeln!(
        text,
        "== {} pipelines ({}): {} frames, partial {}, dropped {}; aggregate {:.1} CPI/s ({:.2} Gbit/s), slowest pipeline {:.1} CPI/s; worst post-CPI p99 {:.3} ms; cores used {:.2}",
        a.pipelines,
        a.mode,
        a.frames,
        a.partial_frames,
        a.dropped_frames,
        a.throughput_cpi_per_s,
        a.input_gbit_per_s,
        a.min_pipeline_cpi_per_s.unwrap_or(0.0),
        a.worst_post_cpi_p99_ms.unwrap_or(f64::NAN),
        a.cores_used,
    );
    let _ = writeln!(
        text,
        "verification {}: {}/{} pipelines passed",
        if a.all_passed { "PASSED" } else { "FAILED" },
        a.pipelines_passed,
        a.pipelines
    );
    text
}

/// Options each child gets from the parent's command line: everything but those the parent
/// sets per child (`--pipelines`, `--pipeline-mode`, `--source`, `--report`, `--detections`,
/// `--done-times`, `--ready-file`),
/// in either `--flag value` or `--flag=value` form.
pub fn child_args(argv: &[OsString]) -> Vec<OsString> {
    const PER_CHILD: [&str; 7] = [
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
            "placements/all-gpu.yaml",
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
                "placements/all-gpu.yaml"
            ])
        );
    }

    #[test]
    fn the_aggregate_sums_rates_and_takes_the_worst_latency() {
        let r = |rate: f64, p99: f64, passed: bool| {
            let mut r = crate::report::fixture(10, rate, p99);
            r.dropped_frames = 1;
            r.input_gbit_per_s = 0.5;
            r.cores_used = 1.0;
            r.verification.passed = passed;
            PipelineEntry::Ran(Box::new(r))
        };
        let a = aggregate(
            &[r(100.0, 1.0, true), r(90.0, 3.0, true)],
            PipelineMode::Process,
        );
        assert_eq!(a.frames, 20);
        assert_eq!(a.dropped_frames, 2);
        assert_eq!(a.throughput_cpi_per_s, 190.0);
        assert_eq!(a.min_pipeline_cpi_per_s, Some(90.0));
        assert_eq!(a.worst_post_cpi_p99_ms, Some(3.0));
        assert_eq!(a.cores_used, 2.0);
        assert!(a.all_passed);
        let a = aggregate(
            &[r(100.0, 1.0, true), failed("no GPU".into())],
            PipelineMode::Thread,
        );
        assert!(!a.all_passed, "a pipeline that did not run fails the run");
        assert_eq!(a.pipelines_passed, 1);
        assert_eq!(a.cores_used, 1.0, "threads share the process's CPU time");
    }
}

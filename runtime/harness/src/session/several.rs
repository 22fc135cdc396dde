//! Several independent pipelines at once: as threads of this process (one CUDA context, each
//! pipeline with its own slots, pools, kernel states, GPU streams, source and sink) or as child
//! processes (one context each: how MPS shares a GPU), and their aggregate.
//!
//! What each pipeline runs is the caller's: [`in_threads`] calls a function per pipeline, and
//! [`in_processes`] starts the commands it is given, each of which writes its own run report
//! (`super::children` builds those of `kplace run`). [`MultiRun`] makes the multi-run report
//! of their entries.
//!
//! # Guarantees
//! - [`in_threads`] returns one result per pipeline, in pipeline order; a pipeline that fails
//!   or panics fails alone, with its reason.
//! - [`in_processes`] never leaves a child behind: a child dies with this process (a parent
//!   killed outright takes its children with it), and one still running when this function
//!   returns early (an error) is killed and reaped. An interrupt of this process
//!   ([`kplace_core::interrupt`]) is passed on to every child still running. No wait is unbounded:
//!   each child's readiness is awaited for at most the time given.

use std::fmt::{self, Write as _};
use std::io::{BufRead, BufReader, Write as _};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, ChildStdout, Command, ExitStatus, Stdio};
use std::str::FromStr;
use std::thread::JoinHandle;
use std::time::Duration;

use kplace_core::interrupt;
use kplace_report::ready::{announce, wait_ready};
use kplace_report::run::{
    Aggregate, MULTI_SCHEMA, MultiRunReport, PipelineEntry, PipelineFailure, RunReport,
};

/// How several pipelines run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PipelineMode {
    /// In this process: one CUDA context, each pipeline with its own streams, pools, slots,
    /// kernel states, source and sink.
    #[default]
    Thread,
    /// As child processes, one pipeline each (one context each: the MPS case).
    Process,
}

impl PipelineMode {
    /// `thread` or `process`, as reports and options spell it.
    pub fn name(self) -> &'static str {
        match self {
            PipelineMode::Thread => "thread",
            PipelineMode::Process => "process",
        }
    }
}

impl fmt::Display for PipelineMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A pipeline mode's name that names none.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown pipeline mode {0:?}: expected thread or process")]
pub struct UnknownPipelineMode(pub String);

impl FromStr for PipelineMode {
    type Err = UnknownPipelineMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "thread" => Ok(PipelineMode::Thread),
            "process" => Ok(PipelineMode::Process),
            _ => Err(UnknownPipelineMode(s.to_string())),
        }
    }
}

/// Where pipeline `index` of a run on `addr` listens: the port plus the index, or an ephemeral
/// port of its own for port 0; `None` when the port would pass 65535.
pub fn pipeline_addr(addr: SocketAddr, index: usize) -> Option<SocketAddr> {
    let mut addr = addr;
    if addr.port() != 0 {
        addr.set_port(u16::try_from(usize::from(addr.port()) + index).ok()?);
    }
    Some(addr)
}

/// `path` for pipeline `index`: `det.txt` becomes `det.p1.txt`; the path itself for a single
/// pipeline (`None`).
pub fn pipeline_path(path: &Path, index: Option<usize>) -> PathBuf {
    let Some(i) = index else {
        return path.to_path_buf();
    };
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = match path.extension() {
        Some(ext) => format!("{stem}.p{i}.{}", ext.to_string_lossy()),
        None => format!("{stem}.p{i}"),
    };
    path.with_file_name(name)
}

/// Why a pipeline run on a thread of its own ([`in_threads`]) gave no value.
#[derive(Debug)]
pub enum ThreadFailure<E> {
    /// The pipeline failed: its error (shown with its causes).
    Failed(E),
    /// Its thread panicked.
    Panicked,
    /// Its thread could not start.
    NoThread(std::io::Error),
}

impl<E: fmt::Display> fmt::Display for ThreadFailure<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ThreadFailure::Failed(e) => write!(f, "{e:#}"),
            ThreadFailure::Panicked => f.write_str("the pipeline's thread panicked"),
            ThreadFailure::NoThread(e) => write!(f, "cannot start a pipeline thread: {e}"),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> std::error::Error for ThreadFailure<E> {}

/// Runs `run(i, input)` for every input on a thread of its own (`pipeline-i`), all at once;
/// one result per pipeline, in order: the value, or why it failed (its error, or that its
/// thread panicked or could not start).
pub fn in_threads<I, T, E>(
    inputs: Vec<I>,
    run: impl Fn(usize, I) -> Result<T, E> + Sync,
) -> Vec<Result<T, ThreadFailure<E>>>
where
    I: Send,
    T: Send,
    E: Send,
{
    std::thread::scope(|scope| {
        let run = &run;
        let handles: Vec<_> = inputs
            .into_iter()
            .enumerate()
            .map(|(i, input)| {
                std::thread::Builder::new()
                    .name(format!("pipeline-{i}"))
                    .spawn_scoped(scope, move || run(i, input).map_err(ThreadFailure::Failed))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h {
                Ok(h) => h.join().unwrap_or(Err(ThreadFailure::Panicked)),
                Err(e) => Err(ThreadFailure::NoThread(e)),
            })
            .collect()
    })
}

/// One child pipeline: the command that runs it, the report it writes, and, for a receiver,
/// the ready file it writes once it takes packets.
#[derive(Debug)]
pub struct ChildPipeline {
    /// The command, with every option but its standard streams.
    pub command: Command,
    /// Where it writes its run report.
    pub report: PathBuf,
    /// Where it writes its ready file; `None` for a pipeline that needs no sender.
    pub ready: Option<PathBuf>,
    /// Its other output files and directories: where its temporary files are looked for and
    /// removed once it has ended, should it have been killed before it could.
    pub outputs: Vec<PathBuf>,
}

/// What one child pipeline did.
#[derive(Debug)]
pub struct ChildOutcome {
    /// Its process id.
    pub pid: u32,
    /// How it exited.
    pub status: ExitStatus,
    /// What it printed on stdout.
    pub stdout: String,
    /// Its run report, or why there is none usable.
    pub report: Result<RunReport, NoReport>,
}

/// Why a child pipeline left no usable report.
#[derive(Debug, thiserror::Error)]
pub enum NoReport {
    /// It wrote none.
    #[error("exited ({status}) without a report")]
    Missing {
        /// How it exited.
        status: ExitStatus,
    },
    /// Its report cannot be read.
    #[error("exited ({status}) with a report that cannot be read: {error}")]
    Unreadable {
        /// How it exited.
        status: ExitStatus,
        /// Why.
        error: kplace_core::os::files::ReadBoundedError,
    },
    /// Its report is not a run report.
    #[error("exited ({status}) with a report that cannot be read: {error}")]
    Invalid {
        /// How it exited.
        status: ExitStatus,
        /// Why.
        error: kplace_report::ReadError,
    },
}

/// Why child pipelines could not run.
#[derive(Debug, thiserror::Error)]
pub enum ChildError {
    /// A child could not be started.
    #[error("cannot start pipeline {index}: {source}")]
    Spawn {
        /// The pipeline.
        index: usize,
        /// The system's error.
        source: std::io::Error,
    },
    /// A child ended, or stayed unready, before it took packets.
    #[error("pipeline {index} did not start: {why}")]
    NotReady {
        /// The pipeline.
        index: usize,
        /// Why.
        why: kplace_report::ready::NotReady,
    },
    /// A child could not be waited for.
    #[error("waiting for a pipeline: {0}")]
    Wait(std::io::Error),
    /// The pipelines were ready, but the ready file could not be written.
    #[error(transparent)]
    Ready(#[from] kplace_report::ready::ReadyWriteError),
}

/// A child pipeline and the outputs whose temporary files it may leave.
struct Running {
    child: Child,
    outputs: Vec<PathBuf>,
    /// Whether it was reaped, and what it left removed.
    reaped: bool,
}

impl Running {
    /// Removes the temporary files the child, now reaped, left beside (or in) its outputs: a
    /// child killed with SIGKILL cannot remove its own.
    fn reaped(&mut self) {
        self.reaped = true;
        let pid = self.child.id();
        for path in &self.outputs {
            if path.is_dir() {
                kplace_core::os::write::remove_temporaries(path, None, pid);
            } else if let (Some(dir), Some(name)) = (path.parent(), path.file_name()) {
                let dir = if dir.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    dir
                };
                kplace_core::os::write::remove_temporaries(dir, Some(&name.to_string_lossy()), pid);
            }
        }
    }
}

/// Child processes that are killed and reaped if they outlive this guard (an error, a panic).
struct Children(Vec<Running>);

impl Drop for Children {
    fn drop(&mut self) {
        for running in &mut self.0 {
            if matches!(running.child.try_wait(), Ok(None)) {
                let _ = running.child.kill();
                let _ = running.child.wait();
            }
            if !running.reaped {
                running.reaped();
            }
        }
    }
}

/// Runs every pipeline as a child process: starts them all (each dies with this process), relays
/// each one's stderr line by line prefixed `[pipeline i] `, waits up to `ready_timeout` for each
/// ready file and then announces them all at once (on stderr, and in `ready_file`), waits for
/// every child, passing on an interrupt, and reads each one's report strictly.
pub fn in_processes(
    pipelines: Vec<ChildPipeline>,
    ready_file: Option<&Path>,
    ready_timeout: Duration,
) -> Result<Vec<ChildOutcome>, ChildError> {
    let mut children = Children(Vec::with_capacity(pipelines.len()));
    let mut relays = Vec::with_capacity(pipelines.len());
    let mut files = Vec::with_capacity(pipelines.len());
    for (index, pipeline) in pipelines.into_iter().enumerate() {
        let ChildPipeline {
            mut command,
            report,
            ready,
            outputs,
        } = pipeline;
        kplace_core::os::process::die_with_parent(&mut command);
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| ChildError::Spawn { index, source })?;
        relays.push(relay(index, child.stdout.take(), child.stderr.take()));
        children.0.push(Running {
            child,
            outputs,
            reaped: false,
        });
        files.push((report, ready));
    }
    if files.iter().any(|(_, ready)| ready.is_some()) {
        let mut sources = Vec::new();
        for (index, (running, (_, ready))) in children.0.iter_mut().zip(&files).enumerate() {
            let Some(ready) = ready else { continue };
            let mut addrs = wait_ready(&mut running.child, ready, ready_timeout)
                .map_err(|why| ChildError::NotReady { index, why })?;
            sources.append(&mut addrs);
        }
        announce(&sources, ready_file)?;
    }
    let statuses = wait_all(&mut children.0)?;
    Ok(statuses
        .into_iter()
        .zip(relays)
        .zip(files)
        .map(|(((pid, status), relay), (report, _))| ChildOutcome {
            pid,
            status,
            stdout: relay.join().unwrap_or_default(),
            report: read_report(&report, status),
        })
        .collect())
}

/// The most of a child's stdout kept (its last bytes): far more than its summary.
const MAX_CHILD_STDOUT: usize = 16 << 20;

/// Relays a child's stderr line by line, `[pipeline i] ` first, one write per line (so lines of
/// several children never interleave), and collects its stdout (at most [`MAX_CHILD_STDOUT`]);
/// the handle returns the stdout.
fn relay(
    index: usize,
    stdout: Option<ChildStdout>,
    stderr: Option<ChildStderr>,
) -> JoinHandle<String> {
    if let Some(stderr) = stderr {
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let text = format!("[pipeline {index}] {line}\n");
                let _ = std::io::stderr().lock().write_all(text.as_bytes());
            }
        });
    }
    std::thread::spawn(move || {
        stdout.map_or_else(String::new, |out| {
            kplace_core::os::process::drain_tail(out, MAX_CHILD_STDOUT)
        })
    })
}

/// Waits for every child, passing an interrupt of this process on to those still running;
/// returns each one's pid and status.
fn wait_all(children: &mut [Running]) -> Result<Vec<(u32, ExitStatus)>, ChildError> {
    let mut statuses: Vec<Option<ExitStatus>> = vec![None; children.len()];
    let mut forwarded = false;
    while statuses.iter().any(Option::is_none) {
        if let (Some(signal), false) = (interrupt::received(), forwarded) {
            forwarded = true;
            for (running, status) in children.iter().zip(&statuses) {
                if status.is_none() {
                    // Not yet reaped, so its pid is still its own.
                    let _ = kplace_core::os::process::send_signal(running.child.id(), signal);
                }
            }
        }
        for (running, status) in children.iter_mut().zip(statuses.iter_mut()) {
            if status.is_none() {
                *status = running.child.try_wait().map_err(ChildError::Wait)?;
                if status.is_some() {
                    running.reaped();
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(children
        .iter()
        .zip(statuses)
        .map(|(c, s)| (c.child.id(), s.unwrap_or_default()))
        .collect())
}

/// The report of a child that exited with `status`, or why there is none usable.
fn read_report(path: &Path, status: ExitStatus) -> Result<RunReport, NoReport> {
    let text = kplace_core::os::files::read_text_bounded(
        path,
        kplace_report::MAX_REPORT_BYTES,
        "run report",
    )
    .map_err(|error| match error.is_not_found() {
        true => NoReport::Missing { status },
        false => NoReport::Unreadable { status, error },
    })?;
    kplace_report::read_json(&text, &path.display().to_string())
        .map_err(|error| NoReport::Invalid { status, error })
}

/// A pipeline that has no report, and why.
pub fn failed(error: String) -> PipelineEntry {
    PipelineEntry::Failed(PipelineFailure { error })
}

/// Several pipelines' entries, in pipeline order, and why the run fails besides their
/// verdicts: what [`MultiRun::finish`] makes the multi-run report of.
#[derive(Debug)]
pub struct MultiRun {
    /// How the pipelines ran.
    pub mode: PipelineMode,
    /// Each pipeline's report, or why it has none.
    pub pipelines: Vec<PipelineEntry>,
    /// A line for each failure (`pipeline i: ...`): a pipeline that did not run, an output
    /// that could not be written.
    pub failures: Vec<String>,
}

/// A multi-run's report and what it says.
#[derive(Debug)]
pub struct MultiRunDone {
    /// The report (`kplace-multi-run-report/2`).
    pub report: MultiRunReport,
    /// The aggregate as it prints ([`Aggregate`]'s two lines), then each failure, indented.
    pub summary: String,
    /// Whether every pipeline ran and passed and nothing failed.
    pub passed: bool,
}

impl MultiRun {
    /// No pipeline yet, run in `mode`.
    pub fn new(mode: PipelineMode) -> MultiRun {
        MultiRun {
            mode,
            pipelines: Vec::new(),
            failures: Vec::new(),
        }
    }

    /// The aggregate of the pipelines, the report (with the interrupt that stopped the run,
    /// if one did) and its summary.
    pub fn finish(self) -> MultiRunDone {
        let aggregate = aggregate(&self.pipelines, self.mode);
        let mut summary = aggregate.to_string();
        for f in &self.failures {
            let _ = writeln!(summary, "  {f}");
        }
        let passed = self.failures.is_empty() && aggregate.all_passed;
        MultiRunDone {
            report: MultiRunReport {
                schema: MULTI_SCHEMA.to_string(),
                aggregate,
                pipelines: self.pipelines,
                interrupted: interrupt::received().map(|s| interrupt::name(s).to_string()),
                metrics_endpoint: None,
            },
            summary,
            passed,
        }
    }
}

/// The aggregate of per-pipeline reports (a failure for a pipeline that did not run): summed
/// frames and rates, the worst latency, and whether every pipeline verified.
pub fn aggregate(reports: &[PipelineEntry], mode: PipelineMode) -> Aggregate {
    let ran: Vec<&RunReport> = reports.iter().filter_map(PipelineEntry::report).collect();
    let passed = ran.iter().filter(|r| r.verification.passed).count();
    let cores = ran.iter().map(|r| r.cores_used);
    Aggregate {
        pipelines: reports.len(),
        mode: mode.name().to_string(),
        frames: ran.iter().map(|r| r.frames).sum(),
        partial_frames: ran.iter().map(|r| r.partial_frames).sum(),
        dropped_frames: ran.iter().map(|r| r.dropped_frames).sum(),
        frames_per_s: ran.iter().map(|r| r.frames_per_s).sum(),
        input_gbit_per_s: ran.iter().map(|r| r.input_gbit_per_s).sum(),
        min_pipeline_frames_per_s: ran.iter().map(|r| r.frames_per_s).reduce(f64::min),
        cores_used: if mode == PipelineMode::Process {
            cores.sum()
        } else {
            // Threads of one process each report the whole process's CPU time.
            cores.fold(0.0, f64::max)
        },
        worst_post_frame_p99_ms: ran
            .iter()
            .map(|r| r.latency.post_frame.p99_ms)
            .reduce(f64::max),
        worst_post_frame_p999_ms: ran
            .iter()
            .map(|r| r.latency.post_frame.p999_ms)
            .reduce(f64::max),
        pipelines_passed: passed,
        all_passed: passed == reports.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipelines_get_their_own_port_and_files() {
        let addr: SocketAddr = "127.0.0.1:9000".parse().unwrap();
        assert_eq!(pipeline_addr(addr, 2).unwrap().port(), 9002);
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        assert_eq!(pipeline_addr(any, 5).unwrap().port(), 0);
        let top: SocketAddr = "127.0.0.1:65535".parse().unwrap();
        assert_eq!(pipeline_addr(top, 1), None);
        assert_eq!(
            pipeline_path(Path::new("/tmp/det.txt"), Some(1)),
            Path::new("/tmp/det.p1.txt")
        );
        assert_eq!(
            pipeline_path(Path::new("det"), Some(0)),
            Path::new("det.p0")
        );
        assert_eq!(pipeline_path(Path::new("d.txt"), None), Path::new("d.txt"));
        assert_eq!("process".parse(), Ok(PipelineMode::Process));
        assert!("fork".parse::<PipelineMode>().is_err());
    }

    #[test]
    fn a_failing_or_panicking_pipeline_fails_alone() {
        let results = in_threads(vec![1u32, 2, 3], |i, x| match x {
            2 => Err(format!("pipeline {i} failed")),
            3 => panic!("boom"),
            _ => Ok(x * 10),
        });
        let shown: Vec<Result<u32, String>> = results
            .into_iter()
            .map(|r| r.map_err(|e| e.to_string()))
            .collect();
        assert_eq!(shown[0], Ok(10));
        assert_eq!(shown[1], Err("pipeline 1 failed".to_string()));
        assert_eq!(shown[2], Err("the pipeline's thread panicked".to_string()));
    }
}

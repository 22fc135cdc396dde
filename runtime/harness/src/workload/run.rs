//! One pipeline of any workload, run and judged: the workload's frames (replayed from memory
//! or received over UDP) through a plan, every completed frame handed to the workload's
//! [`Judge`] and, when asked, to sink files and a completion-times file, and the run's text
//! and typed report. `kplace run` runs one of these per pipeline, for the radar and for a
//! recording alike.
//!
//! Guarantees: a pipeline's outputs are the caller's, opened before it runs, so an unwritable
//! path loses no run; every output is flushed, and a failure to do so is an error, not a
//! silently short file.

use std::fmt::Write as _;
use std::io::Write;
use std::time::Duration;

use std::path::{Path, PathBuf};

use super::kind::{KindError, Prepared, Registry, Request};
use super::npy::NpyError;
use super::sinks::{SinkFiles, SinkFormat};
use super::{Judge, JudgeError, Workload};
use crate::session::{self, RunFacts};
use kplace_core::executor::{
    self, CompletedFrame, FrameSink, PartialFrame, Progress, RunOptions, SinkError, Source,
};
use kplace_core::interrupt;
use kplace_core::plan::{Plan, PlanError};
use kplace_net::replay::FrameReplay;
use kplace_net::udp::UdpSource;
use kplace_report::run::{RunMps, RunReport};
use kplace_report::trace::Trace;

/// How one pipeline runs.
#[derive(Clone, Debug, Default)]
pub struct PipelineRun {
    /// Frames to process (from a UDP source: frames expected).
    pub frames: u64,
    /// Frames processed and judged but left out of the rate, latency and CPU figures.
    pub warmup_frames: u64,
    /// Time each GPU stage with CUDA timing events.
    pub profile_gpu: bool,
    /// How often the run reports its progress to [`Outputs::progress`]; `None`: never.
    pub progress_every: Option<Duration>,
    /// Record the run's timeline ([`PipelineOutcome::trace`]).
    pub trace: bool,
    /// A control file whose edits change parameters while the run goes on
    /// ([`session::control`]).
    pub control: Option<std::path::PathBuf>,
    /// Other placements to switch to while the stream runs, and when ([`kplace_core::adapt`]).
    pub adapt: Option<Adapt>,
}

/// How a run adapts: the placements it may switch to, after the run's own, in order of
/// preference, and the rule that decides when.
#[derive(Clone, Debug)]
pub struct Adapt {
    /// The other placements, parsed once for the run.
    pub alternatives: Vec<kplace_core::model::placement::Placement>,
    /// When to switch.
    pub rule: kplace_core::adapt::Rule,
}

/// The executor's options for a run of `config` on `workload` (reporting progress or not),
/// and the watcher of its control file, if it has one, to keep until the run returns.
fn run_options(
    config: &PipelineRun,
    workload: &dyn Workload,
    reports_progress: bool,
) -> (RunOptions, Option<session::control::Watcher>) {
    let (watcher, updates) = match &config.control {
        Some(path) => {
            let (watcher, updates) = session::control::Watcher::start(path);
            (Some(watcher), Some(updates))
        }
        None => (None, None),
    };
    let options = RunOptions {
        warmup_frames: config.warmup_frames,
        profile_gpu: config.profile_gpu,
        progress_every: config.progress_every.filter(|_| reports_progress),
        trace: config.trace,
        // A replay and a sender cycle through the prepared frames: each cycle is the stream
        // again from its start, as the reference's one pass over them is.
        cycle: workload.frames().map(|frames| frames.len() as u64),
        control: updates,
    };
    (options, watcher)
}

/// Takes each of a pipeline's progress reports; an error stops the run.
pub type ProgressReport = Box<dyn FnMut(&Progress) -> std::io::Result<()> + Send>;

/// Where one pipeline writes, opened by the caller before it runs.
#[derive(Default)]
pub struct Outputs {
    /// What the workload reads from each frame, in its own format (the radar's detection
    /// lines).
    pub results: Option<Box<dyn Write + Send>>,
    /// Every sink tensor of every completed frame.
    pub sink_files: Option<SinkFiles>,
    /// `frame_id,done_ns` per completed frame.
    pub done_times: Option<Box<dyn Write + Send>>,
    /// With [`PipelineRun::progress_every`]: each progress report.
    pub progress: Option<ProgressReport>,
}

/// One pipeline's results: its printed report, its typed report, and whether it verified.
#[derive(Debug)]
pub struct PipelineOutcome {
    /// The report as `kplace run` prints it.
    pub text: String,
    /// The report as `kplace run --report` writes it.
    pub report: RunReport,
    /// Whether every frame verified.
    pub passed: bool,
    /// The run's timeline, when [`PipelineRun::trace`] asked for it.
    pub trace: Option<Trace>,
}

/// Why a pipeline could not run to its verdict.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// A replay was asked for without prepared frames.
    #[error("no frames to run: a replay needs prepared frames")]
    NoFrames,
    /// The judge could not be made or finished.
    #[error(transparent)]
    Judge(#[from] JudgeError),
    /// The run failed.
    #[error(transparent)]
    Run(#[from] executor::RunError),
    /// An output could not be completed.
    #[error("{0}")]
    Output(String),
    /// The workload could not be found or prepared.
    #[error(transparent)]
    Kind(#[from] KindError),
    /// The graph cannot run on the placement.
    #[error(transparent)]
    Plan(#[from] Box<PlanError>),
    /// Results were asked of a workload that reads none from its frames.
    #[error(
        "--detections: workload {kind} writes no results of its own; write every sink tensor with --write-sinks DIR"
    )]
    NoResults {
        /// The workload's kind.
        kind: &'static str,
    },
    /// The sink files cannot be created.
    #[error("--write-sinks {}: {source}", dir.display())]
    SinkFiles {
        /// Where they were to go.
        dir: PathBuf,
        /// Why not.
        source: NpyError,
    },
}

/// A run's workload, prepared once for all its pipelines, and how each of them runs.
pub struct PreparedRun {
    /// What every pipeline shares: frames, judge, graph and placement.
    prepared: Box<dyn Prepared>,
    /// How each pipeline runs.
    run: PipelineRun,
}

impl PreparedRun {
    /// Finds the workload `request` names in `registry` and prepares it for pipelines that
    /// run as `run` says; `results`: the caller will write the workload's own results
    /// ([`Outputs::results`]), refused for a kind that reads none.
    pub fn new(
        registry: &Registry,
        request: &Request<'_>,
        run: PipelineRun,
        results: bool,
    ) -> Result<PreparedRun, PipelineError> {
        let kind = registry.kind_for(request)?;
        if results && kind.results().is_none() {
            return Err(PipelineError::NoResults { kind: kind.name() });
        }
        // A GPU the placement needs and this machine lacks is said before anything is
        // prepared.
        if let Some(placement) = &request.files.placement {
            let provider = kplace_core::cuda::driver::CudaProvider::global();
            kplace_core::plan::bind::check_gpus(placement, provider).map_err(Box::new)?;
        }
        Ok(PreparedRun {
            prepared: kind.prepare(request)?,
            run,
        })
    }

    /// How each pipeline runs.
    pub fn pipeline_run(&self) -> &PipelineRun {
        &self.run
    }

    /// The names of the graph's stages, in graph order.
    pub fn stage_names(&self) -> Result<Vec<String>, PipelineError> {
        let (graph, _) = self.prepared.load()?;
        Ok(graph.stages.iter().map(|s| s.name.clone()).collect())
    }

    /// The sink files of pipeline `index` in `dir` (`dir/p<i>` with several pipelines).
    pub fn sink_files(
        &self,
        dir: &Path,
        index: Option<usize>,
        format: SinkFormat,
    ) -> Result<SinkFiles, PipelineError> {
        let (graph, _) = self.prepared.load()?;
        let dir = match index {
            Some(i) => dir.join(format!("p{i}")),
            None => dir.to_path_buf(),
        };
        SinkFiles::create(&dir, &graph, format)
            .map_err(|source| PipelineError::SinkFiles { dir, source })
    }

    /// Plans and runs pipeline `index` (or the only one) on `udp`, or on a replay
    /// ([`run_pipeline`]).
    pub fn run(
        &self,
        udp: Option<UdpSource>,
        index: Option<usize>,
        outputs: Outputs,
        mps: &dyn Fn() -> RunMps,
    ) -> Result<PipelineOutcome, PipelineError> {
        let (graph, placement) = self.prepared.load()?;
        if self.run.adapt.is_none() && !placement.alternatives.is_empty() && index.unwrap_or(0) == 0
        {
            tracing::info!(
                "kplace run: placement {} lists alternatives; give --budget to move the stream \
                 between them",
                placement.path.display()
            );
        }
        let mut plans = vec![Plan::new(graph, placement).map_err(Box::new)?];
        for alternative in self.run.adapt.iter().flat_map(|a| &a.alternatives) {
            let (graph, placement) = self.prepared.load_as(alternative)?;
            plans.push(Plan::new(graph, placement).map_err(Box::new)?);
        }
        run_plans(
            &plans,
            self.prepared.workload(),
            &self.run,
            udp,
            index,
            outputs,
            mps,
        )
    }
}

/// The sink every workload's frames go through: the judge, then the sink files and the
/// completion time.
struct JudgedSink {
    judge: Box<dyn Judge>,
    sink_files: Option<SinkFiles>,
    done_times: Option<Box<dyn Write + Send>>,
}

impl FrameSink for JudgedSink {
    fn frame(&mut self, frame: &CompletedFrame<'_>) -> Result<(), SinkError> {
        let id = frame.frame_id;
        self.judge.frame(frame).map_err(|e| SinkError::Judged {
            frame: id,
            why: Box::new(e),
        })?;
        if let Some(files) = &mut self.sink_files {
            for i in 0..files.len() {
                files
                    .write(i, frame.sink(i))
                    .map_err(|e| SinkError::Write {
                        frame: id,
                        what: "its sinks",
                        error: Box::new(e),
                    })?;
            }
        }
        if let Some(t) = &mut self.done_times {
            writeln!(t, "{id},{}", kplace_net::sender::monotonic_ns()).map_err(|e| {
                SinkError::Write {
                    frame: id,
                    what: "completion times",
                    error: Box::new(e),
                }
            })?;
        }
        Ok(())
    }

    fn partial(&mut self, frame: &PartialFrame) -> Result<(), SinkError> {
        self.judge.partial(frame.frame_id);
        Ok(())
    }
}

/// Runs `plan` (`index` among several pipelines, or the only one) on `udp`, or on a replay
/// of the workload's frames, judging every frame. `mps` says, after a run that made a CUDA
/// context, whether this process is an MPS client (the report records it, since MPS falls
/// back silently).
pub fn run_pipeline(
    plan: &Plan,
    workload: &dyn Workload,
    config: &PipelineRun,
    udp: Option<UdpSource>,
    index: Option<usize>,
    outputs: Outputs,
    mps: &dyn Fn() -> RunMps,
) -> Result<PipelineOutcome, PipelineError> {
    let plans = std::slice::from_ref(plan);
    run_plans(plans, workload, config, udp, index, outputs, mps)
}

/// [`run_pipeline`] on `plans`: the first alone, or all of them switched between as
/// [`PipelineRun::adapt`] says.
fn run_plans(
    plans: &[Plan],
    workload: &dyn Workload,
    config: &PipelineRun,
    mut udp: Option<UdpSource>,
    index: Option<usize>,
    outputs: Outputs,
    mps: &dyn Fn() -> RunMps,
) -> Result<PipelineOutcome, PipelineError> {
    let plan = &plans[0];
    let rule = config.adapt.as_ref().map(|a| a.rule.clone());
    let mut replay = match (&udp, workload.frames()) {
        (None, Some(frames)) => Some(FrameReplay::new(
            std::sync::Arc::clone(frames),
            config.frames,
        )),
        _ => None,
    };
    let source_name = match &udp {
        None => "replay".to_string(),
        Some(u) => format!(
            "udp://{}",
            u.local_addr()
                .map_or_else(|_| "?".to_string(), |a| a.to_string())
        ),
    };
    let name = index.map_or_else(String::new, |i| format!(" pipeline {i}:"));
    tracing::info!(
        "kplace run:{name} graph {} on placement {}, {} frames of {} from {}",
        plan.graph.name,
        placements_label(plans),
        config.frames,
        workload.shape(),
        if udp.is_none() {
            workload.describe()
        } else {
            source_name.clone()
        },
    );
    let Outputs {
        results,
        sink_files,
        done_times,
        mut progress,
    } = outputs;
    let mut sink = JudgedSink {
        judge: workload.judge(config.frames, results)?,
        sink_files,
        done_times,
    };
    let source: &mut dyn Source = match (&mut udp, &mut replay) {
        (Some(udp), _) => udp,
        (None, Some(replay)) => replay,
        (None, None) => return Err(PipelineError::NoFrames),
    };
    // Watched until the run returns (dropping the watcher joins its thread).
    let (options, watcher) = run_options(config, workload, progress.is_some());
    let run = match &mut progress {
        Some(write) => {
            let mut report = |p: &Progress| write(p).map_err(|e| SinkError::Progress(Box::new(e)));
            let mut with_progress = session::WithProgress {
                sink: &mut sink,
                report: &mut report,
            };
            session::run_plans(plans, rule, source, &mut with_progress, &options)?
        }
        None => session::run_plans(plans, rule, source, &mut sink, &options)?,
    };
    drop(watcher);
    let JudgedSink {
        judge,
        sink_files,
        done_times,
    } = sink;
    if let Some(files) = sink_files {
        files
            .finish()
            .map_err(|e| PipelineError::Output(format!("cannot complete the sink files: {e}")))?;
    }
    if let Some(mut t) = done_times {
        t.flush().map_err(|e| {
            PipelineError::Output(format!("cannot write the completion times: {e}"))
        })?;
    }
    let verdict = judge.finish()?;
    let metrics = &run.metrics;
    let mut text = String::new();
    let _ = write!(text, "{metrics}");
    if let Some(adaptation) = &metrics.adaptation {
        let _ = write!(text, "{adaptation}");
    }
    if let Some(telemetry) = &run.telemetry {
        let _ = write!(text, "{telemetry}");
    }
    if let Some(udp) = &udp {
        let _ = write!(text, "{}", udp.counters());
    }
    text.push_str(&verdict.text);
    let interrupted = interrupt::received();
    if let Some(signal) = interrupted {
        let _ = writeln!(
            text,
            "interrupted by {}: intake stopped, the frames in flight finished ({} processed)",
            interrupt::name(signal),
            metrics.frames
        );
    }
    // Only a process with a CUDA context can be an MPS client.
    let mps = run.telemetry.is_some().then(|| {
        let mps = mps();
        let _ = writeln!(
            text,
            "MPS: {} (pipe directory {}; {})",
            if mps.is_client {
                "this process is a client"
            } else {
                "not a client"
            },
            mps.pipe_dir.display(),
            mps.checked
        );
        mps
    });
    let facts = RunFacts {
        graph: plan.graph.name.clone(),
        placement: plan.placement.name.clone(),
        shape: workload.shape(),
        frame_bytes: workload.frame_bytes(),
        source: source_name,
        frames_expected: config.frames,
        details: verdict.details,
        interrupted: interrupted.map(|s| interrupt::name(s).to_string()),
        mps,
    };
    let ingest = udp.as_ref().map(|u| u.counters());
    let passed = verdict.verification.passed;
    let report = session::report(facts, &run, ingest, verdict.verification);
    Ok(PipelineOutcome {
        text,
        report,
        passed,
        trace: run.metrics.trace,
    })
}

/// The placement a run names: the first, and the others a run that adapts may switch to.
fn placements_label(plans: &[Plan]) -> String {
    let names: Vec<&str> = plans.iter().map(|p| p.placement.name.as_str()).collect();
    match names.as_slice() {
        [] => String::new(),
        [one] => one.to_string(),
        [first, others @ ..] => format!("{first} (adapting to {})", others.join(", ")),
    }
}

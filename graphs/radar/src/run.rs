//! One pipeline of the radar graph, run and judged: the scene's frames (replayed from memory
//! or received over UDP) through a plan of the graph, every completed frame verified against
//! the scene's truth by a [`RadarSink`], and the run's text and typed report. `kplace run`
//! runs one of these per pipeline.
//!
//! [`Setup`] is what every pipeline of a run shares and is prepared once: the graph checked
//! against the CPI, the false-alarm probability, the scene and, for a replay, its frames.
//! [`run_pipeline`] then plans and runs one pipeline through [`kplace::session`].
//!
//! Guarantees: every check (the graph fits the scene, the pools and prepared frames fit this
//! machine) runs before anything CPI-sized is allocated; a pipeline's outputs are the
//! caller's, opened before it runs, so an unwritable path loses no run.

use std::fmt::Write as _;
use std::io::Write;
use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::Instant;

use kplace::executor::{self, FrameSink, Progress, RunOptions, SinkError, Source};
use kplace::interrupt;
use kplace::net::replay::FrameReplay;
use kplace::net::udp::UdpSource;
use kplace::plan::{Plan, PlanError};
use kplace::report::run::{RunMps, RunReport};
use kplace::session::{self, RunFacts};

use crate::graph::{self, FitError, GraphFiles};
use crate::sink::FinishError;
use crate::{
    Cpi, DetectionWriter, RadarSink, Scene, SceneConfig, SceneError, Verifier, VerifyConfig,
};

/// What a run of the radar graph is asked to do.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// The graph and placement, and their overrides.
    pub files: GraphFiles,
    /// The scene whose frames are sent and whose truth judges them; its CPI binds the graph.
    pub scene: SceneConfig,
    /// Distinct scene frames: frame `i` shows scene frame `i mod` this ([`graph::scene_frames`]).
    pub scene_frames: NonZeroU64,
    /// Frames to process (from a UDP source: frames expected).
    pub frames: u64,
    /// Frames processed and verified but left out of the rate, latency and CPU figures.
    pub warmup_frames: u64,
    /// Time each GPU stage with CUDA timing events.
    pub profile_gpu: bool,
    /// The CFAR false-alarm probability, instead of the graph's (it also sets the verifier's
    /// bound).
    pub pfa: Option<f64>,
    /// Independent pipelines, each with its own pools (the memory check counts them all).
    pub pipelines: u64,
    /// Whether the frames are replayed from memory (prepared now) rather than received.
    pub replay: bool,
    /// How often the run reports its progress to [`Outputs::progress`]; `None`: never.
    pub progress_every: Option<std::time::Duration>,
    /// Record the run's timeline ([`PipelineOutcome::trace`]).
    pub trace: bool,
}

/// Why a radar run could not run.
#[derive(Debug, thiserror::Error)]
pub enum RadarRunError {
    /// The graph, placement or scene cannot run as asked.
    #[error(transparent)]
    Fit(#[from] FitError),
    /// The scene is invalid.
    #[error("invalid scene: {0}")]
    Scene(#[from] SceneError),
    /// The graph cannot be planned on the placement.
    #[error(transparent)]
    Plan(Box<PlanError>),
    /// The detections file's header could not be written.
    #[error("cannot write the detections file: {0}")]
    Detections(std::io::Error),
    /// A replay was asked for without prepared frames.
    #[error("no frames to run: a replay needs prepared frames")]
    NoFrames,
    /// The run failed.
    #[error(transparent)]
    Run(#[from] executor::RunError),
    /// The outputs could not be finished.
    #[error(transparent)]
    Finish(#[from] FinishError),
}

/// What every pipeline of a run shares: the CPI, the false-alarm probability, the scene and
/// its prepared frames (for a replay).
pub struct Setup {
    cpi: Cpi,
    pfa_set: Vec<(String, String, String)>,
    pfa: f64,
    scene: Scene,
    prepared: Option<Arc<[Vec<u8>]>>,
}

impl Setup {
    /// Checks the graph against the CPI, the run's memory against this machine, and prepares
    /// the scene (and, for a replay, its frames).
    pub fn new(config: &RunConfig) -> Result<Setup, RadarRunError> {
        let cpi = config.scene.cpi;
        let pfa_set = graph::pfa_override(&config.files.graph, config.pfa)?;
        let (graph, placement) = config.files.load(cpi, &pfa_set)?;
        graph::check_graph_fits(&graph, cpi)?;
        let pfa = graph::graph_pfa(&graph)?;
        let period = config.scene_frames.get();
        let prepared_frames = if config.replay { period } else { 0 };
        graph::check_memory(&graph, &placement, cpi, config.pipelines, prepared_frames)?;
        let scene = Scene::new(config.scene.clone())?;
        let prepared = if config.replay {
            let prepared_at = Instant::now();
            let frames = graph::prepare_frames(&scene, period)?;
            tracing::info!(
                "kplace run: {period} distinct scene frames prepared in {:.2} s",
                prepared_at.elapsed().as_secs_f64()
            );
            Some(Arc::from(frames))
        } else {
            None
        };
        Ok(Setup {
            cpi,
            pfa_set,
            pfa,
            scene,
            prepared,
        })
    }

    /// The CPI every pipeline runs.
    pub fn cpi(&self) -> Cpi {
        self.cpi
    }
}

/// Takes each of a pipeline's progress reports; an error stops the run.
pub type ProgressReport = Box<dyn FnMut(&Progress) -> std::io::Result<()> + Send>;

/// Where one pipeline writes, opened by the caller before it runs.
#[derive(Default)]
pub struct Outputs {
    /// Every frame's clusters, in the detection line format.
    pub detections: Option<Box<dyn Write + Send>>,
    /// `frame_id,done_ns` per completed frame.
    pub done_times: Option<Box<dyn Write + Send>>,
    /// With [`RunConfig::progress_every`]: each progress report.
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
    /// The run's timeline, when [`RunConfig::trace`] asked for it.
    pub trace: Option<kplace::report::trace::Trace>,
}

/// Plans and runs one pipeline of `config` (`index` among several, or the only one) on `udp`,
/// or on a replay of the prepared scene, judging every frame. `mps` says, after a run that
/// made a CUDA context, whether this process is an MPS client (the report records it, since
/// MPS falls back silently).
pub fn run_pipeline(
    config: &RunConfig,
    setup: &Setup,
    mut udp: Option<UdpSource>,
    index: Option<usize>,
    outputs: Outputs,
    mps: &dyn Fn() -> RunMps,
) -> Result<PipelineOutcome, RadarRunError> {
    let cpi = setup.cpi;
    let (graph, placement) = config.files.load(cpi, &setup.pfa_set)?;
    let plan = Plan::new(graph, placement).map_err(|e| RadarRunError::Plan(Box::new(e)))?;
    let mut replay = match (&udp, &setup.prepared) {
        (None, Some(frames)) => Some(FrameReplay::new(Arc::clone(frames), config.frames)),
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
        "kplace run:{name} graph {} on placement {}, CPI {cpi}, {} frames from {}, seed {}",
        plan.graph.name,
        plan.placement.name,
        config.frames,
        if udp.is_none() {
            "the scene in memory"
        } else {
            &source_name
        },
        config.scene.seed
    );
    let writer = match outputs.detections {
        Some(out) => Some(DetectionWriter::new(out, cpi).map_err(RadarRunError::Detections)?),
        None => None,
    };
    let verifier = Verifier::new(
        setup.scene.clone(),
        VerifyConfig::for_cpi(cpi, setup.pfa),
        config.frames,
    )
    .with_template_period(config.scene_frames);
    let mut sink = RadarSink::new(verifier, writer);
    if let Some(out) = outputs.done_times {
        sink = sink.with_done_times(out);
    }
    let source: &mut dyn Source = match (&mut udp, &mut replay) {
        (Some(udp), _) => udp,
        (None, Some(replay)) => replay,
        (None, None) => return Err(RadarRunError::NoFrames),
    };
    let mut progress = outputs.progress;
    let options = RunOptions {
        warmup_frames: config.warmup_frames,
        profile_gpu: config.profile_gpu,
        progress_every: config.progress_every.filter(|_| progress.is_some()),
        trace: config.trace,
    };
    let run = match &mut progress {
        Some(write) => {
            let mut report = |p: &Progress| {
                write(p).map_err(|e| SinkError(format!("cannot write the progress: {e}")))
            };
            let mut with_progress = session::WithProgress {
                sink: &mut sink as &mut dyn FrameSink,
                report: &mut report,
            };
            session::run(&plan, source, &mut with_progress, &options)?
        }
        None => session::run(&plan, source, &mut sink, &options)?,
    };
    let metrics = &run.metrics;
    let mut text = String::new();
    let _ = write!(text, "{metrics}");
    if let Some(telemetry) = &run.telemetry {
        let _ = write!(text, "{telemetry}");
    }
    if let Some(udp) = &udp {
        let _ = write!(text, "{}", udp.counters());
    }
    let _ = writeln!(
        text,
        "clusters {:.2}/frame{}",
        sink.total_clusters as f64 / metrics.frames.max(1) as f64,
        if sink.overflowed_frames > 0 {
            format!(
                ", {} frames overflowed the cluster list",
                sink.overflowed_frames
            )
        } else {
            String::new()
        }
    );
    let clusters = sink.total_clusters;
    let verifier = sink.finish()?;
    let (passed, verdict) = crate::verdict_text(&verifier, config.frames);
    text.push_str(&verdict);
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
        shape: cpi.to_string(),
        frame_bytes: (cpi.cells() as u64).saturating_mul(4),
        source: source_name,
        frames_expected: config.frames,
        clusters,
        interrupted: interrupted.map(|s| interrupt::name(s).to_string()),
        mps,
    };
    let ingest = udp.as_ref().map(|u| u.counters());
    let report = session::report(facts, &run, ingest, crate::verification(&verifier));
    Ok(PipelineOutcome {
        text,
        report,
        passed,
        trace: run.metrics.trace,
    })
}

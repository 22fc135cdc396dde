//! One pipeline, run and measured: the executor moving a source's frames through a plan to a
//! sink, with the NVML telemetry of the plan's GPUs sampled beside it, and the typed run
//! report built from what the run measured.
//!
//! A session knows nothing of a workload: the caller brings the source (a UDP receiver, a
//! replay), the sink that checks each frame, and the verdict that sink reached; the session
//! brings the rest of the report. Every runner of a pipeline (`kplace run`, one pipeline of
//! several, a `bisect-rate` trial) reports through [`report`], so their reports agree field
//! for field.
//!
//! [`listen`] binds one pipeline's UDP receiver and tells the run's [`Readiness`] when it takes
//! packets; [`several`] runs several pipelines at once and aggregates their reports, and
//! [`children`] runs them as child `kplace run` processes, each from a typed [`child`] spec,
//! what any library asks of a child `kplace` process;
//! [`control`] watches the control file whose edits change parameters while a run goes on.
//!
//! Guarantees: the telemetry sampler is stopped whether the run succeeds or fails; a plan
//! with no GPU stage opens no NVML handle.

pub mod child;
pub mod children;
pub mod control;
pub mod several;

use std::sync::Arc;
use std::time::Duration;

use kplace_core::executor::{
    self, CompletedFrame, FrameSink, NotAdaptable, PartialFrame, Progress, RunError, RunOptions,
    SinkError, Source,
};
use kplace_core::os::CpuSet;
use kplace_core::plan::Plan;
use kplace_net::udp::{IngestCounters, UdpConfig, UdpError, UdpSource};
use kplace_report::metrics::RunMetrics;
use kplace_report::ready::Readiness;
use kplace_report::run::{
    CarryEntry, ChangeEntry, Details, IngestEntry, Latencies, LatencyEntry, OverheadEntry,
    RUN_SCHEMA, RunMps, RunReport, StageEntry, Verification,
};
use kplace_report::telemetry::{DEFAULT_INTERVAL, Sampler, Telemetry};

/// What one run measured.
#[derive(Debug)]
pub struct Session {
    /// The executor's figures: frames, rate, latency, stages.
    pub metrics: RunMetrics,
    /// What NVML saw of the plan's GPUs; `None` for a plan without a GPU stage.
    pub telemetry: Option<Telemetry>,
}

/// Runs `plan` from `source` to `sink` with `options`, sampling the plan's GPUs beside it.
pub fn run(
    plan: &Plan,
    source: &mut dyn Source,
    sink: &mut dyn FrameSink,
    options: &RunOptions,
) -> Result<Session, RunError> {
    run_plans(std::slice::from_ref(plan), None, source, sink, options)
}

/// [`run`] on the first of `plans`, or, with `rule`, on all of them, switching as the rule
/// decides (`executor::run_adaptive`); the telemetry samples every GPU any of them uses.
pub fn run_plans(
    plans: &[Plan],
    rule: Option<kplace_core::adapt::Rule>,
    source: &mut dyn Source,
    sink: &mut dyn FrameSink,
    options: &RunOptions,
) -> Result<Session, RunError> {
    let mut ordinals: Vec<u32> = plans.iter().flat_map(|p| p.gpus.keys().copied()).collect();
    ordinals.sort_unstable();
    ordinals.dedup();
    let sampler = (!ordinals.is_empty()).then(|| Sampler::start(&ordinals, DEFAULT_INTERVAL));
    let execute = |sink: &mut dyn FrameSink| match (rule, plans) {
        (Some(rule), _) => executor::run_adaptive(plans, rule, source, sink, options),
        (None, [plan, ..]) => executor::run_with(plan, source, sink, options),
        (None, []) => Err(RunError::NotAdaptable(Box::new(NotAdaptable::NoPlacement))),
    };
    let result = match &sampler {
        // Progress reports say what the sampler last read of the GPUs.
        Some(sampler) if options.progress_every.is_some() => {
            let mut with_gpus = WithGpus { sink, sampler };
            execute(&mut with_gpus)
        }
        _ => execute(sink),
    };
    let telemetry = sampler.map(Sampler::stop);
    Ok(Session {
        metrics: result?,
        telemetry,
    })
}

/// A sink that hands every frame to `sink` and every progress report to `report`: how a run
/// that reports its progress (`RunOptions::progress_every`) keeps its workload's sink as it is.
pub struct WithProgress<'a> {
    /// The workload's sink.
    pub sink: &'a mut dyn FrameSink,
    /// Takes each report; an error stops the run.
    pub report: &'a mut dyn FnMut(&Progress) -> Result<(), SinkError>,
}

impl FrameSink for WithProgress<'_> {
    fn frame(&mut self, frame: &CompletedFrame<'_>) -> Result<(), SinkError> {
        self.sink.frame(frame)
    }

    fn partial(&mut self, frame: &PartialFrame) -> Result<(), SinkError> {
        self.sink.partial(frame)
    }

    fn progress(&mut self, progress: &Progress) -> Result<(), SinkError> {
        (self.report)(progress)
    }
}

/// A sink whose progress reports carry the sampler's last readings of the GPUs.
struct WithGpus<'a> {
    sink: &'a mut dyn FrameSink,
    sampler: &'a Sampler,
}

impl FrameSink for WithGpus<'_> {
    fn frame(&mut self, frame: &CompletedFrame<'_>) -> Result<(), SinkError> {
        self.sink.frame(frame)
    }

    fn partial(&mut self, frame: &PartialFrame) -> Result<(), SinkError> {
        self.sink.partial(frame)
    }

    fn progress(&mut self, progress: &Progress) -> Result<(), SinkError> {
        let progress = Progress {
            gpus: self.sampler.latest(),
            ..progress.clone()
        };
        self.sink.progress(&progress)
    }
}

/// Why a pipeline's receiver could not listen.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    /// The first pipeline's port plus this pipeline's index is past the last port.
    #[error("udp://{addr}: pipeline {index} would listen past port 65535")]
    PortRange {
        /// The first pipeline's address.
        addr: std::net::SocketAddr,
        /// This pipeline.
        index: usize,
    },
    /// The socket could not be bound or configured.
    #[error(transparent)]
    Udp(#[from] UdpError),
}

/// Binds pipeline `index`'s receiver (`None`: the only one) on `config.bind`'s port plus the
/// index (each its own ephemeral port for port 0), says where it listens and how many frames
/// its socket buffer holds (a warning below two), and tells `readiness` once it receives.
pub fn listen(
    mut config: UdpConfig,
    index: Option<usize>,
    readiness: &Arc<Readiness>,
) -> Result<UdpSource, ListenError> {
    let i = index.unwrap_or(0);
    let addr = config.bind;
    config.bind =
        several::pipeline_addr(addr, i).ok_or(ListenError::PortRange { addr, index: i })?;
    let shape = config.shape;
    let mut source = UdpSource::bind(config)?;
    let name = index.map_or_else(String::new, |i| format!(" pipeline {i}:"));
    let granted = source.counters().recv_buffer;
    // Linux reports twice the usable size.
    let frames_held = granted as f64 / 2.0 / shape.packet_bytes() as f64 / f64::from(shape.packets);
    tracing::info!(
        "kplace run:{name} listening on udp://{} (socket receive buffer {} KiB, {frames_held:.1} frames)",
        source.local_addr().unwrap_or(addr),
        granted / 1024
    );
    if frames_held < 2.0 {
        tracing::warn!(
            "kplace run:{name} warning: the socket buffer holds fewer than two frames; a stall of one frame loses packets (raise net.core.rmem_max, or run as root for SO_RCVBUFFORCE)"
        );
    }
    let readiness = Arc::clone(readiness);
    source.on_ready(Box::new(move |a| readiness.ready(i, a).map_err(|e| e.0)));
    source.on_lock(Box::new(move |a| {
        tracing::info!(
            "kplace run:{name} stream from {a}, confirmed by a frame's worth of its packets in order; other sources are counted as foreign"
        )
    }));
    Ok(source)
}

/// What a run knows about itself besides what the session measured.
#[derive(Debug)]
pub struct RunFacts {
    /// Graph name.
    pub graph: String,
    /// Placement name.
    pub placement: String,
    /// The source frame's shape, innermost axis first.
    pub shape: kplace_core::model::shape::FrameShape,
    /// Bytes of one input frame: what the input rate counts.
    pub frame_bytes: u64,
    /// `replay` or `udp://HOST:PORT`.
    pub source: String,
    /// Frames the run expected.
    pub frames_expected: u64,
    /// The workload's own figures (the report's `details`).
    pub details: Details,
    /// The signal that stopped the run, if one did.
    pub interrupted: Option<String>,
    /// Whether the process is an MPS client; `None` without a CUDA context.
    pub mps: Option<RunMps>,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The report of one pipeline's run: `facts`, what `session` measured, the receiver's
/// counters (`None` for a replay) and the sink's `verification`.
pub fn report(
    facts: RunFacts,
    session: &Session,
    ingest: Option<&IngestCounters>,
    verification: Verification,
) -> RunReport {
    let metrics = &session.metrics;
    let wall = metrics.wall.as_secs_f64();
    RunReport {
        schema: RUN_SCHEMA.to_string(),
        graph: facts.graph,
        placement: facts.placement,
        frame_shape: facts.shape,
        source: facts.source,
        frames_expected: facts.frames_expected,
        frames: metrics.frames,
        measured_frames: metrics.measured_frames,
        partial_frames: metrics.partial_frames,
        dropped_frames: metrics.dropped_frames,
        wall_s: wall,
        frames_per_s: metrics.frames_per_second(),
        input_gbit_per_s: if wall > 0.0 {
            metrics.measured_frames as f64 * facts.frame_bytes as f64 * 8.0 / wall / 1e9
        } else {
            0.0
        },
        cores_used: metrics.cores_used(),
        cpus_allowed: CpuSet::allowed().ok().map(|cpus| cpus.to_string()),
        slot_waits: metrics.slot_waits,
        stages: metrics
            .stages
            .iter()
            .map(|s| StageEntry {
                name: s.name.clone(),
                device: s.device.clone(),
                launches: s.launches,
                total_s: s.total.as_secs_f64(),
                per_frame_ms: ms(s.per_frame),
                max_launch_ms: ms(s.max_launch),
                gpu_ms_per_frame: s.gpu_per_frame.map(ms),
                carry: s.carry.map(|c| CarryEntry {
                    launches: c.launches,
                    frames_missing: c.frames_missing,
                    resets: c.resets,
                    restarts: c.restarts,
                    moves: c.moves,
                }),
            })
            .collect(),
        overhead: OverheadEntry::from(&metrics.overhead),
        latency: Latencies {
            post_frame: LatencyEntry::from(&metrics.post_frame),
            end_to_end: LatencyEntry::from(&metrics.end_to_end),
            post_frame_trend_ms_per_s: metrics.post_frame_trend * 1e3,
        },
        ingest: ingest.map(IngestEntry::from),
        verification,
        details: facts.details,
        interrupted: facts.interrupted,
        output_errors: Vec::new(),
        changes: metrics
            .changes
            .iter()
            .map(|c| ChangeEntry {
                stage: c.stage.clone(),
                params: c.params.iter().cloned().collect(),
                origin: c.origin.clone(),
                from_frame: c.from_sequence,
                refused: c.refused.clone(),
            })
            .collect(),
        gpu_telemetry: session
            .telemetry
            .clone()
            .unwrap_or_else(|| Telemetry::unavailable("no GPU stage")),
        mps: facts.mps,
        adaptation: metrics.adaptation.clone(),
        // The endpoint is the process's, not the pipeline's: the command that runs it fills
        // this in once the endpoint has stopped.
        metrics_endpoint: None,
    }
}

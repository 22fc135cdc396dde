//! `kplace run`: the radar graph on a generated scene or a UDP chirp stream, every frame
//! verified.

use std::io::Write;
use std::net::SocketAddr;
use std::net::ToSocketAddrs;
use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use kplace::executor::{self, Source};
use kplace::interrupt;
use kplace::net::replay::FrameReplay;
use kplace::net::udp::{AllowFrom, FrameBuffers, UdpConfig, UdpSource};
use kplace::net::wire::WireShape;
use kplace::plan::Plan;
use kplace::report::run::RunReport;
use kplace::session::{self, RunFacts};
use kplace_radar::{Cpi, DetectionWriter, RadarSink, Verifier, VerifyConfig, graph};

use super::args::{GraphArgs, SceneArgs};
use super::output::{self, ReportOutput};
use super::pipelines;
use super::ready::Readiness;

/// Where frames come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SourceArg {
    /// The scene, generated in memory and replayed as fast as the pipeline takes it.
    Replay,
    /// Chirp packets on a UDP socket (`udp://HOST:PORT`), sent by `kplace send` or a radio.
    Udp(SocketAddr),
}

impl FromStr for SourceArg {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "replay" {
            return Ok(SourceArg::Replay);
        }
        let addr = s
            .strip_prefix("udp://")
            .ok_or_else(|| format!("unknown source {s:?}: expected replay or udp://HOST:PORT"))?;
        if let Ok(addr) = addr.parse() {
            return Ok(SourceArg::Udp(addr));
        }
        // A host name: its first IPv4 address (what a sender to "localhost" reaches), else
        // its first address.
        let resolved: Vec<SocketAddr> = addr
            .to_socket_addrs()
            .map_err(|e| {
                format!("invalid address in {s:?}: {e} (expected udp://HOST:PORT, e.g. udp://127.0.0.1:9000)")
            })?
            .collect();
        resolved
            .iter()
            .find(|a| a.is_ipv4())
            .or(resolved.first())
            .copied()
            .map(SourceArg::Udp)
            .ok_or_else(|| format!("{s:?}: the host name resolves to no address"))
    }
}

/// Options of `kplace run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    graph: GraphArgs,
    #[command(flatten)]
    scene: SceneArgs,
    /// Frames to process (with a UDP source: frames expected, wire ids from --first-frame-id).
    #[arg(long, default_value_t = 200)]
    frames: u64,
    /// Frames processed and verified but left out of the rate, latency and CPU figures.
    #[arg(long, default_value_t = 0)]
    warmup_frames: u64,
    /// Time each GPU stage on its stream with CUDA timing events (kernels with their uploads,
    /// and downloads) and report it per frame; fences use timing-free events otherwise.
    #[arg(long)]
    profile_gpu: bool,
    /// Where frames come from: `replay` (the scene, in memory) or `udp://HOST:PORT`.
    #[arg(long, default_value = "replay")]
    pub(crate) source: SourceArg,
    /// UDP: the wire frame id of the first frame.
    #[arg(long, default_value_t = 0)]
    first_frame_id: u32,
    /// UDP: a frame that receives no packet for this long ends as partial.
    #[arg(long, default_value_t = 20)]
    frame_timeout_ms: u64,
    /// UDP: stop when no packet arrives for this long.
    #[arg(long, default_value_t = 2.0)]
    idle_timeout_s: f64,
    /// UDP: stop when no packet at all arrives this long after the receiver is ready (default:
    /// the idle timeout). A receiver nobody sends to ends; give a slow-starting sender more.
    #[arg(long)]
    start_timeout_s: Option<f64>,
    /// UDP: receive and assemble frames without processing them (the receiver's ceiling).
    #[arg(long)]
    ingest_only: bool,
    /// UDP: accept packets only from this source, ADDR or ADDR:PORT (repeatable). Without
    /// it the stream locks to the first sender; with it, another allowed sender (a restarted
    /// one, on a new port) can take the stream over once a frame's worth of its packets
    /// arrive in order. Every other source's packets are counted as foreign.
    #[arg(long, value_name = "ADDR[:PORT]", value_parser = parse_allow)]
    allow_from: Vec<Vec<AllowFrom>>,
    /// UDP: once every pipeline takes packets (plan, pools, kernel states and socket ready),
    /// write `{"schema": "kplace-ready/1", "pid": .., "sources": ["udp://HOST:PORT", ..]}` to
    /// this file, atomically. A `kplace run: ready: ...` line on stderr says the same.
    #[arg(long, value_name = "FILE")]
    pub(crate) ready_file: Option<PathBuf>,
    /// CFAR false-alarm probability (overrides the graph's; also sets the verifier's bound).
    #[arg(long)]
    pfa: Option<f64>,
    /// Write every frame's clusters to this file, in the detection line format (`-`: stdout).
    #[arg(long, value_name = "FILE")]
    pub(crate) detections: Option<PathBuf>,
    /// Write `frame_id,done_ns` (CLOCK_MONOTONIC, the clock of `kplace send --times`) per
    /// completed frame to this file: with the sender's times, the latency any judge can
    /// compute (`bisect-rate --sut-cmd ... {times}`).
    #[arg(long, value_name = "FILE")]
    pub(crate) done_times: Option<PathBuf>,
    /// Write the run's report to this file as JSON (schema in docs/report.md; `-`: stdout, and
    /// the summary goes to stderr).
    #[arg(long, value_name = "FILE")]
    pub(crate) report: Option<PathBuf>,
    /// Run N independent pipelines, each with its own slots, pools, kernel states, GPU streams,
    /// source and verifier; with a UDP source pipeline i listens on PORT + i (port 0: each its
    /// own) for its own sender. Reports per pipeline and in aggregate; `--detections F` writes
    /// F.p<i> per pipeline.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub(crate) pipelines: u64,
    /// With several pipelines: `thread` runs them in this process (one CUDA context, separate
    /// streams and pools), `process` as child processes (one context each).
    #[arg(long, value_enum, default_value = "thread")]
    pub(crate) pipeline_mode: PipelineMode,
}

fn parse_allow(text: &str) -> Result<Vec<AllowFrom>, String> {
    AllowFrom::parse(text)
}

impl RunArgs {
    /// Refuses option values that could only waste a run or pass it vacuously.
    fn check(&self) -> anyhow::Result<()> {
        if self.frames == 0 {
            bail!("--frames must be at least 1: a run of no frames verifies nothing");
        }
        if self.warmup_frames >= self.frames {
            bail!(
                "--warmup-frames {} leaves no frame to measure out of --frames {}: use fewer warm-up frames",
                self.warmup_frames,
                self.frames
            );
        }
        if self.frame_timeout_ms == 0 {
            bail!("--frame-timeout-ms must be at least 1: with 0 every frame would end partial");
        }
        let outputs = [&self.report, &self.detections, &self.done_times];
        if outputs
            .iter()
            .filter(|p| p.as_deref().is_some_and(output::is_stdout))
            .count()
            > 1
        {
            bail!("only one of --report, --detections and --done-times can be - (stdout)");
        }
        if self.pipelines > 1
            && outputs
                .iter()
                .any(|p| p.as_deref().is_some_and(output::is_stdout))
        {
            bail!("- (stdout) takes one pipeline's output: give a file with --pipelines");
        }
        Ok(())
    }

    /// Whether an output goes to stdout, so that the summary goes to stderr.
    pub(crate) fn stdout_taken(&self) -> bool {
        [&self.report, &self.detections, &self.done_times]
            .iter()
            .any(|p| p.as_deref().is_some_and(output::is_stdout))
    }

    /// The allowed sources, flattened.
    fn allowed(&self) -> Vec<AllowFrom> {
        self.allow_from.iter().flatten().copied().collect()
    }
}

/// The outputs of one pipeline, opened before it runs.
pub(crate) struct PipelineOutputs {
    detections: Option<Box<dyn Write + Send>>,
    done_times: Option<Box<dyn Write + Send>>,
}

impl PipelineOutputs {
    /// Opens pipeline `index`'s detections and completion-times files.
    pub(crate) fn open(args: &RunArgs, index: Option<usize>) -> anyhow::Result<Self> {
        Ok(Self {
            detections: args
                .detections
                .as_ref()
                .map(|p| output::open(&pipeline_path(p, index), "detections"))
                .transpose()?,
            done_times: args
                .done_times
                .as_ref()
                .map(|p| output::open(&pipeline_path(p, index), "completion times"))
                .transpose()?,
        })
    }
}

/// Prints a run's summary: to stdout, or to stderr when an output took stdout.
pub(crate) fn print_summary(args: &RunArgs, text: &str) {
    if args.stdout_taken() {
        eprint!("{text}");
    } else {
        print!("{text}");
    }
}

/// The exit status of a run that passed or not, or that an interrupt stopped.
pub(crate) fn exit_status(passed: bool) -> ExitCode {
    match interrupt::received() {
        Some(signal) => ExitCode::from(interrupt::exit_code(signal)),
        None if passed => ExitCode::SUCCESS,
        None => ExitCode::FAILURE,
    }
}

/// What the report says of an interrupt: the signal's name, if one stopped the run.
pub(crate) fn interrupted() -> Option<String> {
    interrupt::received().map(|s| interrupt::name(s).to_string())
}

/// Plans, prepares the source, runs, verifies and reports: one pipeline, or several
/// ([`super::pipelines`]).
pub fn main(args: RunArgs) -> anyhow::Result<ExitCode> {
    args.check()?;
    interrupt::install().context("cannot install the SIGINT/SIGTERM handler")?;
    if args.pipelines > 1 {
        if args.ingest_only {
            bail!("--ingest-only measures one receiver: drop --pipelines");
        }
        return match args.pipeline_mode {
            PipelineMode::Thread => pipelines::threads(&args),
            PipelineMode::Process => pipelines::processes(&args),
        };
    }
    let report_out = args.report.as_deref().map(ReportOutput::open).transpose()?;
    let outputs = PipelineOutputs::open(&args, None)?;
    let setup = Setup::new(&args)?;
    let readiness = Readiness::new(1, args.ready_file.clone());
    let mut udp = match args.source {
        SourceArg::Replay if args.ingest_only => {
            bail!("--ingest-only needs a UDP source (--source udp://HOST:PORT)")
        }
        SourceArg::Replay => None,
        SourceArg::Udp(addr) => Some(bind(&args, addr, setup.cpi, None, &readiness)?),
    };
    if let (Some(source), true) = (&mut udp, args.ingest_only) {
        return ingest_only(source, &args, setup.cpi);
    }
    let outcome = run_pipeline(&args, &setup, udp, None, outputs)?;
    print_summary(&args, &outcome.text);
    if let Some(out) = report_out {
        out.write(&outcome.report)?;
    }
    Ok(exit_status(outcome.passed))
}

/// How several pipelines run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PipelineMode {
    /// In this process: one CUDA context, each pipeline with its own streams, pools, slots,
    /// kernel states, source and verifier.
    Thread,
    /// As child `kplace run` processes, one pipeline each (one context each: the MPS case).
    Process,
}

/// What every pipeline of a run shares: the CPI, the false-alarm probability, the scene and
/// its prepared frames (for a replay source).
pub(crate) struct Setup {
    pub(crate) cpi: Cpi,
    pfa_set: Vec<(String, String, String)>,
    pfa: f64,
    period: std::num::NonZeroU64,
    scene: kplace_radar::Scene,
    prepared: Option<Arc<[Vec<u8>]>>,
}

impl Setup {
    /// Checks the graph against the CPI and prepares the scene (and, for a replay, its frames).
    pub(crate) fn new(args: &RunArgs) -> anyhow::Result<Setup> {
        let cpi = args.scene.cpi;
        let pfa_set = graph::pfa_override(&args.graph.graph, args.pfa)?;
        let (graph, placement) = args.graph.load(cpi, &pfa_set)?;
        graph::check_graph_fits(&graph, cpi)?;
        let pfa = graph::graph_pfa(&graph)?;
        let period = args.scene.scene_frames(args.frames)?;
        let replay = args.source == SourceArg::Replay && !args.ingest_only;
        // An ingest-only run assembles into plain buffers: it allocates none of the plan's pools.
        let pipelines = if args.ingest_only { 0 } else { args.pipelines };
        let prepared_frames = if replay { period.get() } else { 0 };
        graph::check_memory(&graph, &placement, cpi, pipelines, prepared_frames)?;
        let scene = args.scene.scene()?;
        let prepared = if replay {
            let prepared_at = Instant::now();
            let frames = graph::prepare_frames(&scene, period.get())?;
            tracing::info!(
                "kplace run: {} distinct scene frames prepared in {:.2} s",
                period,
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
            period,
            scene,
            prepared,
        })
    }
}

/// One pipeline's results: its printed report, its JSON report, and whether it verified.
pub(crate) struct PipelineOutcome {
    pub(crate) text: String,
    pub(crate) report: RunReport,
    pub(crate) passed: bool,
}

/// Plans and runs one pipeline (`index` among several, or the only one) on `udp`, or on a
/// replay of the prepared scene.
pub(crate) fn run_pipeline(
    args: &RunArgs,
    setup: &Setup,
    mut udp: Option<UdpSource>,
    index: Option<usize>,
    outputs: PipelineOutputs,
) -> anyhow::Result<PipelineOutcome> {
    use std::fmt::Write as _;
    let cpi = setup.cpi;
    let (graph, placement) = args.graph.load(cpi, &setup.pfa_set)?;
    let plan = Plan::new(graph, placement)?;
    let mut replay = match (&udp, &setup.prepared) {
        (None, Some(frames)) => Some(FrameReplay::new(Arc::clone(frames), args.frames)),
        _ => None,
    };
    let name = index.map_or_else(String::new, |i| format!(" pipeline {i}:"));
    tracing::info!(
        "kplace run:{name} graph {} on placement {}, CPI {cpi}, {} frames from {}, seed {}",
        plan.graph.name,
        plan.placement.name,
        args.frames,
        match &udp {
            None => "the scene in memory".to_string(),
            Some(u) => format!(
                "udp://{}",
                u.local_addr()
                    .map_or_else(|_| "?".to_string(), |a| a.to_string())
            ),
        },
        args.scene.seed
    );
    let writer = match outputs.detections {
        Some(out) => {
            Some(DetectionWriter::new(out, cpi).context("cannot write the detections file")?)
        }
        None => None,
    };
    let verifier = Verifier::new(
        setup.scene.clone(),
        VerifyConfig::for_cpi(cpi, setup.pfa),
        args.frames,
    )
    .with_template_period(setup.period);
    let mut sink = RadarSink::new(verifier, writer);
    if let Some(out) = outputs.done_times {
        sink = sink.with_done_times(out);
    }
    let source: &mut dyn Source = match (&mut udp, &mut replay) {
        (Some(udp), _) => udp,
        (None, Some(replay)) => replay,
        (None, None) => bail!("no frames to run: a replay needs prepared frames"),
    };

    let options = executor::RunOptions {
        warmup_frames: args.warmup_frames,
        profile_gpu: args.profile_gpu,
    };
    let run = session::run(&plan, source, &mut sink, &options)?;
    let report = &run.metrics;
    let mut text = String::new();
    let _ = write!(text, "{report}");
    if let Some(telemetry) = &run.telemetry {
        let _ = write!(text, "{telemetry}");
    }
    if let Some(udp) = &udp {
        let _ = write!(text, "{}", udp.counters());
    }
    let _ = writeln!(
        text,
        "clusters {:.2}/frame{}",
        sink.total_clusters as f64 / report.frames.max(1) as f64,
        if sink.overflowed_frames > 0 {
            format!(
                ", {} frames overflowed the cluster list",
                sink.overflowed_frames
            )
        } else {
            String::new()
        }
    );
    let total_clusters = sink.total_clusters;
    let verifier = sink.finish()?;
    let (passed, verdict) = kplace_radar::verdict_text(&verifier, args.frames);
    text.push_str(&verdict);
    if let Some(signal) = interrupt::received() {
        let _ = writeln!(
            text,
            "interrupted by {}: intake stopped, the frames in flight finished ({} processed)",
            interrupt::name(signal),
            report.frames
        );
    }
    // Whether this process really is an MPS client: MPS falls back silently, so a result that
    // claims MPS must show it. Only a process with a CUDA context can be one.
    let mps = run.telemetry.is_some().then(|| {
        let requested = std::env::var_os("CUDA_MPS_PIPE_DIRECTORY").is_some_and(|v| !v.is_empty());
        let mps = kplace_lab::mps::check_run(requested, std::process::id(), None);
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
        source: match &udp {
            None => "replay".into(),
            Some(u) => format!(
                "udp://{}",
                u.local_addr()
                    .map_or_else(|_| "?".to_string(), |a| a.to_string())
            ),
        },
        frames_expected: args.frames,
        clusters: total_clusters,
        interrupted: interrupted(),
        mps,
    };
    let ingest = udp.as_ref().map(|u| u.counters());
    let json = session::report(facts, &run, ingest, kplace_radar::verification(&verifier));
    Ok(PipelineOutcome {
        text,
        report: json,
        passed,
    })
}

/// `path` for pipeline `index`: `det.txt` becomes `det.p1.txt`; the path itself for a single
/// pipeline.
pub(crate) fn pipeline_path(path: &std::path::Path, index: Option<usize>) -> PathBuf {
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

/// Where pipeline `index` of a run on `addr` listens: the port plus the index, or an ephemeral
/// port of its own for port 0.
pub(crate) fn pipeline_addr(addr: SocketAddr, index: usize) -> anyhow::Result<SocketAddr> {
    let mut addr = addr;
    if addr.port() != 0 {
        let port = u16::try_from(usize::from(addr.port()) + index)
            .ok()
            .context("--source: the port plus the pipeline count exceeds 65535")?;
        addr.set_port(port);
    }
    Ok(addr)
}

/// Binds pipeline `index`'s receiver: on `addr`'s port plus the index (each its own
/// ephemeral port for port 0), telling `readiness` once it receives.
pub(crate) fn bind(
    args: &RunArgs,
    addr: SocketAddr,
    cpi: Cpi,
    index: Option<usize>,
    readiness: &Arc<Readiness>,
) -> anyhow::Result<UdpSource> {
    let addr = pipeline_addr(addr, index.unwrap_or(0))?;
    let shape = WireShape {
        samples: cpi.samples as u32,
        chirps: cpi.chirps as u32,
    };
    let mut config = UdpConfig::new(addr, shape);
    config.frames = Some(args.frames);
    config.first_frame_id = args.first_frame_id;
    config.frame_timeout = Duration::from_millis(args.frame_timeout_ms);
    config.idle_timeout = Duration::try_from_secs_f64(args.idle_timeout_s)
        .ok()
        .filter(|d| !d.is_zero())
        .context("--idle-timeout-s must be a positive number of seconds")?;
    config.start_timeout = args
        .start_timeout_s
        .map(|s| {
            Duration::try_from_secs_f64(s)
                .ok()
                .filter(|d| !d.is_zero())
                .context("--start-timeout-s must be a positive number of seconds")
        })
        .transpose()?;
    config.allow_from = args.allowed();
    let mut source = UdpSource::bind(config)?;
    let name = index.map_or_else(String::new, |i| format!(" pipeline {i}:"));
    let granted = source.counters().recv_buffer;
    // Linux reports twice the usable size.
    let frames_held = granted as f64 / 2.0 / shape.packet_bytes() as f64 / f64::from(shape.chirps);
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
    let i = index.unwrap_or(0);
    source.on_ready(Box::new(move |a| readiness.ready(i, a)));
    source.on_lock(Box::new(move |a| {
        tracing::info!("kplace run:{name} stream from {a}; other sources are counted as foreign")
    }));
    Ok(source)
}

fn ingest_only(source: &mut UdpSource, args: &RunArgs, cpi: Cpi) -> anyhow::Result<ExitCode> {
    let payload = cpi.samples * 4;
    let mut buffers = FrameBuffers::new(4, cpi.chirps as u64, payload)?;
    source.receive(&mut buffers, payload)?;
    let counters = source.counters();
    // From the first packet to the last: neither the wait for the sender nor the idle
    // timeout counts.
    let busy = counters.receiving.max(Duration::from_micros(1));
    let frames = counters.complete_frames;
    println!(
        "ingest only: {frames} complete frames in {:.3} s: {:.1} CPI/s, {:.2} Gbit/s of packets",
        busy.as_secs_f64(),
        frames as f64 / busy.as_secs_f64(),
        counters.bytes as f64 * 8.0 / busy.as_secs_f64() / 1e9
    );
    print!("{counters}");
    Ok(exit_status(counters.complete_frames == args.frames))
}

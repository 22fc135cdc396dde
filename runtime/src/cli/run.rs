//! `kplace run`: the radar graph on a generated scene or a UDP chirp stream, every frame
//! verified.

use std::fs::File;
use std::io::BufWriter;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use kplace::executor::{self, Source};
use kplace::plan::Plan;
use kplace::source::FrameReplay;
use kplace::telemetry::{DEFAULT_INTERVAL, Sampler, Telemetry};
use kplace::udp::{FrameBuffers, IngestCounters, UdpConfig, UdpSource};
use kplace::wire::{Malformed, WireShape};
use kplace_radar::{Cpi, DetectionWriter, Verifier, VerifyConfig};

use super::args::{GraphArgs, SceneArgs};
use super::pipelines;
use super::radar::{self, RadarSink};
use super::report;

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
        addr.parse()
            .map(SourceArg::Udp)
            .map_err(|e| format!("invalid address in {s:?}: {e} (expected udp://HOST:PORT, e.g. udp://127.0.0.1:9000)"))
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
    /// UDP: receive and assemble frames without processing them (the receiver's ceiling).
    #[arg(long)]
    ingest_only: bool,
    /// CFAR false-alarm probability (overrides the graph's; also sets the verifier's bound).
    #[arg(long)]
    pfa: Option<f64>,
    /// Write every frame's clusters to this file, in the detection line format.
    #[arg(long, value_name = "FILE")]
    pub(crate) detections: Option<PathBuf>,
    /// Write `frame_id,done_ns` (CLOCK_MONOTONIC, the clock of `kplace send --times`) per
    /// completed frame to this file: with the sender's times, the latency any judge can
    /// compute (`bisect-rate --sut-cmd ... {times}`).
    #[arg(long, value_name = "FILE")]
    pub(crate) done_times: Option<PathBuf>,
    /// Write the run's report to this file as JSON (schema in docs/report.md).
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

/// Plans, prepares the source, runs, verifies and reports: one pipeline, or several
/// ([`super::pipelines`]).
pub fn main(args: RunArgs) -> anyhow::Result<ExitCode> {
    if args.pipelines > 1 {
        if args.ingest_only {
            bail!("--ingest-only measures one receiver: drop --pipelines");
        }
        return match args.pipeline_mode {
            PipelineMode::Thread => pipelines::threads(&args),
            PipelineMode::Process => pipelines::processes(&args),
        };
    }
    let setup = Setup::new(&args)?;
    let mut udp = match args.source {
        SourceArg::Replay if args.ingest_only => {
            bail!("--ingest-only needs a UDP source (--source udp://HOST:PORT)")
        }
        SourceArg::Replay => None,
        SourceArg::Udp(addr) => Some(bind(&args, addr, setup.cpi, None)?),
    };
    if let (Some(source), true) = (&mut udp, args.ingest_only) {
        return ingest_only(source, &args, setup.cpi);
    }
    let outcome = run_pipeline(&args, &setup, udp, None)?;
    print!("{}", outcome.text);
    if let Some(path) = &args.report {
        report::write(path, &outcome.report)?;
    }
    Ok(if outcome.passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
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
        let pfa_set = radar::pfa_override(&args.graph.graph, args.pfa)?;
        let (graph, placement) = args.graph.load(cpi, &pfa_set)?;
        radar::check_graph_fits(&graph, cpi)?;
        let pfa = radar::graph_pfa(&graph)?;
        let period = args.scene.scene_frames(args.frames)?;
        let replay = args.source == SourceArg::Replay && !args.ingest_only;
        radar::check_memory(
            &graph,
            &placement,
            cpi,
            args.pipelines,
            if replay { period.get() } else { 0 },
        )?;
        let scene = args.scene.scene()?;
        let prepared = match (&args.source, args.ingest_only) {
            (SourceArg::Replay, false) => {
                let prepared_at = Instant::now();
                let frames = radar::prepare_frames(&scene, period.get())?;
                eprintln!(
                    "kplace run: {} distinct scene frames prepared in {:.2} s",
                    period,
                    prepared_at.elapsed().as_secs_f64()
                );
                Some(Arc::from(frames))
            }
            _ => None,
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
    pub(crate) report: serde_json::Value,
    pub(crate) passed: bool,
}

/// Plans and runs one pipeline (`index` among several, or the only one) on `udp`, or on a
/// replay of the prepared scene.
pub(crate) fn run_pipeline(
    args: &RunArgs,
    setup: &Setup,
    mut udp: Option<UdpSource>,
    index: Option<usize>,
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
    eprintln!(
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
    let writer = match &args.detections {
        Some(path) => {
            let path = pipeline_path(path, index);
            let file =
                File::create(&path).with_context(|| format!("cannot create {}", path.display()))?;
            Some(
                DetectionWriter::new(BufWriter::new(file), cpi)
                    .with_context(|| format!("cannot write {}", path.display()))?,
            )
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
    if let Some(path) = &args.done_times {
        let path = pipeline_path(path, index);
        let file =
            File::create(&path).with_context(|| format!("cannot create {}", path.display()))?;
        sink = sink.with_done_times(file);
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
    // NVML telemetry of the GPUs the plan uses, sampled beside the run.
    let ordinals: Vec<u32> = plan.gpus.keys().copied().collect();
    let sampler = (!ordinals.is_empty()).then(|| Sampler::start(&ordinals, DEFAULT_INTERVAL));
    let report = executor::run_with(&plan, source, &mut sink, &options)?;
    let telemetry = sampler.map_or_else(|| Telemetry::unavailable("no GPU stage"), Sampler::stop);
    let mut text = String::new();
    let _ = write!(text, "{report}");
    if !ordinals.is_empty() {
        let _ = write!(text, "{telemetry}");
    }
    if let Some(udp) = &udp {
        text.push_str(&counters_text(udp.counters()));
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
    let (passed, verdict) = radar::verdict_text(&verifier, args.frames);
    text.push_str(&verdict);
    let facts = report::RunFacts {
        graph: &plan.graph.name,
        placement: &plan.placement.name,
        cpi,
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
    };
    let ingest = udp.as_ref().map(|u| u.counters());
    let mut json = report::to_json(&facts, &report, ingest, &verifier);
    json["gpu_telemetry"] = serde_json::to_value(&telemetry)?;
    // Whether this process really is an MPS client: MPS falls back silently, so a result that
    // claims MPS must show it. Only a process with a CUDA context can be one.
    json["mps"] = if ordinals.is_empty() {
        serde_json::Value::Null
    } else {
        let requested = std::env::var_os("CUDA_MPS_PIPE_DIRECTORY").is_some_and(|v| !v.is_empty());
        let mps = kplace::mps::check_run(requested, std::process::id(), None);
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
        serde_json::to_value(&mps)?
    };
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

/// Binds pipeline `index`'s receiver: on `addr`'s port plus the index (each its own
/// ephemeral port for port 0).
pub(crate) fn bind(
    args: &RunArgs,
    addr: SocketAddr,
    cpi: Cpi,
    index: Option<usize>,
) -> anyhow::Result<UdpSource> {
    let mut addr = addr;
    if let Some(i) = index
        && addr.port() != 0
    {
        let port = u16::try_from(usize::from(addr.port()) + i)
            .ok()
            .context("--source: the port plus the pipeline count exceeds 65535")?;
        addr.set_port(port);
    }
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
    let source = UdpSource::bind(config)?;
    eprintln!(
        "kplace run:{} listening on udp://{} (socket receive buffer {} KiB)",
        index.map_or_else(String::new, |i| format!(" pipeline {i}:")),
        source.local_addr().unwrap_or(addr),
        source.counters().recv_buffer / 1024
    );
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
    print!("{}", counters_text(counters));
    Ok(if counters.complete_frames == args.frames {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn counters_text(c: &IngestCounters) -> String {
    let malformed: Vec<String> = Malformed::ALL
        .iter()
        .map(|m| format!("{} {}", m.name(), c.malformed(*m)))
        .collect();
    format!(
        "{}\n{}\n",
        format_args!(
            "ingest: packets {} ({} in place), accepted {}, duplicates {}, late {}, unexpected {}, malformed: {}",
            c.packets,
            c.in_place,
            c.accepted,
            c.duplicates,
            c.late,
            c.unexpected,
            malformed.join(", ")
        ),
        format_args!(
            "ingest: frames complete {}, partial {}, dropped {} ({} packets); socket buffer {} KiB",
            c.complete_frames,
            c.partial_frames,
            c.dropped_frames,
            c.dropped_packets,
            c.recv_buffer / 1024
        )
    )
}

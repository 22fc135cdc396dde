//! `kplace run`: a graph on its workload's frames (those the graph's workload generates, or
//! a recording's), replayed or received as a UDP stream, every frame checked. The workload
//! is found in the binary's registry ([`crate::workloads`]) and prepared by
//! [`PreparedRun`]; this module turns options into that request and prints what it returns.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use kplace::adapt::Rule;
use kplace::interrupt;
use kplace::model::files::GraphFiles;
use kplace::model::placement::{MAX_ALTERNATIVES, Placement};
use kplace::net::source::FrameSource;
use kplace::net::udp::{AllowFrom, UdpConfig};
use kplace::net::wire::WireShape;
use kplace::report::output::{self, ReportOutput};
use kplace::report::ready::Readiness;
use kplace::report::run::RunMps;
use kplace::session::{self, several::PipelineMode};
use kplace::workload::kind::{RecordingRequest, Request};
use kplace::workload::outputs::OutputPaths;
use kplace::workload::recording::Recording;
use kplace::workload::reference::CheckSpec;
use kplace::workload::run::{Adapt, PipelineRun, PreparedRun};
use kplace::workload::sinks::SinkFormat;

mod child;

use super::args::GraphArgs;
use super::progress::Live;
use super::workloads::WorkloadArgs;

/// Options of `kplace run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub(crate) graph: GraphArgs,
    #[command(flatten)]
    pub(crate) workload: WorkloadArgs,
    /// Run the graph on this recording of its source tensor's frames (raw, with SigMF
    /// metadata beside it when present; `kplace record` makes one) instead of a workload's
    /// own frames: replayed from memory, or received from `kplace send --recording` over UDP.
    #[arg(long, value_name = "FILE")]
    pub(crate) recording: Option<PathBuf>,
    /// With --recording, what every frame's sinks are checked against, within the graph's
    /// tolerances: `reference:PLACEMENT` (the same graph on that placement, a file or a name
    /// in the graph's `placements/`, run first on the recording's frames), `golden:DIR`
    /// (DIR/<sink>.npy, as --write-sinks writes them) or `none`.
    #[arg(
        long,
        value_name = "CHECK",
        default_value = "none",
        requires = "recording"
    )]
    pub(crate) check: CheckSpec,
    /// Write every sink tensor of every completed frame into DIR, a file per tensor
    /// (DIR/p<i> per pipeline with several).
    #[arg(long, value_name = "DIR")]
    pub(crate) write_sinks: Option<PathBuf>,
    /// The sink files' format: `npy` (NumPy, [frames, ...]) or `raw` (the bytes back to back).
    #[arg(
        long,
        value_name = "FORMAT",
        default_value = "npy",
        requires = "write_sinks"
    )]
    pub(crate) sink_format: SinkFormat,
    /// Frames to process (with a UDP source: frames expected, wire ids from --first-frame-id).
    #[arg(long, default_value_t = 200)]
    pub(crate) frames: u64,
    /// Frames processed and verified but left out of the rate, latency and CPU figures.
    #[arg(long, default_value_t = 0)]
    pub(crate) warmup_frames: u64,
    /// Write the run's timeline to this file as Chrome trace events (open it in Perfetto or
    /// chrome://tracing): each frame's packets and delivery, every CPU launch on its worker,
    /// every GPU enqueue and fence, GPU callbacks and slot waits, each with its frame id
    /// (docs/report.md). With several pipelines, FILE.p<i> per pipeline.
    #[arg(long, value_name = "FILE")]
    pub(crate) trace: Option<PathBuf>,
    /// Report the run's progress every DURATION (e.g. `1s`, `250ms`): one JSON line per
    /// interval, and a last one at the end (schema `kplace-progress/3`, docs/report.md), to
    /// --progress-out; and a progress bar on a terminal.
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::positive)]
    pub(crate) report_every: Option<Duration>,
    /// Where --report-every writes its lines: a file, or `-` for stdout (the summary then goes
    /// to stderr) [default: -].
    #[arg(long, value_name = "FILE", requires = "report_every")]
    pub(crate) progress_out: Option<PathBuf>,
    /// Serve the run's metrics (frames, losses, per-stage time, a post-frame latency
    /// histogram, GPU utilisation and memory) as OpenMetrics text at http://ADDR/metrics, for
    /// a monitoring system to scrape while the run goes on (docs/report.md), updated every
    /// --report-every, or every 500 ms without it. Port 0 takes a free port, which the log
    /// says. There is no authentication: bind loopback (127.0.0.1) unless a firewall lets
    /// only the scraper reach it. The endpoint has 2 handlers, 16 connections waiting, 8 KiB
    /// of request head and 2 s per request; past them it refuses, and the report counts it.
    #[arg(long, value_name = "HOST:PORT")]
    pub(crate) metrics: Option<std::net::SocketAddr>,
    /// Change parameters while the run goes on: FILE holds lines `STAGE.PARAM=VALUE` (as
    /// --set), read at the start and again whenever it changes; each changed value applies
    /// from the next frame to begin, on CPU stages, and is in the report (docs/graphs.md,
    /// "Changing parameters while a run goes on"). A --check still compares with the graph's
    /// own values.
    #[arg(long, value_name = "FILE")]
    pub(crate) control: Option<PathBuf>,
    /// Another placement to move the stream to while it runs, when the placement running stops
    /// keeping up (repeatable, each a different placement and not --placement's; a file or a
    /// name, as --placement; instead of the `alternatives:` the placement lists): --placement
    /// is preferred, then each --adapt in the order given.
    /// Every placement is planned before the first frame; switches happen at frame boundaries,
    /// are judged against --budget, and are in the report, the progress lines, the trace and
    /// the metrics (docs/adapt.md).
    #[arg(long, value_name = "FILE|NAME", requires = "budget")]
    pub(crate) adapt: Vec<PathBuf>,
    /// The post-frame latency budget (e.g. `5ms`) the switching rule judges frames against:
    /// the run adapts, between --placement and each --adapt, or else the `alternatives:` the
    /// placement lists.
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::positive)]
    pub(crate) budget: Option<Duration>,
    /// With --budget: the share of it past which a frame counts as late for the switching
    /// rule, in (0, 1]: below 1, it moves before frames break the budget itself.
    #[arg(long, value_name = "SHARE", default_value_t = 0.5, requires = "budget")]
    pub(crate) adapt_trigger: f64,
    /// With --budget: frames per judgement of the switching rule.
    #[arg(long, value_name = "FRAMES", default_value_t = 16, requires = "budget", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub(crate) adapt_window: u32,
    /// With --budget: how long a placement must keep up before the rule tries the preferred
    /// one again, at first (doubled after each try that fails, up to 16 times).
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = crate::duration::positive, requires = "budget")]
    pub(crate) adapt_hold: Duration,
    /// Time each GPU stage on its stream with CUDA timing events (kernels with their uploads,
    /// and downloads) and report it per frame; fences use timing-free events otherwise.
    #[arg(long)]
    pub(crate) profile_gpu: bool,
    /// Where frames come from: `replay` (the scene, in memory) or `udp://HOST:PORT`.
    #[arg(long, default_value = "replay")]
    pub(crate) source: FrameSource,
    /// UDP: the wire frame id of the first frame.
    #[arg(long, default_value_t = 0)]
    pub(crate) first_frame_id: u32,
    /// UDP: a frame that receives no packet for this long ends as partial.
    #[arg(long, value_name = "DURATION", default_value = "20ms", value_parser = crate::duration::or_ms, alias = "frame-timeout-ms")]
    frame_timeout: Duration,
    /// UDP: stop when no packet arrives for this long.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = crate::duration::or_s, alias = "idle-timeout-s")]
    idle_timeout: Duration,
    /// UDP: stop when no packet at all arrives this long after the receiver is ready (default:
    /// the idle timeout). A receiver nobody sends to ends; give a slow-starting sender more.
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::or_s, alias = "start-timeout-s")]
    start_timeout: Option<Duration>,
    /// UDP: receive and assemble frames without processing them (the receiver's ceiling).
    #[arg(long)]
    pub(crate) ingest_only: bool,
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
    /// Write what the workload reads from every frame to this file, in its own format (the
    /// radar: its clusters, in the detection line format; `-`: stdout).
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
    pub(crate) pipeline_mode: ModeArg,
    /// With several pipelines: run them even where this machine's stored calibration and the
    /// cost model say they do not fit (`kplace admit`).
    #[arg(long)]
    pub(crate) force: bool,
}

fn parse_allow(text: &str) -> Result<Vec<AllowFrom>, String> {
    AllowFrom::parse(text).map_err(|e| e.to_string())
}

impl RunArgs {
    /// Refuses option values that could only waste a run or pass it vacuously.
    pub(crate) fn check(&self) -> anyhow::Result<()> {
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
        if self.frame_timeout < Duration::from_millis(1) {
            bail!("--frame-timeout must be at least 1ms: shorter, every frame would end partial");
        }
        if let Some(path) = &self.trace {
            output::file_only(path, "--trace")?;
        }
        if let Some(path) = &self.ready_file {
            // Written only once the receiver takes packets: a sender waiting for it would wait
            // in vain, so a name it cannot be written to fails now.
            output::file_only(path, "--ready-file")?;
            kplace::report::ready::check(path)
                .with_context(|| format!("--ready-file {}", path.display()))?;
        }
        if let Some(dir) = &self.write_sinks {
            output::file_only(dir, "--write-sinks")?;
        }
        let outputs = self.outputs();
        if outputs
            .iter()
            .filter(|p| p.is_some_and(output::is_stdout))
            .count()
            > 1
        {
            bail!(
                "only one of --report, --detections, --done-times and --progress-out (with \
                 --report-every, - by default) can be - (stdout)"
            );
        }
        if self.budget.is_some() {
            let refuse = |option: &str, why: &str| -> anyhow::Result<()> {
                bail!("--adapt with {option}: {why}")
            };
            if self.adapt.len() > MAX_ALTERNATIVES {
                refuse(
                    &format!("{} placements", self.adapt.len()),
                    &format!("at most {MAX_ALTERNATIVES}, each planned for the whole run"),
                )?;
            }
            if self.graph.workers.is_some() {
                refuse(
                    "--workers",
                    "it would give every placement the same workers; set them in each placement file",
                )?;
            }
            if self.control.is_some() {
                refuse(
                    "--control",
                    "parameters cannot change while the run switches placements",
                )?;
            }
            if self.ingest_only {
                refuse("--ingest-only", "nothing is processed to adapt")?;
            }
        }
        if self.pipelines > 1 && outputs.iter().any(|p| p.is_some_and(output::is_stdout)) {
            bail!(
                "- (stdout) takes one pipeline's output: give a file with --pipelines \
                 (--progress-out FILE with --report-every)"
            );
        }
        Ok(())
    }

    /// What `pipelines` pipelines of `prepared` report as they go: progress lines
    /// (--report-every) and metrics (--metrics).
    pub(crate) fn live(&self, prepared: &PreparedRun, pipelines: usize) -> anyhow::Result<Live> {
        let lines = self.progress_path();
        Live::open(lines, self.frames, self.metrics, prepared, pipelines)
    }

    /// Where the progress lines go, with --report-every.
    pub(crate) fn progress_path(&self) -> Option<&Path> {
        self.report_every?;
        Some(self.progress_out.as_deref().unwrap_or(Path::new("-")))
    }

    /// Every output the options name.
    fn outputs(&self) -> [Option<&Path>; 4] {
        [
            self.report.as_deref(),
            self.detections.as_deref(),
            self.done_times.as_deref(),
            self.progress_path(),
        ]
    }

    /// Whether an output goes to stdout, so that the summary goes to stderr.
    pub(crate) fn stdout_taken(&self) -> bool {
        self.outputs()
            .iter()
            .any(|p| p.is_some_and(output::is_stdout))
    }

    /// The receiver these options describe, on `addr`.
    pub(crate) fn udp_config(
        &self,
        addr: SocketAddr,
        files: &GraphFiles,
    ) -> anyhow::Result<UdpConfig> {
        let positive = |d: Duration, option: &str| {
            (!d.is_zero())
                .then_some(d)
                .with_context(|| format!("{option} must be longer than zero"))
        };
        let mut config = UdpConfig::new(addr, self.wire(files)?);
        config.frames = Some(self.frames);
        config.first_frame_id = self.first_frame_id;
        config.frame_timeout = self.frame_timeout;
        config.idle_timeout = positive(self.idle_timeout, "--idle-timeout")?;
        config.start_timeout = self
            .start_timeout
            .map(|d| positive(d, "--start-timeout"))
            .transpose()?;
        config.allow_from = self.allow_from.iter().flatten().copied().collect();
        Ok(config)
    }

    /// The wire of the stream these options receive: the graph's source as the run binds
    /// it (the recording's metadata binding what the command line leaves open), one packet
    /// per index of its packet axis.
    fn wire(&self, files: &GraphFiles) -> anyhow::Result<WireShape> {
        let mut files = files.clone();
        if let Some(recording) = &self.recording {
            files.dims = Recording::bind_described(&files, recording)?;
        }
        WireShape::for_source(&files.shaped_graph()?).map_err(anyhow::Error::msg)
    }

    /// The graph and placement files these options name, read and parsed once for the run.
    pub(crate) fn files(&self) -> anyhow::Result<GraphFiles> {
        self.graph.files()
    }

    /// Finds and prepares the workload these options name on `files`, once for all pipelines.
    pub(crate) fn prepare(&self, files: &GraphFiles) -> anyhow::Result<PreparedRun> {
        let options = self.workload.options();
        let recording = self.recording.as_ref().map(|path| RecordingRequest {
            path: path.clone(),
            check: self.check.clone(),
        });
        let request = Request {
            files,
            options: &options,
            recording: recording.as_ref(),
            seed: self.workload.seed,
            frames: self.frames,
            pipelines: self.pipelines,
            replay: self.source == FrameSource::Replay,
        };
        let run = PipelineRun {
            frames: self.frames,
            warmup_frames: self.warmup_frames,
            profile_gpu: self.profile_gpu,
            progress_every: self
                .report_every
                .or(self.metrics.map(|_| super::progress::METRICS_EVERY)),
            trace: self.trace.is_some(),
            control: self.control.clone(),
            adapt: self.adaptation(files)?,
        };
        let registry = crate::workloads::registry();
        Ok(PreparedRun::new(
            &registry,
            &request,
            run,
            self.detections.is_some(),
        )?)
    }

    /// The placements to move the stream between (--adapt's, else the `alternatives:` the
    /// placement lists), each read once, and the rule that switches between them; none without
    /// --budget.
    fn adaptation(&self, files: &GraphFiles) -> anyhow::Result<Option<Adapt>> {
        let Some(budget) = self.budget else {
            return Ok(None);
        };
        let own = files
            .placement
            .as_ref()
            .context("--budget adapts a run that plans a placement")?;
        let alternatives = if self.adapt.is_empty() {
            let listed = own.alternative_files(files.graph_path())?;
            if listed.is_empty() {
                bail!(
                    "--budget judges a run that adapts: give --adapt PLACEMENT, or list \
                     alternatives: in placement {}",
                    own.path.display()
                );
            }
            listed
                .iter()
                .map(|path| Placement::load(path))
                .collect::<Result<_, _>>()?
        } else {
            self.adapt_placements(own, files.graph_path())?
        };
        let rule = Rule {
            trigger: self.adapt_trigger,
            window: self.adapt_window,
            hold: self.adapt_hold,
            max_hold: self.adapt_hold * 16,
            ..Rule::for_budget(budget)
        };
        rule.check()?;
        Ok(Some(Adapt { alternatives, rule }))
    }

    /// The placements of --adapt, each found as --placement finds one and read once, checked
    /// as a placement's `alternatives:` list is: none the run's own placement `own` (by file or
    /// by name), none given twice.
    fn adapt_placements(&self, own: &Placement, graph: &Path) -> anyhow::Result<Vec<Placement>> {
        // Two ways of writing one file (a name, a path, a link) are the same file.
        let same_file = |file: &Path| std::fs::canonicalize(file).unwrap_or(file.to_path_buf());
        let own_file = same_file(&own.path);
        let mut seen: Vec<(PathBuf, String)> = Vec::new();
        let mut placements = Vec::new();
        for written in &self.adapt {
            let file = super::args::placement_file(written, graph)?;
            let placement = Placement::load(&file)?;
            let this = (same_file(&file), placement.name.clone());
            if this.0 == own_file || this.1 == own.name {
                bail!(
                    "--adapt {} is this run's placement itself ({}, as --placement); give the others",
                    written.display(),
                    own.name
                );
            }
            if seen.iter().any(|s| s.0 == this.0 || s.1 == this.1) {
                bail!(
                    "--adapt {} is given twice (placement {})",
                    written.display(),
                    this.1
                );
            }
            seen.push(this);
            placements.push(placement);
        }
        Ok(placements)
    }

    /// Where each pipeline writes, besides its report.
    pub(crate) fn output_paths(&self) -> OutputPaths {
        OutputPaths {
            results: self.detections.clone(),
            done_times: self.done_times.clone(),
            trace: self.trace.clone(),
            sinks: self.write_sinks.clone().map(|dir| (dir, self.sink_format)),
        }
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

/// Plans, prepares the source, runs, verifies and reports one pipeline (several are
/// [`super::pipelines`]'s).
pub fn main(args: RunArgs) -> anyhow::Result<ExitCode> {
    args.check()?;
    interrupt::install().context("cannot install the SIGINT, SIGTERM and SIGHUP handler")?;
    let report_out = args.report.as_deref().map(ReportOutput::open).transpose()?;
    let readiness = Readiness::new(1, args.ready_file.clone());
    if args.ingest_only {
        let Some(addr) = args.source.udp() else {
            bail!("--ingest-only needs a UDP source (--source udp://HOST:PORT)");
        };
        let files = args.files()?;
        let mut udp = session::listen(args.udp_config(addr, &files)?, None, &readiness)?;
        let measured = udp.receive_only()?;
        print!("{measured}");
        return Ok(exit_status(
            measured.counters.complete_frames == args.frames,
        ));
    }
    let graph_files = args.files()?;
    let prepared = args.prepare(&graph_files)?;
    let live = args.live(&prepared, 1)?;
    let (outputs, files) = args
        .output_paths()
        .open(&prepared, None, live.reporter(None))?;
    let udp = match args.source.udp() {
        None => None,
        Some(addr) => {
            let mut udp = session::listen(args.udp_config(addr, &graph_files)?, None, &readiness)?;
            if let Some((every, tell)) = live.ingest(None) {
                udp.on_counters(every, tell);
            }
            Some(udp)
        }
    };
    let mut outcome = prepared.run(udp, None, outputs, &check_mps)?;
    print_summary(&args, &outcome.text);
    // Every other output is completed first, so that the report says which failed.
    let mut failed = files.finish(outcome.trace.as_ref());
    let live = live.commit();
    if let Some(line) = live.endpoint_line() {
        print_summary(&args, &line);
    }
    if let Err(e) = live.progress {
        tracing::error!("kplace run: {e}");
        failed.push(e);
    }
    outcome.report.output_errors = failed.clone();
    outcome.report.metrics_endpoint = live.endpoint;
    if let Some(out) = report_out {
        out.write(&outcome.report)?;
    }
    Ok(exit_status(outcome.passed && failed.is_empty()))
}

/// Whether this process is an MPS client: what every pipeline's report records.
pub(crate) fn check_mps() -> RunMps {
    let requested = std::env::var_os("CUDA_MPS_PIPE_DIRECTORY").is_some_and(|v| !v.is_empty());
    kplace_lab::mps::check_run(requested, std::process::id(), None)
}

/// How several pipelines run (`--pipeline-mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ModeArg {
    /// In this process: one CUDA context, each pipeline with its own streams, pools, slots,
    /// kernel states, source and verifier.
    Thread,
    /// As child `kplace run` processes, one pipeline each (one context each: the MPS case).
    Process,
}

impl From<ModeArg> for PipelineMode {
    fn from(mode: ModeArg) -> Self {
        match mode {
            ModeArg::Thread => PipelineMode::Thread,
            ModeArg::Process => PipelineMode::Process,
        }
    }
}

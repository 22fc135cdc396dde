//! `kplace bisect-rate`: the highest input rate each placement sustains, found by real trials
//! (`kplace send` paced into `kplace run`, two processes, open loop), each judged by the gates
//! of `kplace_lab::rate`. The sweep itself is `kplace_lab::bisect`, which also checks its
//! options and resolves its shapes and workload; this module parses them, shows the sweep's
//! progress on a terminal and prints its table.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use kplace::model::shape::FrameShape;
use kplace::os::CpuSet;
use kplace_lab::bisect::{self, BisectConfig, Progress, RecordingFeed, Stop, Systems};
use kplace_lab::hog::CotenantSpec;
use kplace_lab::rate::{BudgetRule, GoalSpec, SearchConfig, TrialRequest};

use super::run::ModeArg;

/// Options of `kplace bisect-rate`.
#[derive(Debug, Args)]
pub struct BisectArgs {
    /// The graph: a file, or the name of one kplace ships.
    #[arg(long, default_value = "radar", value_name = "FILE|NAME")]
    graph: PathBuf,
    /// Placement files, directories whose every .yaml file is a placement, or names in the
    /// graph's `placements/`; comma separated.
    #[arg(long, value_delimiter = ',', default_value = "all-cpu")]
    placements: Vec<PathBuf>,
    /// Frame shapes, innermost axis first, comma separated: a sweep at each (the radar's
    /// `--cpi`) [default: the graph file's shape, or the recording's].
    #[arg(
        long,
        visible_alias = "cpi",
        value_delimiter = ',',
        value_name = "SHAPE"
    )]
    shape: Vec<FrameShape>,
    /// The workload options every run and sender is given: `--opt NAME=VALUE` (repeatable;
    /// `kplace workloads` lists them) and the flags that stand for them.
    #[command(flatten)]
    pub(crate) options: crate::workloads::OptionPairs,
    /// First rate tried, per second, from 1/86400 to 1e9 (default: the workload's real-time
    /// rate: the radar CPI's physical rate, or a recording's frames at its sample rate); no
    /// trial goes outside that range.
    #[arg(long)]
    start_rate: Option<f64>,
    /// The search goals (RFC 9971), the first the answer, as NAME:LOSS:EXCEED:TRIALS: a trial
    /// is high-loss when more than LOSS of its frames are lost, partial, unverified or over
    /// the latency budget; a rate meets the goal when high-loss trials take at most EXCEED of
    /// TRIALS full-length trials' time (decided only once no further trial could change it).
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(GoalSpec),
          default_value = "robust:0.01:0.5:5,strict:0:0:1")]
    goals: Vec<GoalSpec>,
    /// Every goal's relative width: a search ends when the lowest rate that fails a goal is
    /// within this fraction above the highest that meets it.
    #[arg(long, default_value_t = SearchConfig::DEFAULT_WIDTH)]
    width: f64,
    /// Searches per placement and CPI, to show the spread.
    #[arg(long, default_value_t = 1)]
    repeat: u32,
    /// Warm-up per trial, of stream (at least 10 frames).
    #[arg(long, value_name = "DURATION", default_value = "500ms", value_parser = crate::duration::or_s, alias = "warmup-s")]
    warmup: Duration,
    /// A full-length trial's measured window, of stream (at least 30 frames).
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = crate::duration::or_s, alias = "window-s")]
    window: Duration,
    /// The short trials' window (at least 30 frames), that brings each goal's search near
    /// its answer before the full-length ones (at most --window).
    #[arg(long, value_name = "DURATION", default_value = "500ms", value_parser = crate::duration::or_s, alias = "initial-window-s")]
    initial_window: Duration,
    /// The budget post-frame p99 must stay within: `deadline` (the CPI's physical duration, or
    /// one CPI period at the offered rate R when that is longer), `1/R` (one CPI period at R,
    /// the strict rule), or a duration such as `6.4ms`.
    #[arg(
        long,
        value_name = "BUDGET",
        default_value = "deadline",
        alias = "budget"
    )]
    latency_budget: BudgetRule,
    /// Trials per search at most.
    #[arg(long, default_value_t = SearchConfig::DEFAULT_MAX_TRIALS)]
    max_trials: usize,
    /// Where the JSON and CSV results and every trial's report go (made if missing)
    /// [default: $XDG_DATA_HOME/kplace/bisect-rate, else ~/.local/share/kplace/bisect-rate].
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// The seed of what the workload generates (the radar's noise).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Stream this recording of the graph's source (`kplace record`) in every trial instead
    /// of the radar scene: any graph, each trial gated on --check.
    #[arg(
        long,
        value_name = "FILE",
        requires = "check",
        conflicts_with = "sut_cmd"
    )]
    recording: Option<PathBuf>,
    /// With --recording, what every frame is checked against (`kplace run --check`):
    /// `reference:PLACEMENT` or `golden:DIR`.
    #[arg(long, value_name = "CHECK", requires = "recording")]
    check: Option<String>,
    /// The sender's pacing tick: it sleeps between wake-ups and sends what is due, leaving the
    /// cores to the system under test at the cost of packets up to about a tick late; `0s`
    /// spins to each packet's deadline (exact, but takes a core).
    #[arg(long, value_name = "DURATION", default_value = "50us", value_parser = crate::duration::or_us, alias = "sender-tick-us")]
    sender_tick: Duration,
    /// The sender's nice value: below 0 it is scheduled promptly when it wakes, so that a
    /// system under test that saturates the cores it shares with the sender makes it late
    /// less often, at the cost of preempting the system under test at every tick (needs
    /// CAP_SYS_NICE; without it the sender runs at its inherited value).
    #[arg(long, value_name = "N", default_value_t = 0, allow_negative_numbers = true,
          value_parser = clap::value_parser!(i32).range(-20..=19))]
    sender_nice: i32,
    /// A trial whose sender fell further behind its schedule than this, or was kept off the
    /// CPU longer, or reached less than 95% of the rate, did not offer the rate: it says
    /// nothing of the system and is retried.
    #[arg(long, value_name = "DURATION", default_value = "10ms", value_parser = crate::duration::or_ms, alias = "max-sender-lag-ms")]
    max_sender_lag: Duration,
    /// Trials in a row at one rate the sender may fail to offer before that rate is taken for
    /// the sender's limit here (the answer is then "at least" the rate below it).
    #[arg(long, value_name = "N", default_value_t = SearchConfig::DEFAULT_UNOFFERED_RETRIES)]
    unoffered_retries: u32,
    /// Exit with status 5 when a search's answer (its first goal's) is below this rate, per
    /// second, from 1/86400 to 1e9 (a performance gate for CI).
    #[arg(long, value_name = "RATE")]
    require_rate: Option<f64>,
    /// CPUs the sender runs on (a list like `0` or `0,2-3`; default: any). Keeping the load
    /// generator off the cores of the system under test stops it from measuring itself.
    #[arg(long, value_name = "CPUS")]
    sender_cpus: Option<CpuSet>,
    /// CPUs the system under test runs on (the `kplace run` receiver, or `--sut-cmd`), every
    /// thread of it unless it pins its own (a placement's `pin_cores` pin the workers).
    #[arg(long, value_name = "CPUS")]
    sut_cpus: Option<CpuSet>,
    /// Also measure, in the same run, the bounds the result is judged against: the receiver
    /// alone (ingest only, burst) and the kernels alone (one thread, no runtime).
    #[arg(long)]
    bounds: bool,
    /// Pipelines per trial: each gets its own sender at the trial's rate, and the trial passes
    /// only if every pipeline passes every gate; the result is the per-pipeline rate (the
    /// aggregate is N times it).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=64))]
    pipelines: u64,
    /// How the pipelines run: `thread` (one `kplace run` process, one CUDA context) or
    /// `process` (one process per pipeline).
    #[arg(long, value_enum, default_value = "thread")]
    pipeline_mode: ModeArg,
    /// Also search a system that switches between the placements given while the stream runs
    /// (`kplace run --adapt`, the first placement preferred, the others in the order given;
    /// one placement given: it, then the `alternatives:` its file lists), judged against each
    /// trial's latency budget; its trials alternate with the fixed placements'
    /// (docs/adapt.md).
    #[arg(long)]
    adapt: bool,
    /// A co-tenant beside every search: `none`, `gpu-hog` (an SGEMM loop on GPU 0, in its own
    /// process), `cpu-hog` (spinning threads) or `membw-hog` (threads streaming memory);
    /// started before each search, stopped after it, and its own report (intensity, achieved
    /// TFLOP/s or rate) recorded with the result.
    #[arg(long, default_value = "none")]
    cotenant: String,
    /// The co-tenant's intensity: the GPU hog's duty cycle in [0, 1], or the CPU hogs' share of
    /// the cores in (0, 1] (default 1).
    #[arg(long)]
    cotenant_intensity: Option<f64>,
    /// `on`: start a private MPS daemon before the sweep (stopped after it) and run every
    /// trial's receivers as its clients; a trial whose GPU pipeline is not really a client
    /// fails, since MPS falls back silently.
    #[arg(long, value_enum, default_value = "off")]
    mps: MpsMode,
    /// With `--mps on`: the daemon's default active-thread percentage.
    #[arg(long, value_name = "P")]
    mps_threads: Option<f64>,
    /// Measure another receiver instead of kplace: a shell command that listens on
    /// 127.0.0.1:{port}, takes {frames} frames of shape {shape} ({extent0} x {extent1} ...,
    /// innermost first; the radar also calls them {cpi}, {samples} x {chirps}), writes its
    /// results in the workload's format (the radar's detections) to {detections}, and exits.
    /// Placeholders are replaced (paths shell-quoted: leave them unquoted); kplace's sender,
    /// verifier and search judge it. If the command takes {times}, the SUT writes there `frame_id,done_ns`
    /// (CLOCK_MONOTONIC) per finished frame, and its post-frame latency is measured and gated
    /// like kplace's; otherwise latency is not judged.
    #[arg(long, value_name = "COMMAND")]
    sut_cmd: Option<String>,
    /// The name of `--sut-cmd`'s system in the table, the results file and the plots.
    #[arg(long, value_name = "NAME", default_value = "sut", requires = "sut_cmd")]
    sut_name: String,
}

/// Whether trials run under MPS.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum MpsMode {
    Off,
    On,
}

impl BisectArgs {
    /// The options of a sweep of `graph` (at `shape`, with the workload's `options`), every
    /// other option at its default but `--out`, `out`: what `kplace admit` takes, for a check
    /// that names no sweep.
    pub(crate) fn defaults(
        graph: &std::path::Path,
        shape: Option<&FrameShape>,
        options: &[(String, String)],
        out: &std::path::Path,
    ) -> anyhow::Result<BisectArgs> {
        let mut argv = vec![
            "--graph".to_string(),
            graph.display().to_string(),
            "--out".to_string(),
            out.display().to_string(),
        ];
        if let Some(shape) = shape {
            argv.extend(["--shape".into(), shape.to_string()]);
        }
        for (name, value) in options {
            argv.extend(["--opt".into(), format!("{name}={value}")]);
        }
        super::args::with_defaults(argv)
    }

    /// The sweep these options describe, checked ([`BisectConfig::check`]) and its shapes and
    /// workload resolved ([`BisectConfig::resolve_workload`]).
    pub(crate) fn config(self) -> anyhow::Result<BisectConfig> {
        let out = match self.out {
            Some(dir) => dir,
            None => default_out()?,
        };
        kplace::report::output::file_only(&out, "--out")?;
        let mps = BisectConfig::mps_setting(self.mps == MpsMode::On, self.mps_threads)?;
        let cotenant = CotenantSpec::parse(&self.cotenant, self.cotenant_intensity)
            .map_err(|e| anyhow::anyhow!("--cotenant: {e}"))?;
        let graph = super::args::graph_file(&self.graph)?;
        // A name the graph has a placement of is that placement, even where a folder of that
        // name is in the current directory (`python` in a checkout); other paths and
        // directories stay.
        let placements = self
            .placements
            .iter()
            .map(|p| match super::args::placement_file(p, &graph) {
                Ok(found) if found.is_file() => Ok(found),
                _ if p.exists() => Ok(p.clone()),
                other => other,
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let mut config = BisectConfig {
            graph,
            systems: match self.sut_cmd {
                Some(command) => Systems::Command {
                    command,
                    name: self.sut_name,
                },
                None => Systems::Placements(placements),
            },
            shapes: Vec::new(),
            workload: None,
            workload_options: self.options.0,
            start_rate: self.start_rate,
            start_rates: Default::default(),
            goals: self
                .goals
                .iter()
                .map(|g| {
                    g.goal(
                        self.window.as_secs_f64(),
                        self.initial_window.as_secs_f64(),
                        self.width,
                    )
                })
                .collect(),
            repeat: self.repeat,
            warmup_s: self.warmup.as_secs_f64(),
            latency_budget: self.latency_budget,
            max_trials: self.max_trials,
            out,
            seed: self.seed,
            recording: self.recording.map(|path| RecordingFeed {
                path,
                check: self.check.unwrap_or_default(),
            }),
            sender_tick_us: self.sender_tick.as_micros() as u64,
            sender_nice: self.sender_nice,
            max_sender_lag_ms: self.max_sender_lag.as_secs_f64() * 1e3,
            unoffered_retries: self.unoffered_retries,
            require_rate: self.require_rate,
            sender_cpus: self.sender_cpus,
            sut_cpus: self.sut_cpus,
            bounds: self.bounds,
            pipelines: self.pipelines,
            pipeline_mode: self.pipeline_mode.into(),
            adapt: self.adapt,
            cotenant,
            cotenant_intensity: self.cotenant_intensity,
            mps,
        };
        config.check()?;
        config.resolve_workload(&crate::workloads::registry(), &self.shape)?;
        Ok(config)
    }
}

/// Where results go without `--out`: `bisect-rate` under the user's data directory,
/// `$XDG_DATA_HOME` (when set to an absolute path, as the XDG base directory rules want), else
/// `$HOME/.local/share`; the same wherever kplace runs from, never the current directory.
pub(crate) fn default_out() -> anyhow::Result<PathBuf> {
    let absolute = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    let data = absolute("XDG_DATA_HOME")
        .or_else(|| absolute("HOME").map(|home| home.join(".local").join("share")))
        .context(
            "no --out given, and neither XDG_DATA_HOME nor HOME names a directory for the \
             results: give --out DIR",
        )?;
    Ok(data.join("kplace").join("bisect-rate"))
}

/// A search's progress as it goes. On a terminal: a spinner naming the trial running, and a
/// line per trial judged; the spinner is cleared when the searches finish, and when the sweep
/// ends without finishing them (a signal between trials, an error): dropping it clears it.
/// Elsewhere (a log, a CI job): no cursor codes, one plain `info` line per group of searches
/// begun and per trial judged, each led by the time since the sweep began, so a long sweep is
/// never silent.
pub(crate) struct Spinner {
    bar: std::sync::Mutex<Option<ProgressBar>>,
    /// Whether stderr is a terminal (the spinner), or not (plain lines).
    terminal: bool,
    /// When the sweep began.
    began: Instant,
}

impl Default for Spinner {
    fn default() -> Self {
        Spinner {
            bar: std::sync::Mutex::new(None),
            terminal: std::io::stderr().is_terminal(),
            began: Instant::now(),
        }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.searches_finished();
    }
}

impl Spinner {
    fn with(&self, f: impl FnOnce(&ProgressBar)) {
        if let Some(bar) = self.bar.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            f(bar);
        }
    }

    /// The time since the sweep began, as a plain line leads with it: `[  72.4 s]`.
    fn elapsed(&self) -> String {
        format!("[{:>7.1} s]", self.began.elapsed().as_secs_f64())
    }
}

impl Progress for Spinner {
    fn searches_started(&self, labels: &[String], cpi: &str) {
        if !self.terminal {
            tracing::info!(
                "bisect-rate: {} searching {} at {cpi}, trials alternating",
                self.elapsed(),
                labels.join(", ")
            );
            return;
        }
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} {prefix} {wide_msg} [{elapsed}]")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.set_prefix(format!("{} {cpi}", labels.join(" | ")));
        bar.enable_steady_tick(Duration::from_millis(200));
        *self.bar.lock().unwrap_or_else(|e| e.into_inner()) = Some(bar);
    }

    fn trial_started(&self, label: &str, index: usize, request: &TrialRequest, unit: &str) {
        self.with(|bar| {
            bar.set_message(format!(
                "{label} trial {index}: {:.1} {unit} for {} s ({})",
                request.load, request.duration_s, request.phase
            ))
        });
    }

    fn trial_judged(&self, line: &str) {
        if !self.terminal {
            tracing::info!("bisect-rate: {} {line}", self.elapsed());
            return;
        }
        self.with(|bar| bar.println(line));
    }

    fn searches_finished(&self) {
        if let Some(bar) = self.bar.lock().unwrap_or_else(|e| e.into_inner()).take() {
            bar.finish_and_clear();
        }
    }
}

/// Runs the sweep, prints the table; the exit status says what it found
/// (`kplace_lab::bisect::exit`).
pub fn main(args: BisectArgs) -> anyhow::Result<ExitCode> {
    // Stop between trials; end the running trial's processes now. The results so far are
    // written as usual.
    let stop = Stop::on_signal().context("cannot install the signal handler")?;
    let with_bounds = args.bounds;
    let require_rate = args.require_rate;
    let config = args.config()?;
    let exe = std::env::current_exe().context("cannot find the kplace executable")?;
    let sweep = bisect::run(&config, &exe, &stop, &Spinner::default())?;
    print!(
        "{}",
        bisect::output::table(&sweep.file, &sweep.rows, with_bounds)
    );
    tracing::info!(
        "bisect-rate: results in {}, {}/trials-*.csv and the plots {}",
        sweep.json.display(),
        config.out.display(),
        sweep
            .plots
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let (status, why) = bisect::exit::status(&sweep.file.searches, sweep.interrupted, require_rate);
    if let Some(why) = why {
        tracing::warn!("bisect-rate: {why}");
    }
    Ok(ExitCode::from(status))
}

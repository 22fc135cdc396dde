//! `kplace bisect-rate`: the highest input rate each placement sustains, found by real
//! trials: `kplace send` paces a stream into `kplace run` (two processes, open loop), and
//! each trial is judged by the gates of `kplace::rate` on the run's JSON report.
//!
//! This module runs the sweep (systems x CPI sizes x repeats, each a search); `trial` and
//! `sut` run one trial of kplace or of another receiver, `bounds` measures the bounds beside
//! each search, and `output` writes what the sweep found.

mod bounds;
mod output;
mod sut;
mod trial;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use super::plot::{self, PlotPoint, Series};
use super::radar;
use super::run::PipelineMode;
use bounds::{BracketedBounds, measure_bounds};
use kplace::affinity::CpuSet;
use kplace::graph::Graph;
use kplace::hog::{Cotenant, CotenantSpec};
use kplace::placement::Placement;
use kplace::plan::Plan;
use kplace::rate::{
    BudgetRule, Failure, Gates, LatencyBudget, Phase, SearchConfig, SearchError, TrialMeasurement,
    Verdict, search,
};
use kplace_radar::{Cpi, Scene, SceneConfig};
use output::{machine_facts, spreads, table_row, write_csv};
use serde_json::{Value, json};
use sut::sut_trial;
use trial::{representative, trial};

/// Options of `kplace bisect-rate`.
#[derive(Debug, Args)]
pub struct BisectArgs {
    /// The graph file.
    #[arg(long, default_value = "graphs/radar.yaml")]
    graph: PathBuf,
    /// Placement files, or directories whose every .yaml file is a placement; comma separated.
    #[arg(long, value_delimiter = ',', default_value = "placements/all-cpu.yaml")]
    placements: Vec<PathBuf>,
    /// CPI sizes, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "1024x128")]
    cpi: Vec<Cpi>,
    /// First rate tried, CPI/s (default: the physical CPI rate, one chirp every N/fs).
    #[arg(long)]
    start_rate: Option<f64>,
    /// Relative tolerance of the bisection.
    #[arg(long, default_value_t = SearchConfig::DEFAULT_TOLERANCE)]
    tolerance: f64,
    /// Consecutive passing trials that confirm the result (K of K).
    #[arg(long, default_value_t = SearchConfig::DEFAULT_CONFIRM)]
    confirm: u32,
    /// Searches per placement and CPI, to show the spread.
    #[arg(long, default_value_t = 1)]
    repeat: u32,
    /// Warm-up per trial, seconds of stream (at least 10 frames).
    #[arg(long, default_value_t = 0.5)]
    warmup_s: f64,
    /// Measured window per trial, seconds of stream (at least 30 frames).
    #[arg(long, default_value_t = 2.0)]
    window_s: f64,
    /// The budget post-CPI p99 must stay within: `deadline` (the CPI's physical duration, or
    /// one CPI period at the offered rate R when that is longer), `1/R` (one CPI period at R,
    /// the strict rule), or a duration such as `6.4ms`.
    #[arg(long, value_name = "BUDGET", default_value = "deadline")]
    latency_budget: BudgetRule,
    /// Trials per search at most.
    #[arg(long, default_value_t = 40)]
    max_trials: usize,
    /// Where the JSON and CSV results and every trial's report go.
    #[arg(long, default_value = "target/bisect-rate")]
    out: PathBuf,
    /// Noise seed of the scene.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The sender's pacing tick in microseconds: 0 spins to each chirp's deadline (exact, but
    /// takes a core); a tick sleeps between wake-ups and sends what is due, leaving the cores
    /// to the system under test at the cost of chirps up to about a tick late.
    #[arg(long, value_name = "US", default_value_t = 0)]
    sender_tick_us: u64,
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
    pipeline_mode: PipelineMode,
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
    /// 127.0.0.1:{port}, takes {frames} frames of CPI {cpi} ({samples} x {chirps}), writes its
    /// detections in kplace's detection format to {detections}, and exits. Placeholders are
    /// replaced; kplace's sender, verifier and search judge it. If the command takes {times},
    /// the SUT writes there `frame_id,done_ns` (CLOCK_MONOTONIC) per finished frame, and its
    /// post-CPI latency is measured and gated like kplace's; otherwise latency is not judged.
    #[arg(long, value_name = "COMMAND")]
    sut_cmd: Option<String>,
}

/// Whether trials run under MPS.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum MpsMode {
    Off,
    On,
}

/// A private MPS daemon for the sweep, stopped when dropped (also on errors and Ctrl-C).
struct MpsDaemon(kplace::mps::MpsDirs);

impl Drop for MpsDaemon {
    fn drop(&mut self) {
        if let Err(e) = kplace::mps::stop(&self.0) {
            eprintln!("bisect-rate: stopping the MPS daemon failed: {e}");
        }
    }
}

/// One trial as run: the search's record plus what was measured.
struct TrialRun {
    rate: f64,
    phase: Phase,
    verdict: Verdict,
    measurement: Option<TrialMeasurement>,
    report: Option<Value>,
}

/// Why a trial could not run at all (it stops the search).
#[derive(Debug, thiserror::Error)]
enum TrialError {
    #[error("interrupted")]
    Interrupted,
    #[error("{0}")]
    Spawn(String),
}

/// Child processes of the trial running now, killed on Ctrl-C.
#[derive(Clone, Default)]
struct Children(Arc<Mutex<Vec<u32>>>);

impl Children {
    fn add(&self, pid: u32) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(pid);
    }
    fn remove(&self, pid: u32) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|&p| p != pid);
    }
    fn kill_all(&self) {
        for &pid in self.0.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            // SAFETY: kill has no memory effects; a pid that already exited is harmless here
            // because it is removed from the list right after it is waited for.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
        }
    }
}

/// What is searched: a kplace placement, or another receiver's command.
enum System {
    Placement(PathBuf),
    Command(String),
}

impl System {
    fn name(&self) -> String {
        match self {
            System::Placement(path) => placement_name(path),
            System::Command(_) => "sut".to_string(),
        }
    }
}

/// Runs the sweep, prints the table, writes JSON and CSV. Exits 0 when at least one search
/// found a sustained rate, 1 (saying why) when none did (every system skipped, or no rate
/// passed), 130 when interrupted.
pub fn main(args: BisectArgs) -> anyhow::Result<ExitCode> {
    let stop = Arc::new(AtomicBool::new(false));
    let children = Children::default();
    {
        let (stop, children) = (Arc::clone(&stop), children.clone());
        // Stop between trials; end the running trial's processes now. The results so far are
        // written as usual.
        let _ = ctrlc::set_handler(move || {
            stop.store(true, Ordering::SeqCst);
            children.kill_all();
        });
    }
    for (option, cpus) in [
        ("--sender-cpus", &args.sender_cpus),
        ("--sut-cpus", &args.sut_cpus),
    ] {
        if let Some(cpus) = cpus {
            cpus.check_allowed()
                .map_err(|e| anyhow::anyhow!("{option} {cpus}: {e}"))?;
        }
    }
    let cotenant = CotenantSpec::parse(&args.cotenant, args.cotenant_intensity)
        .map_err(|e| anyhow::anyhow!("--cotenant: {e}"))?;
    if args.mps_threads.is_some() && args.mps == MpsMode::Off {
        bail!("--mps-threads needs --mps on");
    }
    let mps_daemon = match args.mps {
        MpsMode::Off => None,
        MpsMode::On => {
            let dirs = kplace::mps::MpsDirs::default_dirs();
            kplace::mps::start(&dirs, args.mps_threads)
                .map_err(|e| anyhow::anyhow!("--mps on: {e}"))?;
            eprintln!(
                "bisect-rate: MPS daemon started (pipe directory {})",
                dirs.pipe.display()
            );
            Some(MpsDaemon(dirs))
        }
    };
    if args.sut_cmd.is_some() && args.pipelines > 1 {
        bail!("--pipelines measures kplace's own pipelines; it cannot be combined with --sut-cmd");
    }
    let systems: Vec<System> = match &args.sut_cmd {
        Some(cmd) => vec![System::Command(cmd.clone())],
        None => placement_files(&args.placements)?
            .into_iter()
            .map(System::Placement)
            .collect(),
    };
    fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let exe = std::env::current_exe().context("cannot find the kplace executable")?;
    let ctx = Trials {
        exe: &exe,
        args: &args,
        children: &children,
        mps: mps_daemon.as_ref().map(|d| &d.0),
    };
    let mut rows = Vec::new();
    let mut results = Vec::new();
    let mut series = Vec::new();
    // What the exit status says: whether any search found a rate.
    let (mut skipped, mut searched, mut sustained) = (0usize, 0usize, 0usize);
    'sweep: for system in &systems {
        for &cpi in &args.cpi {
            let mut name = match args.pipelines {
                1 => system.name(),
                n => format!("{} x{n} {}", system.name(), mode_name(args.pipeline_mode)),
            };
            if let Some(spec) = &cotenant {
                name += &format!(" +{}", spec.kind());
            }
            if args.mps == MpsMode::On {
                name += " mps";
            }
            if let System::Placement(placement) = system
                && let Err(reason) = plan_for(&args.graph, placement, cpi)
            {
                eprintln!("bisect-rate: {name} at {cpi}: skipped: {reason:#}");
                results.push(json!({"system": name, "cpi": cpi.to_string(), "skipped": format!("{reason:#}")}));
                rows.push(format!(
                    "| {name} | {cpi} | skipped: {reason:#} | | | | | |"
                ));
                skipped += 1;
                continue;
            }
            for repeat in 0..args.repeat {
                // Bounds on both sides of each search: the machine's speed drifts over minutes,
                // and a ratio means something only against bounds from the same minutes.
                let before = args
                    .bounds
                    .then(|| measure_bounds(&ctx, system, cpi))
                    .transpose()?;
                let label = if args.repeat > 1 {
                    format!("{name} #{repeat}")
                } else {
                    name.clone()
                };
                let progress = ProgressBar::new_spinner();
                progress.set_style(
                    ProgressStyle::with_template("{spinner} {prefix} {wide_msg} [{elapsed}]")
                        .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                );
                progress.set_prefix(format!("{label} {cpi}"));
                progress.enable_steady_tick(Duration::from_millis(200));
                let mut runs: Vec<TrialRun> = Vec::new();
                let hog = match &cotenant {
                    Some(spec) => Some(Cotenant::start(spec).map_err(|e| {
                        anyhow::anyhow!("cannot start the co-tenant {}: {e}", spec.kind())
                    })?),
                    None => None,
                };
                let dir = args
                    .out
                    .join(format!("{}-{cpi}-{repeat}", name.replace(' ', "-")));
                let outcome = search(&search_config(&args, cpi), |rate, phase| {
                    if stop.load(Ordering::SeqCst) {
                        return Err(TrialError::Interrupted);
                    }
                    let index = runs.len();
                    progress.set_message(format!("trial {index}: {rate:.1} CPI/s ({phase})"));
                    let run = match system {
                        System::Placement(placement) => {
                            trial(&ctx, placement, cpi, rate, &dir, index)?
                        }
                        System::Command(cmd) => sut_trial(&ctx, cmd, cpi, rate, &dir, index)?,
                    };
                    // A trial cut short by Ctrl-C measured nothing: it is not a failure.
                    if stop.load(Ordering::SeqCst) {
                        return Err(TrialError::Interrupted);
                    }
                    progress.println(format!(
                        "{label} {cpi} trial {index}: {rate:.1} CPI/s ({phase}): {}",
                        run.verdict
                    ));
                    let verdict = run.verdict.clone();
                    runs.push(TrialRun { phase, ..run });
                    Ok(verdict)
                });
                progress.finish_and_clear();
                let cotenant_report = match hog {
                    Some(hog) => match hog.stop() {
                        Ok(report) => serde_json::to_value(&report)?,
                        Err(e) => json!({"error": e.to_string()}),
                    },
                    None => Value::Null,
                };
                let (result, interrupted) = match outcome {
                    Ok(result) => (result, false),
                    Err(SearchError::Trial { partial, cause }) => {
                        eprintln!("bisect-rate: search stopped: {cause}");
                        (*partial, true)
                    }
                    Err(SearchError::InvalidConfig(e)) => bail!("invalid search: {e}"),
                };
                searched += 1;
                if result.sustained.is_some() {
                    sustained += 1;
                }
                let after = (before.is_some() && !interrupted)
                    .then(|| measure_bounds(&ctx, system, cpi))
                    .transpose()?;
                let bounds = before.map(|before| BracketedBounds { before, after });
                let at_result = result.sustained.and_then(|r| {
                    runs.iter()
                        .rev()
                        .find(|t| t.rate == r && t.verdict.is_pass())
                        .and_then(|t| t.report.clone())
                });
                rows.push(table_row(
                    &label,
                    cpi,
                    result.sustained,
                    at_result.as_ref().map(representative),
                    bounds.as_ref().map(BracketedBounds::mean),
                    runs.len(),
                    &result.outcome.to_string(),
                ));
                results.push(json!({
                    "system": name,
                    "placement": match system { System::Placement(p) => Some(p.display().to_string()), System::Command(_) => None },
                    "sut_cmd": match system { System::Command(c) => Some(c.clone()), System::Placement(_) => None },
                    "cpi": cpi.to_string(),
                    "repeat": repeat,
                    "pipelines": args.pipelines,
                    "pipeline_mode": mode_name(args.pipeline_mode),
                    "sustained_cpi_per_s": result.sustained,
                    "aggregate_sustained_cpi_per_s": result.sustained.map(|r| r * args.pipelines as f64),
                    "cotenant": cotenant_report,
                    "highest_pass": result.highest_pass,
                    "lowest_fail": result.lowest_fail,
                    "outcome": result.outcome.to_string(),
                    "bounds": bounds.as_ref().map(|b| b.to_json(result.sustained)),
                    "trials": runs.iter().map(|t| json!({
                        "rate": t.rate,
                        "phase": t.phase.to_string(),
                        "passed": t.verdict.is_pass(),
                        "failures": t.verdict.failures.iter().map(Failure::to_string).collect::<Vec<_>>(),
                        "measurement": t.measurement,
                        "latency_measured": t.report.as_ref().is_some_and(|r| !r["latency"].is_null()),
                    })).collect::<Vec<_>>(),
                }));
                write_csv(&args.out, &name.replace(' ', "-"), cpi, repeat, &runs)?;
                series.push(Series {
                    label: format!("{label} {cpi}"),
                    points: runs
                        .iter()
                        .map(|t| PlotPoint {
                            rate: t.rate,
                            p99_ms: t
                                .report
                                .as_ref()
                                .map(representative)
                                .and_then(|r| r["latency"]["post_cpi"]["p99_ms"].as_f64()),
                            passed: t.verdict.is_pass(),
                        })
                        .collect(),
                    sustained: result.sustained,
                });
                if interrupted {
                    break 'sweep;
                }
            }
        }
    }
    let bounds_header = if args.bounds {
        " ingest-only CPI/s | kernel-only CPI/s | sustained / min(bounds) |"
    } else {
        ""
    };
    println!(
        "| system | CPI | sustained CPI/s | Gbit/s | post-CPI p50 ms | post-CPI p99.9 ms | cores used | trials, outcome |{bounds_header}"
    );
    println!(
        "|---|---|---|---|---|---|---|---|{}",
        if args.bounds { "---|---|---|" } else { "" }
    );
    for row in &rows {
        println!("{row}");
    }
    if args.repeat > 1 {
        println!();
        for line in spreads(&results) {
            println!("{line}");
        }
    }
    let svg_path = args.out.join("bisect-rate.svg");
    plot::write_svg(
        &svg_path,
        "post-CPI p99 latency against offered rate",
        &series,
    )?;
    let json_path = args.out.join("bisect-rate.json");
    let text = serde_json::to_string_pretty(
        &json!({"machine": machine_facts(), "settings": settings(&args), "results": results}),
    )?;
    fs::write(&json_path, text + "\n")
        .with_context(|| format!("cannot write {}", json_path.display()))?;
    eprintln!(
        "bisect-rate: results in {}, {} and {}/trials-*.csv",
        json_path.display(),
        svg_path.display(),
        args.out.display()
    );
    if stop.load(Ordering::SeqCst) {
        return Ok(ExitCode::from(130));
    }
    match no_rate_found(skipped, searched, sustained) {
        Some(why) => {
            eprintln!("bisect-rate: {why}");
            Ok(ExitCode::FAILURE)
        }
        None => Ok(ExitCode::SUCCESS),
    }
}

/// Why the sweep measured nothing (exit 1), or `None` when at least one search found a
/// sustained rate.
fn no_rate_found(skipped: usize, searched: usize, sustained: usize) -> Option<String> {
    if sustained > 0 {
        return None;
    }
    Some(match (searched, skipped) {
        (0, 0) => "nothing was searched".to_string(),
        (0, n) => format!(
            "no rate found: every system was skipped ({n} skipped, reasons above); nothing was searched"
        ),
        (n, 0) => format!("no rate found: none of the {n} searches sustained any rate tried"),
        (n, k) => format!(
            "no rate found: none of the {n} searches sustained any rate tried, and {k} systems were skipped"
        ),
    })
}

/// The options every result depends on, recorded beside the results.
fn settings(args: &BisectArgs) -> Value {
    json!({
        "warmup_s": args.warmup_s,
        "window_s": args.window_s,
        "tolerance": args.tolerance,
        "confirm": args.confirm,
        "latency_budget": args.latency_budget.to_string(),
        "sender_tick_us": args.sender_tick_us,
        "sender_cpus": args.sender_cpus.as_ref().map(ToString::to_string),
        "sut_cpus": args.sut_cpus.as_ref().map(ToString::to_string),
        "seed": args.seed,
        "pipelines": args.pipelines,
        "pipeline_mode": mode_name(args.pipeline_mode),
        "cotenant": args.cotenant,
        "cotenant_intensity": args.cotenant_intensity,
        "mps": args.mps == MpsMode::On,
        "mps_threads": args.mps_threads,
    })
}

fn mode_name(mode: PipelineMode) -> &'static str {
    match mode {
        PipelineMode::Thread => "thread",
        PipelineMode::Process => "process",
    }
}

/// What every trial needs from the sweep.
struct Trials<'a> {
    /// The MPS daemon whose clients the receivers must be, with `--mps on`.
    mps: Option<&'a kplace::mps::MpsDirs>,
    exe: &'a Path,
    args: &'a BisectArgs,
    children: &'a Children,
}

impl Trials<'_> {
    /// A command for the sender, confined to `--sender-cpus`.
    fn sender_command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        confined(program, self.args.sender_cpus.as_ref())
    }

    /// A command for the system under test, confined to `--sut-cpus`.
    fn sut_command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        confined(program, self.args.sut_cpus.as_ref())
    }

    /// `kplace run` receiving on an ephemeral loopback port (which it prints), ending 1 s
    /// after the last packet: the start of every kplace receiver a sweep runs.
    fn receiver_command(&self) -> Command {
        let mut command = self.sut_command(self.exe);
        command.args([
            "run",
            "--source",
            "udp://127.0.0.1:0",
            "--idle-timeout-s",
            "1",
            // The sender starts once the receiver is ready, after preparing its frames.
            "--start-timeout-s",
            "60",
        ]);
        command
    }
}

fn confined(program: impl AsRef<std::ffi::OsStr>, cpus: Option<&CpuSet>) -> Command {
    let mut command = Command::new(program);
    if let Some(cpus) = cpus {
        cpus.confine(&mut command);
    }
    command
}

fn search_config(args: &BisectArgs, cpi: Cpi) -> SearchConfig {
    let mut config = SearchConfig::new(args.start_rate.unwrap_or(1.0 / cpi.period_s()));
    config.tolerance = args.tolerance;
    config.confirm = args.confirm;
    config.max_trials = args.max_trials;
    config
}

/// The gates of every trial at `cpi`.
fn gates(args: &BisectArgs, cpi: Cpi) -> Gates {
    Gates::new(latency_budget(args, cpi))
}

/// The latency budget of every trial at `cpi`.
fn latency_budget(args: &BisectArgs, cpi: Cpi) -> LatencyBudget {
    args.latency_budget
        .at_cpi(Duration::from_secs_f64(cpi.period_s()))
}

/// Frames of a trial at `rate`: warm-up and measured window.
fn trial_frames(args: &BisectArgs, rate: f64) -> (u64, u64) {
    (
        ((rate * args.warmup_s).ceil() as u64).max(10),
        ((rate * args.window_s).ceil() as u64).max(30),
    )
}

/// What every trial does first: creates its directory `dir` and says how many frames it
/// sends at `rate`, as (warm-up, all).
fn begin_trial(args: &BisectArgs, dir: &Path, rate: f64) -> Result<(u64, u64), TrialError> {
    fs::create_dir_all(dir)
        .map_err(|e| TrialError::Spawn(format!("cannot create {}: {e}", dir.display())))?;
    let (warmup, measured) = trial_frames(args, rate);
    Ok((warmup, warmup + measured))
}

fn placement_files(paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut found: Vec<PathBuf> = fs::read_dir(path)
                .with_context(|| format!("cannot read {}", path.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
                .collect();
            found.sort();
            files.extend(found);
        } else {
            files.push(path.clone());
        }
    }
    if files.is_empty() {
        bail!(
            "no placement files in {}",
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(files)
}

fn placement_name(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// The plan of `placement` at `cpi`. Planned once before a system's searches, so that a
/// placement that cannot run (a GPU placement without a GPU) is reported as skipped with the
/// planner's reason instead of failing every trial.
fn plan_for(graph: &Path, placement: &Path, cpi: Cpi) -> anyhow::Result<Plan> {
    let overrides = radar::cpi_overrides(cpi, Vec::new());
    Ok(Plan::new(
        Graph::load(graph, &overrides)?,
        Placement::load(placement)?,
    )?)
}

/// The scene every trial sends: the default targets at `cpi`, with the sweep's seed.
fn scene(args: &BisectArgs, cpi: Cpi) -> anyhow::Result<Scene> {
    let mut config = SceneConfig::new(cpi);
    config.seed = args.seed;
    Ok(Scene::new(config)?)
}

fn failed(rate: f64, why: String) -> TrialRun {
    TrialRun {
        rate,
        phase: Phase::ProbeUp,
        verdict: Verdict::from_failures(vec![Failure::SystemFailed(why)]),
        measurement: None,
        report: None,
    }
}

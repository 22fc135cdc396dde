//! `kplace bisect-rate`: the highest input rate each placement sustains, found by real
//! trials: `kplace send` paces a stream into `kplace run` (two processes, open loop), and
//! each trial is judged by the gates of `kplace_lab::rate` on the run's JSON report.
//!
//! This module runs the sweep (systems x CPI sizes x repeats, each a search); `trial` and
//! `sut` run one trial of kplace or of another receiver, `bounds` measures the bounds beside
//! each search, and `output` writes what the sweep found.
//!
//! Long (936 lines of code, 85 of tests): the arguments, the sweep over systems and CPIs, and
//! the trial context they share; the trial runners, probe, bounds and output are already their
//! own modules.

mod bounds;
mod output;
mod probe;
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

use super::run::ModeArg;
use super::send::DEFAULT_PACING_TICK_US;
use bounds::{BracketedBounds, measure_bounds};
use kplace::model::graph::Graph;
use kplace::model::placement::Placement;
use kplace::os::CpuSet;
use kplace::plan::Plan;
use kplace::session::several::PipelineMode;
use kplace_lab::hog::{Cotenant, CotenantSpec};
use kplace_lab::rate::sweep::{
    ProbeEntry, SearchEntry, SenderEntry, StageTime, SweepFile, TrialEntry, TrialLatency,
    TrialStatus,
};
use kplace_lab::rate::{
    BudgetRule, Failure, Gates, Judgement, LatencyBudget, Phase, SearchConfig, SearchError,
    SteadyLimits, TrialMeasurement, Verdict, search,
};
use kplace_radar::{Cpi, Scene, SceneConfig};
use output::{machine_facts, spread_line, spreads, table_row, write_csv};
use probe::run_probe;
use serde_json::{Value, json};
use sut::sut_trial;
use trial::trial;

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
    /// The sender's pacing tick in microseconds: it sleeps between wake-ups and sends what is
    /// due, leaving the cores to the system under test at the cost of chirps up to about a
    /// tick late; 0 spins to each chirp's deadline (exact, but takes a core).
    #[arg(long, value_name = "US", default_value_t = DEFAULT_PACING_TICK_US)]
    sender_tick_us: u64,
    /// The sender's nice value: below 0 it is scheduled promptly when it wakes, so that a
    /// system under test that saturates the cores it shares with the sender makes it late
    /// less often, at the cost of preempting the system under test at every tick (needs
    /// CAP_SYS_NICE; without it the sender runs at its inherited value).
    #[arg(long, value_name = "N", default_value_t = 0, allow_negative_numbers = true,
          value_parser = clap::value_parser!(i32).range(-20..=19))]
    sender_nice: i32,
    /// A trial whose sender fell further behind its schedule than this many ms, or was kept off
    /// the CPU longer, is invalid (the load generator, not the system, decided it) and is
    /// retried.
    #[arg(long, value_name = "MS", default_value_t = 10.0)]
    max_sender_lag_ms: f64,
    /// Invalid trials retried in a row at one rate before the search ends as "unsteady
    /// machine".
    #[arg(long, value_name = "N", default_value_t = SearchConfig::DEFAULT_INVALID_RETRIES)]
    invalid_retries: u32,
    /// A failure more than this fraction below a rate that passed ((pass - fail) / fail) ends
    /// the search as "unsteady machine" instead of stepping down to a rate the machine's bad
    /// minutes chose.
    #[arg(long, value_name = "FRACTION", default_value_t = SearchConfig::DEFAULT_CONTRADICTION)]
    contradiction: f64,
    /// Do not recheck a failed probe or bisection trial at once at the same rate (by default a
    /// failure bounds the search only when its recheck fails too).
    #[arg(long)]
    no_recheck: bool,
    /// Exit with status 5 when a search's sustained rate is below this many CPI/s (a
    /// performance gate for CI).
    #[arg(long, value_name = "CPI_PER_S")]
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
    /// replaced (paths shell-quoted: leave them unquoted); kplace's sender, verifier and search
    /// judge it. If the command takes {times}, the SUT writes there `frame_id,done_ns`
    /// (CLOCK_MONOTONIC) per finished frame, and its post-CPI latency is measured and gated
    /// like kplace's; otherwise latency is not judged.
    #[arg(long, value_name = "COMMAND")]
    sut_cmd: Option<String>,
    /// The name of `--sut-cmd`'s system in the table, the results file and the plots.
    #[arg(long, value_name = "NAME", default_value = "sut", requires = "sut_cmd")]
    sut_name: String,
}

impl BisectArgs {
    /// Refuses options that cannot work together or have no meaning, naming the option.
    fn check(&self) -> anyhow::Result<()> {
        for (option, cpus) in [
            ("--sender-cpus", &self.sender_cpus),
            ("--sut-cpus", &self.sut_cpus),
        ] {
            if let Some(cpus) = cpus {
                cpus.check_allowed()
                    .map_err(|e| anyhow::anyhow!("{option} {cpus}: {e}"))?;
            }
        }
        if self.mps_threads.is_some() && self.mps == MpsMode::Off {
            bail!("--mps-threads needs --mps on");
        }
        if self.sut_cmd.is_some() && self.pipelines > 1 {
            bail!(
                "--pipelines measures kplace's own pipelines; it cannot be combined with --sut-cmd"
            );
        }
        if !(self.max_sender_lag_ms.is_finite() && self.max_sender_lag_ms > 0.0) {
            bail!(
                "--max-sender-lag-ms must be a positive number of ms, not {}",
                self.max_sender_lag_ms
            );
        }
        if !(self.contradiction.is_finite() && self.contradiction > 0.0) {
            bail!(
                "--contradiction must be a positive fraction, not {}",
                self.contradiction
            );
        }
        if let Some(rate) = self.require_rate
            && !(rate.is_finite() && rate > 0.0)
        {
            bail!("--require-rate must be a positive number of CPI/s, not {rate}");
        }
        Ok(())
    }
}

/// Whether trials run under MPS.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum MpsMode {
    Off,
    On,
}

/// A private MPS daemon for the sweep, stopped when dropped (also on errors and Ctrl-C).
struct MpsDaemon(kplace_lab::mps::MpsDirs);

impl Drop for MpsDaemon {
    fn drop(&mut self) {
        if let Err(e) = kplace_lab::mps::stop(&self.0) {
            tracing::warn!("bisect-rate: warning: stopping the MPS daemon failed: {e}");
        }
    }
}

/// One trial as run: the search's record plus what was measured.
struct TrialRun {
    rate: f64,
    phase: Phase,
    judgement: Judgement,
    measurement: Option<TrialMeasurement>,
    /// What the results file keeps of the trial's run report (or, for another receiver, of
    /// what was measured of it).
    figures: Option<TrialFigures>,
    /// Where that report is.
    report_path: Option<PathBuf>,
    /// The sender's account of its schedule.
    sender: Option<SenderEntry>,
}

/// A trial's latency, stage times and CPU use, as the results file keeps them.
#[derive(Clone, Debug, Default)]
struct TrialFigures {
    latency: Option<TrialLatency>,
    stages: Vec<StageTime>,
    cores_used: Option<f64>,
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
            // A pid is removed from the list right after it is waited for, so each is an
            // unreaped child; one that already exited is harmless.
            let _ = kplace::os::process::terminate(pid);
        }
    }
}

/// What is searched: a kplace placement, or another receiver's command and its name.
enum System {
    Placement(PathBuf),
    Command { command: String, name: String },
}

impl System {
    fn name(&self) -> String {
        match self {
            System::Placement(path) => placement_name(path),
            System::Command { name, .. } => name.clone(),
        }
    }
}

/// The exit statuses of `kplace bisect-rate` (docs/architecture.md). Besides these, 2 is an
/// error that stopped the sweep (a bad option or file, said on stderr). When several apply,
/// the first in this order wins: interrupted, below the required rate, unsteady, no rate,
/// some skipped.
pub mod exit {
    /// Every search measured a sustained rate (and met `--require-rate`).
    pub const MEASURED: u8 = 0;
    /// Some systems were skipped (they cannot run here); every search that ran measured a
    /// rate.
    pub const SOME_SKIPPED: u8 = 3;
    /// A search ended without a sustained rate (it fails everywhere, or hit the trial cap), or
    /// nothing was searched.
    pub const NO_RATE: u8 = 1;
    /// A search ended as "unsteady machine": the machine, not the system, decided it.
    pub const UNSTEADY: u8 = 4;
    /// A search measured a rate below `--require-rate`.
    pub const BELOW_REQUIRED: u8 = 5;
    /// Interrupted (Ctrl-C); what was found so far is written.
    pub const INTERRUPTED: u8 = 130;
}

/// Runs the sweep, prints the table, writes JSON, CSV and the plots; the exit status says
/// what it found ([`exit`]).
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
    args.check()?;
    let cotenant = CotenantSpec::parse(&args.cotenant, args.cotenant_intensity)
        .map_err(|e| anyhow::anyhow!("--cotenant: {e}"))?;
    let mps_daemon = match args.mps {
        MpsMode::Off => None,
        MpsMode::On => {
            let dirs = kplace_lab::mps::MpsDirs::default_dirs();
            kplace_lab::mps::start(&dirs, args.mps_threads)
                .map_err(|e| anyhow::anyhow!("--mps on: {e}"))?;
            tracing::info!(
                "bisect-rate: MPS daemon started (pipe directory {})",
                dirs.pipe.display()
            );
            Some(MpsDaemon(dirs))
        }
    };
    let systems: Vec<System> = match &args.sut_cmd {
        Some(cmd) => vec![System::Command {
            command: cmd.clone(),
            name: args.sut_name.clone(),
        }],
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
    let mut searches: Vec<SearchEntry> = Vec::new();
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
                tracing::warn!("bisect-rate: {name} at {cpi}: skipped: {reason:#}");
                rows.push(format!(
                    "| {name} | {cpi} | skipped: {reason:#} | | | | | | | |"
                ));
                let mut entry = search_entry(&args, system, &name, cpi, 0);
                entry.skipped = Some(format!("{reason:#}"));
                entry.outcome = "skipped".into();
                entry.outcome_kind = "skipped".into();
                searches.push(entry);
                continue;
            }
            for repeat in 0..args.repeat {
                let label = if args.repeat > 1 {
                    format!("{name} #{repeat}")
                } else {
                    name.clone()
                };
                let (entry, interrupted) = run_search(
                    &ctx,
                    system,
                    &name,
                    &label,
                    cpi,
                    repeat,
                    cotenant.as_ref(),
                    &stop,
                )?;
                rows.push(table_row(&label, cpi, &entry, args.bounds));
                searches.push(entry);
                if interrupted {
                    break 'sweep;
                }
            }
        }
    }
    let spreads = spreads(&searches);
    let file = SweepFile {
        schema: kplace_lab::rate::sweep::SCHEMA.to_string(),
        machine: machine_facts(),
        settings: settings(&args),
        searches,
        spreads,
    };
    print_table(&args, &rows, &file);
    let json_path = args.out.join("bisect-rate.json");
    let text = serde_json::to_string_pretty(&file)?;
    fs::write(&json_path, text + "\n")
        .with_context(|| format!("cannot write {}", json_path.display()))?;
    let plots = kplace_lab::plots::write_all(std::slice::from_ref(&file), &args.out)?;
    tracing::info!(
        "bisect-rate: results in {}, {}/trials-*.csv and the plots {}",
        json_path.display(),
        args.out.display(),
        plots
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let interrupted = stop.load(Ordering::SeqCst);
    let (status, why) = exit_status(&file.searches, interrupted, args.require_rate);
    if let Some(why) = why {
        tracing::warn!("bisect-rate: {why}");
    }
    Ok(ExitCode::from(status))
}

/// One search of `system` at `cpi`: the co-tenant and bounds around it, the steadiness
/// probes before, after and at every failure, and every trial; whether it was interrupted.
#[allow(clippy::too_many_arguments)]
fn run_search(
    ctx: &Trials<'_>,
    system: &System,
    name: &str,
    label: &str,
    cpi: Cpi,
    repeat: u32,
    cotenant: Option<&CotenantSpec>,
    stop: &AtomicBool,
) -> anyhow::Result<(SearchEntry, bool)> {
    let args = ctx.args;
    let mut entry = search_entry(args, system, name, cpi, repeat);
    let limits = SteadyLimits::default();
    // Bounds on both sides of each search: the machine's speed drifts over minutes, and a
    // ratio means something only against bounds from the same minutes.
    let before = args
        .bounds
        .then(|| measure_bounds(ctx, system, cpi))
        .transpose()?;
    let baseline = run_probe("before");
    let mut probes = vec![ProbeEntry {
        steadiness: baseline.judge(None, &limits),
        probe: baseline.clone(),
    }];
    let progress = ProgressBar::new_spinner();
    progress.set_style(
        ProgressStyle::with_template("{spinner} {prefix} {wide_msg} [{elapsed}]")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    progress.set_prefix(format!("{label} {cpi}"));
    progress.enable_steady_tick(Duration::from_millis(200));
    let mut runs: Vec<TrialRun> = Vec::new();
    let hog = match cotenant {
        Some(spec) => Some(
            Cotenant::start(spec)
                .map_err(|e| anyhow::anyhow!("cannot start the co-tenant {}: {e}", spec.kind()))?,
        ),
        None => None,
    };
    let dir = args
        .out
        .join(format!("{}-{cpi}-{repeat}", name.replace(' ', "-")));
    let outcome = search(&search_config(args, cpi), |rate, phase| {
        if stop.load(Ordering::SeqCst) {
            return Err(TrialError::Interrupted);
        }
        let index = runs.len();
        progress.set_message(format!("trial {index}: {rate:.1} CPI/s ({phase})"));
        let mut run = match system {
            System::Placement(placement) => trial(ctx, placement, cpi, rate, &dir, index)?,
            System::Command { command, .. } => sut_trial(ctx, command, cpi, rate, &dir, index)?,
        };
        // A trial cut short by Ctrl-C measured nothing: it is not a failure.
        if stop.load(Ordering::SeqCst) {
            return Err(TrialError::Interrupted);
        }
        // A failure on an unsteady machine says nothing about the system: retried.
        if run.judgement.failed() {
            let probe = run_probe(format!("after trial {index}"));
            let steadiness = probe.judge(Some(&baseline), &limits);
            if let (Some(why), Judgement::Verdict(verdict)) = (&steadiness.unsteady, &run.judgement)
            {
                run.judgement = Judgement::Invalid(format!(
                    "it failed ({verdict}) while the machine was unsteady: {why}"
                ));
            }
            probes.push(ProbeEntry { probe, steadiness });
        }
        progress.println(format!(
            "{label} {cpi} trial {index}: {rate:.1} CPI/s ({phase}): {}",
            run.judgement
        ));
        let judgement = run.judgement.clone();
        runs.push(TrialRun { phase, ..run });
        Ok(judgement)
    });
    progress.finish_and_clear();
    entry.cotenant = match hog {
        Some(hog) => Some(match hog.stop() {
            Ok(report) => serde_json::to_value(&report)?,
            Err(e) => json!({"error": e.to_string()}),
        }),
        None => None,
    };
    let (result, interrupted) = match outcome {
        Ok(result) => (result, false),
        Err(SearchError::Trial { partial, cause }) => {
            tracing::warn!("bisect-rate: search stopped: {cause}");
            (*partial, true)
        }
        Err(SearchError::InvalidConfig(e)) => bail!("invalid search: {e}"),
    };
    if !interrupted {
        let after = run_probe("after");
        probes.push(ProbeEntry {
            steadiness: after.judge(Some(&baseline), &limits),
            probe: after,
        });
    }
    let after = (before.is_some() && !interrupted)
        .then(|| measure_bounds(ctx, system, cpi))
        .transpose()?;
    let bounds = before.map(|before| BracketedBounds { before, after });
    entry.sustained_cpi_per_s = result.sustained;
    entry.aggregate_sustained_cpi_per_s = result.sustained.map(|r| r * args.pipelines as f64);
    entry.highest_pass = result.highest_pass;
    entry.lowest_fail = result.lowest_fail;
    entry.outcome = result.outcome.to_string();
    entry.outcome_kind = result.outcome.kind().to_string();
    entry.probes = probes;
    entry.bounds = bounds.as_ref().map(|b| b.to_json(result.sustained));
    entry.trials = runs
        .iter()
        .map(|t| trial_entry(t, &entry.latency_budget, &args.out))
        .collect();
    write_csv(&args.out, &name.replace(' ', "-"), cpi, repeat, &runs)?;
    Ok((entry, interrupted))
}

/// An entry for `system` at `cpi` with what is known before the search.
fn search_entry(
    args: &BisectArgs,
    system: &System,
    name: &str,
    cpi: Cpi,
    repeat: u32,
) -> SearchEntry {
    SearchEntry {
        system: name.to_string(),
        placement: match system {
            System::Placement(p) => Some(p.display().to_string()),
            System::Command { .. } => None,
        },
        sut_cmd: match system {
            System::Command { command, .. } => Some(command.clone()),
            System::Placement(_) => None,
        },
        cpi: cpi.to_string(),
        repeat,
        skipped: None,
        real_time_cpi_per_s: 1.0 / cpi.period_s(),
        latency_budget: latency_budget(args, cpi),
        start_rate: search_config(args, cpi).start_rate,
        pipelines: args.pipelines,
        pipeline_mode: mode_name(args.pipeline_mode).to_string(),
        sustained_cpi_per_s: None,
        aggregate_sustained_cpi_per_s: None,
        highest_pass: None,
        lowest_fail: None,
        outcome: String::new(),
        outcome_kind: String::new(),
        probes: Vec::new(),
        bounds: None,
        cotenant: None,
        trials: Vec::new(),
    }
}

/// What the results file keeps of one trial.
fn trial_entry(t: &TrialRun, budget: &LatencyBudget, out: &Path) -> TrialEntry {
    let figures = t.figures.clone().unwrap_or_default();
    TrialEntry {
        rate: t.rate,
        phase: t.phase.to_string(),
        status: match &t.judgement {
            Judgement::Invalid(_) => TrialStatus::Invalid,
            j if j.passed() => TrialStatus::Passed,
            _ => TrialStatus::Failed,
        },
        failures: t
            .judgement
            .verdict()
            .map(|v| v.failures.iter().map(Failure::to_string).collect())
            .unwrap_or_default(),
        invalid: t.judgement.invalid().map(str::to_string),
        budget_ms: budget.at(t.rate).as_secs_f64() * 1e3,
        measurement: t.measurement.clone(),
        latency: figures.latency,
        stages: figures.stages,
        cores_used: figures.cores_used,
        sender: t.sender.clone(),
        report: t
            .report_path
            .as_ref()
            .map(|p| p.strip_prefix(out).unwrap_or(p).display().to_string()),
    }
}

/// The table and, with repeats, the spreads.
fn print_table(args: &BisectArgs, rows: &[String], file: &SweepFile) {
    let bounds_header = if args.bounds {
        " ingest-only CPI/s | kernel-only CPI/s | sustained / min(bounds) |"
    } else {
        ""
    };
    println!(
        "| system | CPI | sustained CPI/s | bracket (pass, fail) CPI/s | latency budget | Gbit/s | post-CPI p50 ms | post-CPI p99.9 ms | cores used | trials, outcome |{bounds_header}"
    );
    println!(
        "|---|---|---|---|---|---|---|---|---|---|{}",
        if args.bounds { "---|---|---|" } else { "" }
    );
    for row in rows {
        println!("{row}");
    }
    if !file.spreads.is_empty() {
        println!();
        for spread in &file.spreads {
            println!("{}", spread_line(spread));
        }
    }
}

/// The exit status of a sweep and, when it is not 0, why ([`exit`]).
fn exit_status(
    searches: &[SearchEntry],
    interrupted: bool,
    require_rate: Option<f64>,
) -> (u8, Option<String>) {
    if interrupted {
        return (exit::INTERRUPTED, Some("interrupted".into()));
    }
    let ran: Vec<&SearchEntry> = searches.iter().filter(|s| s.skipped.is_none()).collect();
    let skipped = searches.len() - ran.len();
    let describe = |s: &SearchEntry| format!("{} at {} (repeat {})", s.system, s.cpi, s.repeat);
    if let Some(required) = require_rate {
        let below: Vec<String> = ran
            .iter()
            .filter_map(|s| {
                let rate = s.sustained_cpi_per_s?;
                (rate < required).then(|| format!("{} sustained {rate:.1} CPI/s", describe(s)))
            })
            .collect();
        if !below.is_empty() {
            return (
                exit::BELOW_REQUIRED,
                Some(format!(
                    "below the required {required} CPI/s: {}",
                    below.join("; ")
                )),
            );
        }
    }
    let unsteady: Vec<String> = ran
        .iter()
        .filter(|s| s.outcome_kind == "unsteady")
        .map(|s| format!("{}: {}", describe(s), s.outcome))
        .collect();
    if !unsteady.is_empty() {
        return (exit::UNSTEADY, Some(unsteady.join("; ")));
    }
    let no_rate: Vec<String> = ran
        .iter()
        .filter(|s| s.sustained_cpi_per_s.is_none())
        .map(|s| format!("{}: {}", describe(s), s.outcome))
        .collect();
    if ran.is_empty() {
        let why = match skipped {
            0 => "nothing was searched".to_string(),
            n => format!(
                "no rate found: every system was skipped ({n} skipped, reasons above); nothing was searched"
            ),
        };
        return (exit::NO_RATE, Some(why));
    }
    if !no_rate.is_empty() {
        return (
            exit::NO_RATE,
            Some(format!(
                "no rate found by {} of {} searches: {}",
                no_rate.len(),
                ran.len(),
                no_rate.join("; ")
            )),
        );
    }
    if skipped > 0 {
        return (
            exit::SOME_SKIPPED,
            Some(format!("{skipped} systems were skipped (reasons above)")),
        );
    }
    (exit::MEASURED, None)
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
        "sender_nice": args.sender_nice,
        "max_sender_lag_ms": args.max_sender_lag_ms,
        "invalid_retries": args.invalid_retries,
        "contradiction": args.contradiction,
        "recheck_failures": !args.no_recheck,
        "require_rate": args.require_rate,
        "steady_limits": SteadyLimits::default(),
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

fn mode_name(mode: ModeArg) -> &'static str {
    PipelineMode::from(mode).name()
}

/// What every trial needs from the sweep.
struct Trials<'a> {
    /// The MPS daemon whose clients the receivers must be, with `--mps on`.
    mps: Option<&'a kplace_lab::mps::MpsDirs>,
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
    config.invalid_retries = args.invalid_retries;
    config.contradiction = Some(args.contradiction);
    config.recheck_failures = !args.no_recheck;
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
    let overrides = kplace_radar::graph::cpi_overrides(cpi, Vec::new());
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
        judgement: Judgement::Verdict(Verdict::from_failures(vec![Failure::SystemFailed(why)])),
        measurement: None,
        figures: None,
        report_path: None,
        sender: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A search entry as the results file has it, with `outcome_kind` and a rate or none.
    fn entry(kind: &str, sustained: Option<f64>, skipped: bool) -> SearchEntry {
        let mut e: SearchEntry = serde_json::from_value(json!({
            "system": "all-cpu", "cpi": "1024x128", "repeat": 0,
            "real_time_cpi_per_s": 156.25,
            "latency_budget": {"rule": "deadline", "cpi_duration_ms": 6.4},
        }))
        .expect("the minimal entry parses");
        e.outcome_kind = kind.into();
        e.outcome = kind.replace('_', " ");
        e.sustained_cpi_per_s = sustained;
        e.skipped = skipped.then(|| "needs a GPU".to_string());
        e
    }

    #[test]
    fn exit_statuses_say_what_the_sweep_found_most_urgent_first() {
        let measured = entry("converged", Some(500.0), false);
        let skipped = entry("skipped", None, true);
        let no_rate = entry("fails_everywhere", None, false);
        let unsteady = entry("unsteady", None, false);
        let status = |s: &[SearchEntry], required| exit_status(s, false, required).0;

        assert_eq!(
            exit_status(std::slice::from_ref(&measured), false, None),
            (0, None)
        );
        assert_eq!(
            status(&[measured.clone(), skipped.clone()], None),
            exit::SOME_SKIPPED
        );
        assert_eq!(status(std::slice::from_ref(&skipped), None), exit::NO_RATE);
        assert_eq!(status(&[], None), exit::NO_RATE);
        assert_eq!(
            status(&[measured.clone(), no_rate.clone()], None),
            exit::NO_RATE
        );
        assert_eq!(
            status(&[no_rate.clone(), unsteady.clone(), skipped.clone()], None),
            exit::UNSTEADY
        );
        // --require-rate: a measured rate below it wins over everything but Ctrl-C.
        assert_eq!(
            status(std::slice::from_ref(&measured), Some(400.0)),
            exit::MEASURED
        );
        assert_eq!(
            status(std::slice::from_ref(&measured), Some(500.0)),
            exit::MEASURED
        );
        let (code, why) = exit_status(&[measured.clone(), unsteady.clone()], false, Some(600.0));
        assert_eq!(code, exit::BELOW_REQUIRED);
        assert_eq!(
            why.unwrap(),
            "below the required 600 CPI/s: all-cpu at 1024x128 (repeat 0) sustained 500.0 CPI/s"
        );
        assert_eq!(
            exit_status(&[measured], true, Some(600.0)).0,
            exit::INTERRUPTED
        );
        let (_, why) = exit_status(&[unsteady], false, None);
        assert!(
            why.unwrap()
                .contains("all-cpu at 1024x128 (repeat 0): unsteady")
        );
        let codes = [
            exit::MEASURED,
            exit::NO_RATE,
            exit::SOME_SKIPPED,
            exit::UNSTEADY,
            exit::BELOW_REQUIRED,
            exit::INTERRUPTED,
        ];
        let mut distinct = codes.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), codes.len(), "every status is its own");
        assert!(!codes.contains(&2), "2 is kplace's error status");
    }
}

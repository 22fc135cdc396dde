//! The sweep behind `kplace bisect-rate`: the highest input rate each system sustains, found by
//! real trials. For every system (a kplace placement, or another receiver's command), every
//! CPI and every repeat, a search of [`crate::rate`] asks for trials at chosen rates; each trial
//! runs `kplace send` pacing a stream into the system under test (two processes, open loop)
//! and is judged by the rate gates on what the system reported.
//!
//! This module runs the sweep and holds the context every trial shares. [`BisectConfig`] says
//! what the sweep is asked to do (`config`, with what follows from it per CPI); [`trial`] runs
//! one trial of kplace (`kplace run` on a placement), [`sut`] one of another receiver,
//! [`bounds`] measures the bounds beside each search, [`probe`] the machine's steadiness,
//! [`output`] the table rows, spreads and CSV files, and [`exit`] the sweep's exit status.
//!
//! # Guarantees
//! - A placement that cannot run here (a GPU placement without a GPU) is planned once and
//!   reported as skipped with the planner's reason; it never fails trials.
//! - Every child process a trial starts is known to the sweep's [`Stop`] until it is reaped:
//!   [`Stop::interrupt`] ends them all at once, and the sweep stops between trials with what
//!   it found so far written as usual.
//! - No trial waits without a bound: a receiver has 300 s to become ready, another receiver 10
//!   s to listen and 30 s to exit after its last packet.
//! - The co-tenant and the MPS daemon a sweep starts are stopped when it ends, on errors too.

pub mod bounds;
mod config;
pub mod exit;
pub mod output;
pub mod probe;
pub mod sut;
pub mod trial;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use kplace::model::graph::{Graph, Overrides};
use kplace::model::placement::Placement;
use kplace::os::CpuSet;
use kplace::plan::Plan;
use serde_json::{Value, json};

use crate::hog::Cotenant;
use crate::rate::sweep::{
    ProbeEntry, SearchEntry, SenderEntry, StageTime, SweepFile, TrialEntry, TrialLatency,
    TrialStatus,
};
use crate::rate::{
    Failure, Judgement, LatencyBudget, Probe, Search as Planner, Stage, SteadyLimits,
    TrialMeasurement, TrialOutcome, TrialRequest, Verdict,
};
use bounds::{BracketedBounds, measure_bounds};
pub use config::{BisectConfig, RecordingFeed, SearchShape, Systems};
use output::{machine_facts, spreads, table_row, write_csv};
use probe::run_probe;

/// Why a sweep could not run, or stopped.
#[derive(Debug, thiserror::Error)]
pub enum BisectError {
    /// No placement file was found where the sweep was told to look.
    #[error("no placement files in {0}")]
    NoPlacements(String),
    /// A placement path that names no file or directory.
    #[error("--placements {}: no such file or directory", .0.display())]
    MissingPlacement(PathBuf),
    /// A file or directory could not be read, created or written.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        /// `read`, `create` or `write`.
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
    /// The MPS daemon could not be started.
    #[error("--mps on: {0}")]
    Mps(#[from] crate::mps::MpsError),
    /// The co-tenant could not be started.
    #[error("cannot start the co-tenant {kind}: {why}")]
    Cotenant {
        /// Its kind.
        kind: &'static str,
        /// Why.
        why: String,
    },
    /// The search's settings are invalid.
    #[error("invalid search: {0}")]
    Search(String),
    /// A bound could not be measured.
    #[error("bounds at {shape}: {why}")]
    Bounds {
        /// The frame shape.
        shape: String,
        /// Why.
        why: String,
    },
    /// A trials CSV file could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Csv {
        /// The file.
        path: PathBuf,
        /// The writer's error.
        source: csv::Error,
    },
    /// The results could not be encoded.
    #[error("cannot encode the results: {0}")]
    Json(#[from] serde_json::Error),
    /// The plots could not be drawn.
    #[error(transparent)]
    Plot(#[from] crate::plots::PlotError),
}

/// How a sweep is stopped from outside: a flag the sweep reads between trials, and the child
/// processes of the trial running now, which [`Stop::interrupt`] ends at once.
#[derive(Clone, Debug, Default)]
pub struct Stop {
    flag: Arc<AtomicBool>,
    children: Arc<Mutex<Vec<u32>>>,
}

impl Stop {
    /// A stop that SIGINT, SIGTERM or SIGHUP triggers ([`kplace::interrupt`], the one stop
    /// mechanism of every command): the sweep ends after the trial running now, whose
    /// processes end at once, and its results so far are written as usual. Once per process.
    pub fn on_signal() -> std::io::Result<Stop> {
        let stop = Stop::default();
        kplace::interrupt::install()?;
        let watcher = stop.clone();
        kplace::interrupt::on_request(move |_| watcher.interrupt())?;
        Ok(stop)
    }

    /// Stops the sweep after the trial running now, and ends that trial's processes now (safe
    /// to call from a signal-handling thread).
    pub fn interrupt(&self) {
        self.flag.store(true, Ordering::SeqCst);
        for &pid in self
            .children
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            // A pid is removed from the list right after it is waited for, so each is an
            // unreaped child; one that already exited is harmless.
            let _ = kplace::os::process::terminate(pid);
        }
    }

    /// Whether the sweep was interrupted.
    pub fn interrupted(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    fn add(&self, pid: u32) {
        self.children
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(pid);
    }

    fn remove(&self, pid: u32) {
        self.children
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|&p| p != pid);
    }
}

/// What a sweep says while it runs: a terminal shows it as a spinner per group of searches, a
/// log or a test may ignore it. Every method has a default that does nothing.
pub trait Progress {
    /// Searches of `labels` at `shape` begin, their trials alternating.
    fn searches_started(&self, _labels: &[String], _cpi: &str) {}
    /// Trial `index` of the search `label` begins.
    fn trial_started(&self, _label: &str, _index: usize, _request: &TrialRequest, _unit: &str) {}
    /// A trial was judged; `line` says how.
    fn trial_judged(&self, _line: &str) {}
    /// The searches ended.
    fn searches_finished(&self) {}
}

/// A [`Progress`] that says nothing.
impl Progress for () {}

/// What a sweep found.
#[derive(Debug)]
pub struct Sweep {
    /// The results file, as written to `out/bisect-rate.json`.
    pub file: SweepFile,
    /// The table's rows, in the order searched ([`output::table`] adds the header).
    pub rows: Vec<String>,
    /// Where the results file is.
    pub json: PathBuf,
    /// The plots drawn beside it.
    pub plots: Vec<PathBuf>,
    /// Whether the sweep was interrupted.
    pub interrupted: bool,
}

/// Runs the sweep of `config` with the `kplace` executable `exe` (which every trial starts as
/// `kplace run` and `kplace send`), saying how it goes to `progress`: at every CPI, `repeat`
/// times, every system searched side by side (their trials alternate, so that the machine's
/// drift hits them alike), with the co-tenant and the MPS daemon around the trials. Writes the
/// results file, one CSV file per search and the plots into `config.out`.
pub fn run(
    config: &BisectConfig,
    exe: &Path,
    stop: &Stop,
    progress: &dyn Progress,
) -> Result<Sweep, BisectError> {
    let mps_daemon = match config.mps {
        None => None,
        Some(threads) => {
            let dirs = crate::mps::MpsDirs::default_dirs();
            crate::mps::start(&dirs, threads)?;
            tracing::info!(
                "bisect-rate: MPS daemon started (pipe directory {})",
                dirs.pipe.display()
            );
            Some(MpsDaemon(dirs))
        }
    };
    let systems: Vec<System> = match &config.systems {
        Systems::Command { command, name } => vec![System::Command {
            command: command.clone(),
            name: name.clone(),
        }],
        Systems::Placements(paths) => placement_files(paths)?
            .into_iter()
            .map(System::Placement)
            .collect(),
    };
    fs::create_dir_all(&config.out).map_err(|source| BisectError::Io {
        action: "create",
        path: config.out.clone(),
        source,
    })?;
    let ctx = Trials {
        exe,
        config,
        stop,
        mps: mps_daemon.as_ref().map(|d| &d.0),
    };
    let mut rows = Vec::new();
    let mut searches: Vec<SearchEntry> = Vec::new();
    let mut comparisons = Vec::new();
    'sweep: for shape in &config.shapes {
        let mut runnable = Vec::new();
        let (mut skipped, mut skipped_rows) = (Vec::new(), Vec::new());
        for system in &systems {
            let name = system_name(config, system);
            if let System::Placement(placement) = system
                && let Err(reason) = plan_for(config, placement, shape)
            {
                tracing::warn!("bisect-rate: {name} at {shape}: skipped: {reason}");
                let mut entry = search_entry(config, system, &name, shape, 0);
                entry.skipped = Some(reason);
                entry.outcome = "skipped".into();
                entry.outcome_kind = "skipped".into();
                skipped.push(entry);
                continue;
            }
            runnable.push((system, name));
        }
        // The systems searched first, then the skipped ones, each with its reason.
        for entry in &skipped {
            skipped_rows.push(format!(
                "| {} | {} | skipped: {} | | | | | | | | |",
                entry.system,
                entry.cpi,
                entry.skipped.as_deref().unwrap_or_default()
            ));
        }
        for repeat in 0..config.repeat {
            if runnable.is_empty() {
                break;
            }
            let group: Vec<Search> = runnable
                .iter()
                .map(|(system, name)| Search {
                    system,
                    name,
                    label: if config.repeat > 1 {
                        format!("{name} #{repeat}")
                    } else {
                        name.clone()
                    },
                    shape,
                    repeat,
                })
                .collect();
            let (entries, interrupted) = run_group(&ctx, &group, progress)?;
            for (search, entry) in group.iter().zip(&entries) {
                rows.push(table_row(&search.label, shape, entry, config.bounds));
            }
            comparisons.extend(output::comparisons(&entries));
            searches.extend(entries);
            if interrupted {
                searches.append(&mut skipped);
                rows.append(&mut skipped_rows);
                break 'sweep;
            }
        }
        searches.append(&mut skipped);
        rows.append(&mut skipped_rows);
    }
    let spreads = spreads(&searches);
    let file = SweepFile {
        schema: crate::rate::sweep::SCHEMA.to_string(),
        machine: machine_facts(),
        settings: config.settings(),
        searches,
        spreads,
        comparisons,
    };
    let json = config.out.join("bisect-rate.json");
    let text = serde_json::to_string_pretty(&file)?;
    fs::write(&json, text + "\n").map_err(|source| BisectError::Io {
        action: "write",
        path: json.clone(),
        source,
    })?;
    let plots = crate::plots::write_all(std::slice::from_ref(&file), &config.out)?;
    Ok(Sweep {
        file,
        rows,
        json,
        plots,
        interrupted: stop.interrupted(),
    })
}

/// A private MPS daemon for the sweep, stopped when dropped (also on errors and Ctrl-C).
struct MpsDaemon(crate::mps::MpsDirs);

impl Drop for MpsDaemon {
    fn drop(&mut self) {
        if let Err(e) = crate::mps::stop(&self.0) {
            tracing::warn!("bisect-rate: warning: stopping the MPS daemon failed: {e}");
        }
    }
}

/// One trial as run: what the search asked, the gates' judgement, and what was measured.
pub(crate) struct TrialRun {
    rate: f64,
    request: Option<TrialRequest>,
    judgement: Judgement,
    /// The measured window's duration, s of stream.
    duration_s: f64,
    /// The fraction of frames lost, as the goals count them (`None` when invalid).
    loss_ratio: Option<f64>,
    measurement: Option<TrialMeasurement>,
    /// What the results file keeps of the trial's run report (or, for another receiver, of
    /// what was measured of it).
    figures: Option<TrialFigures>,
    /// Where that report is.
    report_path: Option<PathBuf>,
    /// The sender's account of its schedule.
    sender: Option<SenderEntry>,
}

impl TrialRun {
    /// What the search counts of this trial.
    fn outcome(&self) -> TrialOutcome {
        match (&self.judgement, self.loss_ratio) {
            (Judgement::Invalid(why), _) => TrialOutcome::Unoffered(why.clone()),
            (Judgement::Verdict(_), loss) => TrialOutcome::Measured {
                duration_s: self.duration_s,
                loss_ratio: loss.unwrap_or(1.0),
            },
        }
    }
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
    #[error("{0}")]
    Spawn(String),
}

/// One system searched: a kplace placement, or another receiver's command and its name.
enum System {
    Placement(PathBuf),
    Command { command: String, name: String },
}

impl System {
    /// The placement file, for kplace.
    fn placement(&self) -> Option<&PathBuf> {
        match self {
            Self::Placement(path) => Some(path),
            Self::Command { .. } => None,
        }
    }
}

/// The name of `system` in the table: the placement's file stem or the command's name, with
/// the pipelines, co-tenant and MPS the sweep adds.
fn system_name(config: &BisectConfig, system: &System) -> String {
    let mut name = match system {
        System::Placement(path) => placement_name(path),
        System::Command { name, .. } => name.clone(),
    };
    if config.pipelines > 1 {
        name = format!("{name} x{} {}", config.pipelines, config.pipeline_mode);
    }
    if let Some(spec) = &config.cotenant {
        name += &format!(" +{}", spec.kind());
    }
    if config.mps.is_some() {
        name += " mps";
    }
    name
}

/// One search: which system, under which name and label, at which frame shape, which repeat.
struct Search<'a> {
    system: &'a System,
    name: &'a str,
    label: String,
    shape: &'a SearchShape,
    repeat: u32,
}

/// One search as it runs: its planner, its trials and the probes beside them.
struct Running<'a> {
    search: &'a Search<'a>,
    planner: Planner,
    runs: Vec<TrialRun>,
    probes: Vec<ProbeEntry>,
    dir: PathBuf,
    before: Option<bounds::Bounds>,
    started: Instant,
}

/// What one step of a search did.
enum Step {
    /// It ran a trial.
    Ran,
    /// It needs no more trials: every goal is answered.
    Answered,
    /// The sweep was interrupted, or a trial could not be started.
    Stopped,
}

impl<'a> Running<'a> {
    /// Starts `s`: the bounds before it (with `--bounds`: the machine's speed drifts over
    /// minutes, and a ratio means something only against bounds from the same minutes), its
    /// planner and the directory of its trials.
    fn start(ctx: &Trials<'_>, s: &'a Search<'a>) -> Result<Self, BisectError> {
        let config = ctx.config;
        let before = config
            .bounds
            .then(|| measure_bounds(ctx, s.system, s.shape))
            .transpose()?;
        let planner = Planner::new(config.search_config(s.shape, s.system.placement()))
            .map_err(|e| BisectError::Search(e.to_string()))?;
        Ok(Self {
            search: s,
            planner,
            runs: Vec::new(),
            probes: Vec::new(),
            dir: config.out.join(format!(
                "{}-{}-{}",
                s.name.replace(' ', "-"),
                config.shape_label(s.shape),
                s.repeat
            )),
            before,
            started: Instant::now(),
        })
    }

    /// Keeps `probe`, judged against `baseline`.
    fn keep_probe(&mut self, probe: Probe, baseline: Option<&Probe>) {
        self.probes.push(ProbeEntry {
            steadiness: probe.judge(baseline, &SteadyLimits::default()),
            probe,
        });
    }

    /// Runs the trial the planner asks for next and records what it measured; a failed
    /// trial's machine is probed (evidence beside it, never a verdict).
    fn step(&mut self, ctx: &Trials<'_>, baseline: &Probe, progress: &dyn Progress) -> Step {
        let Some(request) = self.planner.next() else {
            return Step::Answered;
        };
        if ctx.stop.interrupted() {
            return Step::Stopped;
        }
        let (s, index, config) = (self.search, self.runs.len(), ctx.config);
        progress.trial_started(&s.label, index, &request, config.unit());
        let trial = match s.system {
            System::Placement(placement) => {
                trial::trial(ctx, placement, s.shape, &request, &self.dir, index)
            }
            System::Command { command, .. } => {
                sut::sut_trial(ctx, command, s.shape, &request, &self.dir, index)
            }
        };
        let run = match trial {
            Ok(run) => run,
            Err(TrialError::Spawn(why)) => {
                tracing::warn!("bisect-rate: search stopped: {why}");
                return Step::Stopped;
            }
        };
        // A trial cut short by Ctrl-C measured nothing: it is not a failure.
        if ctx.stop.interrupted() {
            return Step::Stopped;
        }
        if run.judgement.failed() {
            self.keep_probe(run_probe(format!("after trial {index}")), Some(baseline));
        }
        progress.trial_judged(&trial_line(config, s, index, &request, &run));
        self.planner.record(request, run.outcome());
        self.runs.push(TrialRun {
            request: Some(request),
            ..run
        });
        Step::Ran
    }

    /// The search's entry, its CSV written: what the planner established, the bounds after
    /// it (unless interrupted), the co-tenant's report and every trial.
    fn finish(
        mut self,
        ctx: &Trials<'_>,
        cotenant: Option<Value>,
        interrupted: bool,
    ) -> Result<SearchEntry, BisectError> {
        let (config, s, unit) = (ctx.config, self.search, ctx.config.unit());
        if interrupted {
            self.planner.interrupt();
        }
        let after = (self.before.is_some() && !interrupted)
            .then(|| measure_bounds(ctx, s.system, s.shape))
            .transpose()?;
        let result = self.planner.result();
        let answer = result.goals.first();
        let sustained = answer.and_then(|g| g.lower);
        let bounds = self.before.map(|before| BracketedBounds { before, after });
        let mut entry = search_entry(config, s.system, s.name, s.shape, s.repeat);
        entry.cotenant = cotenant;
        entry.sustained_rate = sustained;
        entry.aggregate_sustained_rate = sustained.map(|r| r * config.pipelines as f64);
        entry.outcome = answer.map_or_else(String::new, |g| g.describe(unit));
        entry.outcome_kind = answer.map_or("", |g| g.ending.kind()).to_string();
        entry.probes = self.probes;
        entry.bounds = bounds.as_ref().map(|b| b.to_json(sustained));
        entry.trial_seconds = result.trial_seconds;
        entry.wall_seconds = self.started.elapsed().as_secs_f64();
        entry.sender_ceiling = result.sender_ceiling;
        entry.loads = result.loads;
        entry.goals = result.goals;
        entry.trials = self
            .runs
            .iter()
            .map(|t| trial_entry(t, config, &entry.latency_budget, &config.out))
            .collect();
        write_csv(
            &config.out,
            &s.name.replace(' ', "-"),
            &config.shape_label(s.shape),
            s.repeat,
            &self.runs,
            config,
        )?;
        Ok(entry)
    }
}

/// The line a judged trial prints: the search, the trial, what was asked and measured, and
/// the gates' verdict.
fn trial_line(
    config: &BisectConfig,
    s: &Search<'_>,
    index: usize,
    request: &TrialRequest,
    run: &TrialRun,
) -> String {
    let loss = run
        .loss_ratio
        .map_or_else(String::new, |l| format!(", {:.3}% lost", l * 100.0));
    format!(
        "{} {} trial {index}: {:.1} {} for {:.2} s ({} {}, {}){loss}: {}",
        s.label,
        config.shape_label(s.shape),
        request.load,
        config.unit(),
        run.duration_s,
        config.search_goals()[request.goal].name,
        request.phase,
        match request.stage {
            Stage::Coarse => "short",
            Stage::Final => "full",
        },
        run.judgement
    )
}

/// A group of searches at one CPI, side by side: the bounds and probes before, the co-tenant
/// around them, their trials alternating one by one until every search is answered, then the
/// probes and bounds after; an entry per search, and whether the sweep was interrupted.
fn run_group(
    ctx: &Trials<'_>,
    group: &[Search<'_>],
    progress: &dyn Progress,
) -> Result<(Vec<SearchEntry>, bool), BisectError> {
    let config = ctx.config;
    let mut running = group
        .iter()
        .map(|s| Running::start(ctx, s))
        .collect::<Result<Vec<_>, _>>()?;
    let baseline = run_probe("before");
    for r in &mut running {
        r.keep_probe(baseline.clone(), None);
    }
    let labels: Vec<String> = group.iter().map(|s| s.label.clone()).collect();
    progress.searches_started(&labels, &config.shape_label(group[0].shape));
    let hog = match &config.cotenant {
        Some(spec) => Some(Cotenant::start(spec).map_err(|e| BisectError::Cotenant {
            kind: spec.kind(),
            why: e.to_string(),
        })?),
        None => None,
    };
    // One trial of each search still asking for one, in turn, until none asks.
    let mut interrupted = false;
    'trials: loop {
        let mut ran = false;
        for r in &mut running {
            match r.step(ctx, &baseline, progress) {
                Step::Ran => ran = true,
                Step::Answered => {}
                Step::Stopped => {
                    interrupted = true;
                    break 'trials;
                }
            }
        }
        if !ran {
            break;
        }
    }
    progress.searches_finished();
    let cotenant = match hog {
        Some(hog) => Some(match hog.stop() {
            Ok(report) => serde_json::to_value(&report)?,
            Err(e) => json!({"error": e.to_string()}),
        }),
        None => None,
    };
    if !interrupted {
        let after = run_probe("after");
        for r in &mut running {
            r.keep_probe(after.clone(), Some(&baseline));
        }
    }
    let entries = running
        .into_iter()
        .map(|r| r.finish(ctx, cotenant.clone(), interrupted))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((entries, interrupted))
}

/// An entry for `system` at `shape` with what is known before the search.
fn search_entry(
    config: &BisectConfig,
    system: &System,
    name: &str,
    shape: &SearchShape,
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
        cpi: config.shape_label(shape),
        repeat,
        skipped: None,
        unit: config.unit().to_string(),
        real_time_rate: 1.0 / config.frame_period(shape).as_secs_f64(),
        latency_budget: config.latency_budget(shape),
        start_rate: config.search_config(shape, system.placement()).start_load,
        pipelines: config.pipelines,
        pipeline_mode: config.pipeline_mode.name().to_string(),
        sustained_rate: None,
        aggregate_sustained_rate: None,
        outcome: String::new(),
        outcome_kind: String::new(),
        goals: Vec::new(),
        loads: Vec::new(),
        trial_seconds: 0.0,
        wall_seconds: 0.0,
        sender_ceiling: None,
        probes: Vec::new(),
        bounds: None,
        cotenant: None,
        trials: Vec::new(),
    }
}

/// What the results file keeps of one trial.
fn trial_entry(
    t: &TrialRun,
    config: &BisectConfig,
    budget: &LatencyBudget,
    out: &Path,
) -> TrialEntry {
    let figures = t.figures.clone().unwrap_or_default();
    let goals = config.search_goals();
    TrialEntry {
        rate: t.rate,
        phase: t.request.map_or_else(String::new, |r| r.phase.to_string()),
        goal: t
            .request
            .and_then(|r| goals.get(r.goal))
            .map_or_else(String::new, |g| g.name.clone()),
        stage: t.request.map_or(Stage::Final, |r| r.stage),
        duration_s: t.duration_s,
        loss_ratio: t.loss_ratio,
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

/// What every trial needs from the sweep.
struct Trials<'a> {
    /// The MPS daemon whose clients the receivers must be, with MPS on.
    mps: Option<&'a crate::mps::MpsDirs>,
    exe: &'a Path,
    config: &'a BisectConfig,
    stop: &'a Stop,
}

impl Trials<'_> {
    /// A command for the sender, confined to the sender's CPUs.
    fn sender_command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        confined(program, self.config.sender_cpus.as_ref())
    }

    /// A command for the system under test, confined to its CPUs.
    fn sut_command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        confined(program, self.config.sut_cpus.as_ref())
    }

    /// `kplace run` receiving on an ephemeral loopback port (which its ready file tells),
    /// ending 1 s after the last packet: the start of every kplace receiver a sweep runs.
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

    /// What every trial does first: creates its directory `dir` and says how many frames it
    /// sends for `request`, as (warm-up, all), and how long its measured window lasts, s of
    /// stream (at least the duration asked).
    fn begin_trial(
        &self,
        dir: &Path,
        request: &TrialRequest,
    ) -> Result<(u64, u64, f64), TrialError> {
        fs::create_dir_all(dir)
            .map_err(|e| TrialError::Spawn(format!("cannot create {}: {e}", dir.display())))?;
        let (warmup, measured) = self.config.trial_frames(request.load, request.duration_s);
        Ok((warmup, warmup + measured, measured as f64 / request.load))
    }
}

fn confined(program: impl AsRef<std::ffi::OsStr>, cpus: Option<&CpuSet>) -> Command {
    let mut command = Command::new(program);
    if let Some(cpus) = cpus {
        cpus.confine(&mut command);
    }
    command
}

fn placement_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, BisectError> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut found: Vec<PathBuf> = fs::read_dir(path)
                .map_err(|source| BisectError::Io {
                    action: "read",
                    path: path.clone(),
                    source,
                })?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
                .collect();
            found.sort();
            files.extend(found);
        } else if path.exists() {
            files.push(path.clone());
        } else {
            return Err(BisectError::MissingPlacement(path.clone()));
        }
    }
    if files.is_empty() {
        return Err(BisectError::NoPlacements(
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        ));
    }
    Ok(files)
}

fn placement_name(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// The plan of `placement` at `shape`, or why there is none (the error with its causes).
/// Planned once before a system's searches, so that a placement that cannot run (a GPU
/// placement without a GPU) is reported as skipped with the planner's reason instead of
/// failing every trial.
fn plan_for(config: &BisectConfig, placement: &Path, shape: &SearchShape) -> Result<Plan, String> {
    let overrides = Overrides {
        dims: config.dims(shape)?,
        params: Vec::new(),
    };
    let graph = Graph::load(&config.graph, &overrides).map_err(|e| with_causes(&e))?;
    let placement = Placement::load(placement).map_err(|e| with_causes(&e))?;
    Plan::new(graph, placement).map_err(|e| with_causes(&e))
}

/// An error and its causes, joined by `: `.
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        text = format!("{text}: {e}");
        cause = e.source();
    }
    text
}

fn failed(rate: f64, duration_s: f64, why: String) -> TrialRun {
    TrialRun {
        rate,
        request: None,
        judgement: Judgement::Verdict(Verdict::from_failures(vec![Failure::SystemFailed(why)])),
        duration_s,
        loss_ratio: Some(1.0),
        measurement: None,
        figures: None,
        report_path: None,
        sender: None,
    }
}

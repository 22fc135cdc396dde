//! The sweep behind `kplace bisect-rate`: the highest input rate each system sustains, found by
//! real trials. For every system (a kplace placement, or another receiver's command), every
//! frame shape and every repeat, a search of [`crate::rate`] asks for trials at chosen rates; each trial
//! runs `kplace send` pacing a stream into the system under test (two processes, open loop)
//! and is judged by the rate gates on what the system reported.
//!
//! This module runs the sweep and holds the context every trial shares. [`BisectConfig`] says
//! what the sweep is asked to do (`config`, with what follows from it per frame shape;
//! `options` checks it and resolves its workload, [`shapes`] the frame shapes it runs at); `systems`
//! sets up the systems searched and their names; `search` runs a group of searches side by
//! side, one trial of each in turn; [`trial`] runs one trial of kplace (`kplace run` on a
//! placement), [`sut`] one of another receiver, [`bounds`] measures the bounds beside each
//! search, [`probe`] the machine's steadiness; `entries` is what the results file keeps of a
//! search and a trial, [`output`] the table rows, spreads and CSV files, and [`exit`] the
//! sweep's exit status.
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
mod entries;
pub mod exit;
mod failure;
mod options;
pub mod output;
pub mod probe;
mod search;
pub mod shapes;
pub mod sut;
mod systems;
pub mod trial;

use std::fs;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kplace::os::CpuSet;
use kplace::session::child::{self, RunChild, SendChild};

use crate::rate::sweep::{SearchEntry, SenderEntry, StageTime, SweepFile, TrialLatency};
use crate::rate::{Failure, Judgement, TrialMeasurement, TrialOutcome, TrialRequest, Verdict};
pub use config::{BisectConfig, RecordingFeed, SearchShape, Systems};
use entries::search_entry;
pub use options::{OptionError, sweep_defaults};
use output::{machine_facts, spreads, table_row};
use search::{Search, run_group};
use systems::{System, plan_for, system_name};

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
    #[error("cannot {action} {}: {error}", path.display())]
    Io {
        /// `read`, `create` or `write`.
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// The system's error, in the message (so not the error's source as well).
        error: std::io::Error,
    },
    /// A file could not be written where it was asked for (see [`kplace::os::write`]).
    #[error(transparent)]
    Place(#[from] kplace::os::write::WriteError),
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
    /// A placement file could not be read, or lists an alternative that cannot be found.
    #[error("{0}")]
    Placement(String),
    /// A bound could not be measured.
    #[error("bounds at {shape}: {why}")]
    Bounds {
        /// The frame shape.
        shape: String,
        /// Why.
        why: String,
    },
    /// A trials CSV file could not be written.
    #[error("cannot write {}: {error}", path.display())]
    Csv {
        /// The file.
        path: PathBuf,
        /// The writer's error, in the message.
        error: csv::Error,
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
/// `kplace run` and `kplace send`), saying how it goes to `progress`: at every frame shape, `repeat`
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
    let systems = System::all(config)?;
    kplace::os::write::create_dir_all(&config.out)?;
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
            if let Some(reason) = system
                .placements()
                .iter()
                .find_map(|placement| plan_for(config, placement, shape).err())
            {
                tracing::warn!("bisect-rate: {name} at {shape}: skipped: {reason}");
                let mut entry = search_entry(config, system, &name, shape, 0);
                entry.skipped = Some(reason.to_string());
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
                entry.shape,
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
    kplace::os::write::write_whole(
        &json,
        kplace::os::write::Kind::File,
        (text + "\n").as_bytes(),
    )?;
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

    /// `kplace run` of the sweep's graph receiving on an ephemeral loopback port (which its
    /// ready file tells), ending 1 s after the last packet: the start of every kplace receiver
    /// a sweep runs.
    fn receiver(&self) -> RunChild {
        let mut run = RunChild::new(
            self.config.graph.clone(),
            SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        );
        run.idle_timeout = Some(Duration::from_secs(1));
        // The sender starts once the receiver is ready, after preparing its frames.
        run.start_timeout = Some(Duration::from_secs(60));
        run
    }

    /// The command that runs `spec`, confined to the SUT's CPUs.
    fn receiver_command(&self, spec: &RunChild) -> Result<Command, TrialError> {
        let mut command = self.sut_command(self.exe);
        command.args(child::args(spec).map_err(|e| TrialError::Spawn(e.to_string()))?);
        Ok(command)
    }

    /// The command that runs `spec`, confined to the sender's CPUs.
    fn sender_child(&self, spec: &SendChild) -> Result<Command, TrialError> {
        let mut command = self.sender_command(self.exe);
        command.args(child::args(spec).map_err(|e| TrialError::Spawn(e.to_string()))?);
        Ok(command)
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

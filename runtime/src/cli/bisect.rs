//! `kplace bisect-rate`: the highest input rate each placement sustains, found by real
//! trials: `kplace send` paces a stream into `kplace run` (two processes, open loop), and
//! each trial is judged by the gates of `kplace::rate` on the run's JSON report.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use super::plot::{self, PlotPoint, Series};
use super::radar;
use super::run::PipelineMode;
use kplace::bounds;
use kplace::graph::Graph;
use kplace::hog::{Cotenant, CotenantSpec};
use kplace::placement::Placement;
use kplace::plan::Plan;
use kplace::rate::{
    Failure, Gates, LatencyBound, Phase, SearchConfig, SearchError, TrialMeasurement, Verdict,
    judge, search,
};
use kplace_radar::{Cpi, Scene, SceneConfig, Verifier, VerifyConfig, read_detections};
use serde_json::{Value, json};
use std::num::NonZeroU64;

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
    /// Post-CPI p99 bound in ms (default: one CPI period at the offered rate).
    #[arg(long)]
    latency_bound_ms: Option<f64>,
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

/// Runs the sweep, prints the table, writes JSON and CSV.
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
                continue;
            }
            let bounds = if args.bounds {
                Some(measure_bounds(&ctx, system, cpi)?)
            } else {
                None
            };
            for repeat in 0..args.repeat {
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
                    bounds,
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
                    "bounds": bounds.map(|b| json!({"ingest_only_cpi_per_s": b.ingest_only, "kernel_only_cpi_per_s": b.kernel_only})),
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
    Ok(if stop.load(Ordering::SeqCst) {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
}

/// The options every result depends on, recorded beside the results.
fn settings(args: &BisectArgs) -> Value {
    json!({
        "warmup_s": args.warmup_s,
        "window_s": args.window_s,
        "tolerance": args.tolerance,
        "confirm": args.confirm,
        "latency_bound_ms": args.latency_bound_ms,
        "sender_tick_us": args.sender_tick_us,
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

/// Per system and CPI searched more than once: the sustained rates' spread.
fn spreads(results: &[Value]) -> Vec<String> {
    let mut groups: Vec<(String, String, Vec<f64>)> = Vec::new();
    for r in results {
        let (Some(system), Some(cpi)) = (r["system"].as_str(), r["cpi"].as_str()) else {
            continue;
        };
        let rate = r["sustained_cpi_per_s"].as_f64();
        match groups.iter_mut().find(|(s, c, _)| s == system && c == cpi) {
            Some((_, _, rates)) => rates.extend(rate),
            None => groups.push((
                system.to_string(),
                cpi.to_string(),
                rate.into_iter().collect(),
            )),
        }
    }
    groups
        .into_iter()
        .filter(|(_, _, rates)| rates.len() > 1)
        .map(|(system, cpi, mut rates)| {
            rates.sort_by(f64::total_cmp);
            let median = rates[rates.len() / 2];
            let (low, high) = (rates[0], rates[rates.len() - 1]);
            format!(
                "spread {system} {cpi}: {} searches, min {low:.1}, median {median:.1}, max {high:.1} CPI/s, (max - min) / median {:.1}%",
                rates.len(),
                (high - low) / median * 100.0
            )
        })
        .collect()
}

/// What every trial needs from the sweep.
struct Trials<'a> {
    /// The MPS daemon whose clients the receivers must be, with `--mps on`.
    mps: Option<&'a kplace::mps::MpsDirs>,
    exe: &'a Path,
    args: &'a BisectArgs,
    children: &'a Children,
}

fn search_config(args: &BisectArgs, cpi: Cpi) -> SearchConfig {
    let mut config = SearchConfig::new(args.start_rate.unwrap_or(1.0 / cpi.period_s()));
    config.tolerance = args.tolerance;
    config.confirm = args.confirm;
    config.max_trials = args.max_trials;
    config
}

fn gates(args: &BisectArgs) -> Gates {
    Gates {
        latency_bound: match args.latency_bound_ms {
            Some(ms) => LatencyBound::Fixed(Duration::from_secs_f64(ms / 1e3)),
            None => LatencyBound::OneCpiPeriod,
        },
        ..Gates::default()
    }
}

/// Frames of a trial at `rate`: warm-up and measured window.
fn trial_frames(args: &BisectArgs, rate: f64) -> (u64, u64) {
    (
        ((rate * args.warmup_s).ceil() as u64).max(10),
        ((rate * args.window_s).ceil() as u64).max(30),
    )
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

/// One trial of kplace: `kplace send` at `rate` into `kplace run` on `placement`.
fn trial(
    ctx: &Trials<'_>,
    placement: &Path,
    cpi: Cpi,
    rate: f64,
    dir: &Path,
    index: usize,
) -> Result<TrialRun, TrialError> {
    let args = ctx.args;
    fs::create_dir_all(dir)
        .map_err(|e| TrialError::Spawn(format!("cannot create {}: {e}", dir.display())))?;
    let (warmup, measured) = trial_frames(args, rate);
    let frames = warmup + measured;
    let report_path = dir.join(format!("trial-{index}.json"));
    let _ = fs::remove_file(&report_path);
    let mut receiver = Command::new(ctx.exe)
        .args([
            "run",
            "--source",
            "udp://127.0.0.1:0",
            "--idle-timeout-s",
            "1",
        ])
        .arg("--graph")
        .arg(&args.graph)
        .arg("--placement")
        .arg(placement)
        .args([
            "--cpi",
            &cpi.to_string(),
            "--seed",
            &args.seed.to_string(),
            "--scene-frames",
            "16",
        ])
        .args([
            "--frames",
            &frames.to_string(),
            "--warmup-frames",
            &warmup.to_string(),
        ])
        .arg("--report")
        .arg(&report_path)
        .args([
            "--pipelines",
            &args.pipelines.to_string(),
            "--pipeline-mode",
            mode_name(args.pipeline_mode),
        ])
        .envs(ctx.mps.map(|d| d.client_env()).into_iter().flatten())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| TrialError::Spawn(format!("cannot start the receiver: {e}")))?;
    ctx.children.add(receiver.id());
    let ports = match listening_ports(&mut receiver, args.pipelines as usize) {
        Ok(ports) => ports,
        Err(stderr) => {
            let _ = receiver.kill();
            let _ = receiver.wait();
            ctx.children.remove(receiver.id());
            return Ok(failed(
                rate,
                format!("the receiver did not start: {stderr}"),
            ));
        }
    };
    // One sender per pipeline, all at once: each pipeline sees the trial's rate.
    let sent: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = ports
            .iter()
            .map(|&port| scope.spawn(move || send(ctx, port, cpi, rate, frames, None)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(TrialError::Spawn("a sender thread panicked".into())))
            })
            .collect()
    });
    let status = receiver.wait();
    ctx.children.remove(receiver.id());
    let status = status.map_err(|e| TrialError::Spawn(format!("waiting for the receiver: {e}")))?;
    for result in sent {
        if let Err(why) = result? {
            return Ok(failed(rate, why));
        }
    }
    let report: Value = match fs::read_to_string(&report_path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
    {
        Some(report) => report,
        None => {
            return Ok(failed(
                rate,
                format!("the receiver exited ({status}) without a report"),
            ));
        }
    };
    let (measurement, mut verdict) = judge_pipelines(&report, rate, frames, &gates(args));
    if ctx.mps.is_some() {
        let not_clients = mps_failures(&report);
        if !not_clients.is_empty() {
            verdict.passed = false;
            verdict.failures.extend(not_clients);
        }
    }
    Ok(TrialRun {
        rate,
        phase: Phase::ProbeUp,
        verdict,
        measurement: Some(measurement),
        report: Some(report),
    })
}

/// Judges a run's report: one pipeline's, or every pipeline's of a several-pipeline report (a
/// trial passes only if all pass; failures name their pipeline). The measurement kept is the
/// slowest pipeline's.
fn judge_pipelines(
    report: &Value,
    rate: f64,
    frames: u64,
    gates: &Gates,
) -> (TrialMeasurement, Verdict) {
    let Some(pipelines) = report["pipelines"].as_array() else {
        let measurement = measure(report, rate, frames);
        let verdict = judge(&measurement, gates);
        return (measurement, verdict);
    };
    let mut verdict = Verdict::pass();
    let mut slowest: Option<TrialMeasurement> = None;
    for (i, r) in pipelines.iter().enumerate() {
        if let Some(error) = r["error"].as_str() {
            verdict.passed = false;
            verdict.failures.push(Failure::Pipeline(
                i,
                Box::new(Failure::SystemFailed(error.to_string())),
            ));
            continue;
        }
        let m = measure(r, rate, frames);
        let v = judge(&m, gates);
        if !v.passed {
            verdict.passed = false;
            verdict.failures.extend(
                v.failures
                    .into_iter()
                    .map(|f| Failure::Pipeline(i, Box::new(f))),
            );
        }
        if slowest
            .as_ref()
            .is_none_or(|s| m.processed_rate < s.processed_rate)
        {
            slowest = Some(m);
        }
    }
    let measurement = slowest.unwrap_or_else(|| measure(&Value::Null, rate, frames));
    (measurement, verdict)
}

/// Under `--mps on`: a failure for each pipeline that uses a GPU (its report's `mps` is not
/// null) but is not a client of the daemon.
fn mps_failures(report: &Value) -> Vec<Failure> {
    let single = [report.clone()];
    let pipelines = report["pipelines"]
        .as_array()
        .map_or(&single[..], Vec::as_slice);
    pipelines
        .iter()
        .enumerate()
        .filter(|(_, r)| !r["mps"].is_null() && r["mps"]["is_client"] != true)
        .map(|(i, r)| {
            let why = format!(
                "not an MPS client ({})",
                r["mps"]["checked"].as_str().unwrap_or("unchecked")
            );
            if report["pipelines"].is_array() {
                Failure::Pipeline(i, Box::new(Failure::SystemFailed(why)))
            } else {
                Failure::SystemFailed(why)
            }
        })
        .collect()
}

/// The report whose latency and rate a table row and the plot show: the run's own, or for
/// several pipelines the one with the worst post-CPI p99.
fn representative(report: &Value) -> &Value {
    match report["pipelines"].as_array() {
        Some(pipelines) => pipelines
            .iter()
            .filter(|r| r.get("error").is_none())
            .max_by(|a, b| {
                let p99 = |r: &Value| r["latency"]["post_cpi"]["p99_ms"].as_f64().unwrap_or(0.0);
                p99(a).total_cmp(&p99(b))
            })
            .unwrap_or(report),
        None => report,
    }
}

/// Runs `kplace send` to `port`; the inner error is the sender's own failure (a failed trial).
fn send(
    ctx: &Trials<'_>,
    port: u16,
    cpi: Cpi,
    rate: f64,
    frames: u64,
    times: Option<&Path>,
) -> Result<Result<(), String>, TrialError> {
    let sender = Command::new(ctx.exe)
        .args(sender_args(
            port,
            cpi,
            rate,
            frames,
            ctx.args.seed,
            ctx.args.sender_tick_us,
        ))
        .args(
            times
                .map(|t| [std::ffi::OsString::from("--times"), t.into()])
                .into_iter()
                .flatten(),
        )
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| TrialError::Spawn(format!("cannot start the sender: {e}")))?;
    ctx.children.add(sender.id());
    let id = sender.id();
    let out = sender.wait_with_output();
    ctx.children.remove(id);
    let out = out.map_err(|e| TrialError::Spawn(format!("waiting for the sender: {e}")))?;
    Ok(if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "the sender failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    })
}

/// `kplace send`'s arguments for one trial's stream.
fn sender_args(
    port: u16,
    cpi: Cpi,
    rate: f64,
    frames: u64,
    seed: u64,
    tick_us: u64,
) -> Vec<String> {
    [
        "send".to_string(),
        "--dest".into(),
        format!("127.0.0.1:{port}"),
        "--cpi".into(),
        cpi.to_string(),
        "--seed".into(),
        seed.to_string(),
        "--scene-frames".into(),
        "16".into(),
        "--frames".into(),
        frames.to_string(),
        "--rate".into(),
        format!("{rate}"),
        "--pacing-tick-us".into(),
        tick_us.to_string(),
    ]
    .into()
}

/// One trial of another receiver, run by `command` with its placeholders replaced; judged by
/// verifying the detections file it writes. Without timestamps from the receiver, latency is
/// not measured and the processed rate is the offered rate scaled by the frames reported.
fn sut_trial(
    ctx: &Trials<'_>,
    command: &str,
    cpi: Cpi,
    rate: f64,
    dir: &Path,
    index: usize,
) -> Result<TrialRun, TrialError> {
    let args = ctx.args;
    fs::create_dir_all(dir)
        .map_err(|e| TrialError::Spawn(format!("cannot create {}: {e}", dir.display())))?;
    let (warmup, measured) = trial_frames(args, rate);
    let frames = warmup + measured;
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .map(|a| a.port())
        .map_err(|e| TrialError::Spawn(format!("cannot pick a port: {e}")))?;
    let detections = dir.join(format!("trial-{index}.det"));
    let _ = fs::remove_file(&detections);
    // A SUT that takes {times} writes when it finished each frame; with the sender's times that
    // gives its post-CPI latency, judged by the same gate as kplace's.
    let timed = command.contains("{times}");
    let done_times = dir.join(format!("trial-{index}.done.csv"));
    let _ = fs::remove_file(&done_times);
    let text = command
        .replace("{port}", &port.to_string())
        .replace("{frames}", &frames.to_string())
        .replace("{cpi}", &cpi.to_string())
        .replace("{samples}", &cpi.samples.to_string())
        .replace("{chirps}", &cpi.chirps.to_string())
        .replace("{detections}", &detections.display().to_string())
        .replace("{times}", &done_times.display().to_string());
    let log = fs::File::create(dir.join(format!("trial-{index}.log")))
        .map_err(|e| TrialError::Spawn(format!("cannot create a log in {}: {e}", dir.display())))?;
    let log_err = log
        .try_clone()
        .map_err(|e| TrialError::Spawn(e.to_string()))?;
    let mut sut = Command::new("sh")
        .args(["-c", &text])
        .stdout(log)
        .stderr(log_err)
        .spawn()
        .map_err(|e| TrialError::Spawn(format!("cannot start the system under test: {e}")))?;
    ctx.children.add(sut.id());
    let finish = |sut: &mut Child, outcome: TrialRun| {
        let _ = sut.kill();
        let _ = sut.wait();
        ctx.children.remove(sut.id());
        Ok(outcome)
    };
    if !wait_udp_listener(port, &mut sut) {
        return finish(
            &mut sut,
            failed(
                rate,
                format!("the system under test never listened on port {port}"),
            ),
        );
    }
    let started = std::time::Instant::now();
    let send_times = timed.then(|| dir.join(format!("trial-{index}.sent.csv")));
    if let Err(why) = send(ctx, port, cpi, rate, frames, send_times.as_deref())? {
        return finish(&mut sut, failed(rate, why));
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    // wait4, not try_wait: its rusage is the SUT's CPU time, its children's included.
    let exited = loop {
        match reap_with_usage(&sut) {
            Ok(Some(cpu)) => break Some(cpu),
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20))
            }
            _ => break None,
        }
    };
    let ran = started.elapsed();
    let Some(cpu) = exited else {
        return finish(
            &mut sut,
            failed(
                rate,
                "the system under test did not exit within 30 s of the last packet".into(),
            ),
        );
    };
    ctx.children.remove(sut.id());
    let verifier = match verify_file(args, cpi, frames, &detections) {
        Ok(v) => v,
        Err(e) => return Ok(failed(rate, format!("{e:#}"))),
    };
    let summary = verifier.summary();
    let completed = frames.saturating_sub(summary.frames_missing);
    let latency = match &send_times {
        Some(sent) => match sut_latency(sent, &done_times, warmup) {
            Ok(latency) => Some(latency),
            Err(why) => return Ok(failed(rate, why)),
        },
        None => None,
    };
    let window = Duration::from_secs_f64(frames as f64 / rate);
    let measurement = TrialMeasurement {
        offered_rate: rate,
        frames_sent: frames,
        frames_completed: completed,
        partial_frames: 0,
        dropped_frames: 0,
        frames_failed_verification: summary.frames_failed
            + summary.duplicate_reports
            + summary.unexpected_reports,
        processed_rate: rate * completed as f64 / frames as f64,
        post_cpi_p99: latency.as_ref().map_or(Duration::ZERO, |l| l.summary.p99),
        post_cpi_trend: latency.as_ref().map_or(0.0, |l| l.trend),
        window,
    };
    // Without the SUT's completion times there is no latency to judge.
    let gates = match latency {
        Some(_) => gates(args),
        None => Gates {
            latency_bound: LatencyBound::Fixed(Duration::MAX),
            ..gates(args)
        },
    };
    let verdict = judge(&measurement, &gates);
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let report = json!({
        "throughput_cpi_per_s": measurement.processed_rate,
        "input_gbit_per_s": measurement.processed_rate * (cpi.cells() * 4 * 8) as f64 / 1e9,
        "cores_used": cpu.as_secs_f64() / ran.as_secs_f64().max(1e-9),
        "latency": latency.as_ref().map(|l| json!({
            "post_cpi": {"count": l.summary.count, "p50_ms": ms(l.summary.p50), "p99_ms": ms(l.summary.p99), "p999_ms": ms(l.summary.p999), "max_ms": ms(l.summary.max)},
            "post_cpi_trend_ms_per_s": l.trend * 1e3,
        })),
    });
    // Beside the SUT's detections and log, as kplace's own trials leave their run report.
    let _ = fs::write(dir.join(format!("trial-{index}.json")), report.to_string());
    Ok(TrialRun {
        rate,
        phase: Phase::ProbeUp,
        verdict,
        measurement: Some(measurement),
        report: Some(report),
    })
}

/// A SUT's post-CPI latency over the measured frames (ids from `warmup` on).
struct SutLatency {
    summary: kplace::metrics::LatencySummary,
    /// Seconds of latency gained per second of run.
    trend: f64,
}

/// Post-CPI latency from the sender's times (`frame_id,first_ns,last_ns`) and the SUT's
/// (`frame_id,done_ns`, CLOCK_MONOTONIC like the sender's; a header line is allowed): done
/// minus last packet sent, for every measured frame the SUT finished.
fn sut_latency(sent: &Path, done: &Path, warmup: u64) -> Result<SutLatency, String> {
    let read = |path: &Path, what: &str| {
        fs::read_to_string(path)
            .map_err(|e| format!("cannot read the {what} times {}: {e}", path.display()))
    };
    let mut last_sent = std::collections::HashMap::new();
    for line in read(sent, "sender's")?.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        if let [id, _, last] = f[..]
            && let (Ok(id), Ok(last)) = (id.trim().parse::<u64>(), last.trim().parse::<u64>())
        {
            last_sent.insert(id, last);
        }
    }
    let mut latency = kplace::metrics::Latency::new();
    let mut trend = kplace::metrics::Trend::default();
    let mut first_done = None;
    for (n, line) in read(done, "system under test's")?.lines().enumerate() {
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        let parsed = match f[..] {
            [id, done] => id.parse::<u64>().ok().zip(done.parse::<u64>().ok()),
            _ => None,
        };
        let Some((id, done_ns)) = parsed else {
            if n == 0 {
                continue; // a header
            }
            return Err(format!(
                "{}:{}: expected frame_id,done_ns, got {line:?}",
                done.display(),
                n + 1
            ));
        };
        let Some(&last) = last_sent.get(&id) else {
            continue;
        };
        if id < warmup {
            continue;
        }
        let lat = done_ns.saturating_sub(last);
        latency.record(lat);
        let at = *first_done.get_or_insert(done_ns);
        trend.record(done_ns.saturating_sub(at) as f64 * 1e-9, lat as f64 * 1e-9);
    }
    Ok(SutLatency {
        summary: latency.summary(),
        trend: trend.slope(),
    })
}

/// Reaps `child` if it has exited, returning the CPU time (user + system) it and its reaped
/// descendants used; `None` while it runs.
fn reap_with_usage(child: &Child) -> std::io::Result<Option<Duration>> {
    let mut status = 0;
    // SAFETY: rusage is plain data the kernel fills; the pid is our own unreaped child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe {
        libc::wait4(
            child.id() as libc::pid_t,
            &mut status,
            libc::WNOHANG,
            &mut usage,
        )
    };
    match pid {
        0 => Ok(None),
        p if p < 0 => Err(std::io::Error::last_os_error()),
        _ => {
            let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
            Ok(Some(tv(usage.ru_utime) + tv(usage.ru_stime)))
        }
    }
}

/// Waits until something listens on UDP `port` (it appears in /proc/net/udp), or `child` exits.
fn wait_udp_listener(port: u16, child: &mut Child) -> bool {
    let needle = format!(":{port:04X} ");
    for _ in 0..200 {
        let listening = ["/proc/net/udp", "/proc/net/udp6"].iter().any(|f| {
            fs::read_to_string(f).is_ok_and(|t| {
                t.lines().skip(1).any(|l| {
                    l.split_whitespace()
                        .nth(1)
                        .is_some_and(|a| format!("{a} ").contains(&needle))
                })
            })
        });
        if listening {
            return true;
        }
        if matches!(child.try_wait(), Ok(Some(_))) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// The scene every trial sends: the default targets at `cpi`, with the sweep's seed.
fn scene(args: &BisectArgs, cpi: Cpi) -> anyhow::Result<Scene> {
    let mut config = SceneConfig::new(cpi);
    config.seed = args.seed;
    Ok(Scene::new(config)?)
}

fn verify_file(args: &BisectArgs, cpi: Cpi, frames: u64, path: &Path) -> anyhow::Result<Verifier> {
    let file = fs::File::open(path).with_context(|| {
        format!(
            "the system under test wrote no detections to {}",
            path.display()
        )
    })?;
    let (file_cpi, reports) = read_detections(BufReader::new(file), &path.display().to_string())?;
    if file_cpi != cpi {
        bail!("{} reports CPI {file_cpi}, not {cpi}", path.display());
    }
    let scene = scene(args, cpi)?;
    let period = NonZeroU64::new(16).unwrap_or(NonZeroU64::MIN);
    let mut verifier =
        Verifier::new(scene, VerifyConfig::for_cpi(cpi, 1e-6), frames).with_template_period(period);
    for report in &reports {
        verifier.check(report.frame_id, &report.clusters);
    }
    Ok(verifier)
}

/// The receiver alone and the kernels alone, measured before a system's searches.
#[derive(Clone, Copy)]
struct Bounds {
    ingest_only: Option<f64>,
    kernel_only: Option<f64>,
}

fn measure_bounds(ctx: &Trials<'_>, system: &System, cpi: Cpi) -> anyhow::Result<Bounds> {
    let frames = 2000u64;
    let mut receiver = Command::new(ctx.exe)
        .args([
            "run",
            "--source",
            "udp://127.0.0.1:0",
            "--idle-timeout-s",
            "1",
            "--ingest-only",
        ])
        .args(["--cpi", &cpi.to_string(), "--frames", &frames.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot start the ingest-only receiver")?;
    ctx.children.add(receiver.id());
    let ingest_only = match listening_port(&mut receiver) {
        Ok(port) => {
            let burst = Command::new(ctx.exe)
                .args([
                    "send",
                    "--dest",
                    &format!("127.0.0.1:{port}"),
                    "--cpi",
                    &cpi.to_string(),
                    "--burst",
                ])
                .args(["--frames", &frames.to_string(), "--scene-frames", "16"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            let id = receiver.id();
            let out = receiver.wait_with_output();
            ctx.children.remove(id);
            let text = out
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            burst.ok().filter(|s| s.success()).and_then(|_| {
                text.split(" CPI/s")
                    .next()
                    .and_then(|t| t.rsplit(' ').next())
                    .and_then(|v| v.parse().ok())
            })
        }
        Err(_) => {
            let _ = receiver.kill();
            let _ = receiver.wait();
            ctx.children.remove(receiver.id());
            None
        }
    };
    let kernel_only = match system {
        System::Placement(placement) => 'bound: {
            let plan = plan_for(&ctx.args.graph, placement, cpi)?;
            if plan.stages.iter().any(|s| s.gpu.is_some()) {
                // Kernels back to back on one CPU thread say nothing of a GPU placement.
                break 'bound None;
            }
            let scene = scene(ctx.args, cpi)?;
            let prepared = (0..4)
                .map(|f| scene.frame_bytes(f))
                .collect::<Result<Vec<_>, _>>()?;
            // About a second of frames, from a short first measurement.
            let probe = bounds::kernel_only_rate(&plan, &prepared, 8)?;
            Some(bounds::kernel_only_rate(
                &plan,
                &prepared,
                (probe as u64).clamp(8, 5000),
            )?)
        }
        System::Command(_) => None,
    };
    eprintln!(
        "bisect-rate: bounds at {cpi}: ingest only {}, kernels only {}",
        ingest_only.map_or("n/a".into(), |r| format!("{r:.1} CPI/s")),
        kernel_only.map_or("n/a".into(), |r| format!("{r:.1} CPI/s"))
    );
    Ok(Bounds {
        ingest_only,
        kernel_only,
    })
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

/// Reads the receiver's stderr until it says where it listens; the rest is drained in the
/// background so the child never blocks on a full pipe.
fn listening_port(child: &mut Child) -> Result<u16, String> {
    listening_ports(child, 1).map(|ports| ports[0])
}

/// The ports of the first `count` "listening on udp://HOST:PORT" lines on `child`'s stderr
/// (one per pipeline); the rest of its stderr is drained in the background. On end of output
/// before that, what it printed.
fn listening_ports(child: &mut Child, count: usize) -> Result<Vec<u16>, String> {
    let Some(stderr) = child.stderr.take() else {
        return Err("no stderr".into());
    };
    let mut reader = BufReader::new(stderr);
    let mut seen = String::new();
    let mut ports = Vec::with_capacity(count);
    while ports.len() < count {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return Err(seen.trim().to_string()),
            Ok(_) => {}
        }
        seen.push_str(&line);
        if let Some(port) = parse_listening_port(&line) {
            ports.push(port);
        }
    }
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = reader.read_to_end(&mut sink);
    });
    Ok(ports)
}

fn parse_listening_port(line: &str) -> Option<u16> {
    line.split("listening on udp://")
        .nth(1)?
        .split_whitespace()
        .next()?
        .rsplit(':')
        .next()?
        .parse()
        .ok()
}

fn measure(report: &Value, rate: f64, frames_sent: u64) -> TrialMeasurement {
    let num = |v: &Value| v.as_f64().unwrap_or(0.0);
    let int = |v: &Value| v.as_u64().unwrap_or(0);
    let latency = &report["latency"];
    TrialMeasurement {
        offered_rate: rate,
        frames_sent,
        frames_completed: int(&report["frames"]),
        partial_frames: int(&report["partial_frames"]),
        dropped_frames: int(&report["dropped_frames"]),
        frames_failed_verification: int(&report["verification"]["frames_failed"]),
        processed_rate: num(&report["throughput_cpi_per_s"]),
        post_cpi_p99: Duration::from_secs_f64(num(&latency["post_cpi"]["p99_ms"]).max(0.0) / 1e3),
        post_cpi_trend: num(&latency["post_cpi_trend_ms_per_s"]) / 1e3,
        window: Duration::from_secs_f64(num(&report["wall_s"]).max(0.0)),
    }
}

fn table_row(
    label: &str,
    cpi: Cpi,
    sustained: Option<f64>,
    report: Option<&Value>,
    bounds: Option<Bounds>,
    trials: usize,
    outcome: &str,
) -> String {
    let num = |v: &Value| v.as_f64().map_or("n/a".to_string(), |x| format!("{x:.2}"));
    let mut row = match (sustained, report) {
        (Some(rate), Some(r)) => format!(
            "| {label} | {cpi} | {rate:.1} | {} | {} | {} | {} | {trials}, {outcome} |",
            num(&r["input_gbit_per_s"]),
            num(&r["latency"]["post_cpi"]["p50_ms"]),
            num(&r["latency"]["post_cpi"]["p999_ms"]),
            num(&r["cores_used"]),
        ),
        (Some(rate), None) => format!(
            "| {label} | {cpi} | {rate:.1} | {:.2} | n/a | n/a | n/a | {trials}, {outcome} |",
            rate * (cpi.cells() * 4 * 8) as f64 / 1e9
        ),
        _ => format!("| {label} | {cpi} | none | | | | | {trials}, {outcome} |"),
    };
    if let Some(b) = bounds {
        let show = |r: Option<f64>| r.map_or("n/a".to_string(), |r| format!("{r:.1}"));
        let least = [b.ingest_only, b.kernel_only]
            .into_iter()
            .flatten()
            .reduce(f64::min);
        let ratio = match (sustained, least) {
            (Some(s), Some(l)) if l > 0.0 => format!("{:.3}", s / l),
            _ => "n/a".into(),
        };
        row += &format!(
            " {} | {} | {ratio} |",
            show(b.ingest_only),
            show(b.kernel_only)
        );
    }
    row
}

fn write_csv(
    out: &Path,
    name: &str,
    cpi: Cpi,
    repeat: u32,
    runs: &[TrialRun],
) -> anyhow::Result<()> {
    let path = out.join(format!("trials-{name}-{cpi}-{repeat}.csv"));
    let mut file =
        fs::File::create(&path).with_context(|| format!("cannot create {}", path.display()))?;
    writeln!(
        file,
        "trial,rate,phase,passed,processed_rate,post_cpi_p99_ms,frames_sent,frames_completed,partial,dropped,failures"
    )?;
    for (i, t) in runs.iter().enumerate() {
        let m = t.measurement.as_ref();
        writeln!(
            file,
            "{i},{:.3},{},{},{:.3},{:.3},{},{},{},{},\"{}\"",
            t.rate,
            t.phase,
            t.verdict.is_pass(),
            m.map_or(0.0, |m| m.processed_rate),
            m.map_or(0.0, |m| m.post_cpi_p99.as_secs_f64() * 1e3),
            m.map_or(0, |m| m.frames_sent),
            m.map_or(0, |m| m.frames_completed),
            m.map_or(0, |m| m.partial_frames),
            m.map_or(0, |m| m.dropped_frames),
            t.verdict
                .failures
                .iter()
                .map(Failure::to_string)
                .collect::<Vec<_>>()
                .join("; ")
                .replace('"', "'")
        )?;
    }
    Ok(())
}

/// The machine the results come from.
fn machine_facts() -> Value {
    let cpu = fs::read_to_string("/proc/cpuinfo").ok().and_then(|t| {
        t.lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split(':').nth(1))
            .map(|s| s.trim().to_string())
    });
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .map(|s| s.trim().to_string());
    json!({
        "cpu": cpu,
        "cores": std::thread::available_parallelism().map(|n| n.get()).ok(),
        "kernel": kernel,
        "gpu": Value::Null,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(frames: u64, rate: f64, p99_ms: f64) -> Value {
        json!({"frames": frames, "partial_frames": 0, "dropped_frames": 0,
               "verification": {"frames_failed": 0}, "throughput_cpi_per_s": rate,
               "latency": {"post_cpi": {"p99_ms": p99_ms}, "post_cpi_trend_ms_per_s": 0.0},
               "wall_s": 1.0})
    }

    #[test]
    fn every_pipeline_is_judged_and_failures_name_it() {
        let gates = Gates::default();
        let one = report(100, 100.0, 1.0);
        let (_, verdict) = judge_pipelines(&one, 100.0, 100, &gates);
        assert!(verdict.passed, "{verdict}");
        let two = json!({"pipelines": [report(100, 100.0, 1.0), report(90, 90.0, 1.0)]});
        let (slowest, verdict) = judge_pipelines(&two, 100.0, 100, &gates);
        assert!(!verdict.passed);
        assert_eq!(slowest.processed_rate, 90.0, "the slowest pipeline is kept");
        assert!(
            verdict
                .failures
                .iter()
                .all(|f| f.to_string().starts_with("pipeline 1: ")),
            "{verdict}"
        );
        let broken = json!({"pipelines": [report(100, 100.0, 1.0), {"error": "no GPU"}]});
        let (_, verdict) = judge_pipelines(&broken, 100.0, 100, &gates);
        assert_eq!(
            verdict
                .failures
                .iter()
                .map(Failure::to_string)
                .collect::<Vec<_>>(),
            ["pipeline 1: the trial failed to run: no GPU"]
        );
    }

    #[test]
    fn under_mps_a_gpu_pipeline_that_is_not_a_client_fails() {
        let client = json!({"mps": {"is_client": true, "checked": "daemon lists pid 7"}});
        let fallback = json!({"mps": {"is_client": false, "checked": "not in the client list"}});
        let cpu_only = json!({"mps": null});
        assert!(mps_failures(&client).is_empty());
        assert!(
            mps_failures(&cpu_only).is_empty(),
            "no context, no MPS to check"
        );
        assert_eq!(
            mps_failures(&fallback)
                .iter()
                .map(Failure::to_string)
                .collect::<Vec<_>>(),
            ["the trial failed to run: not an MPS client (not in the client list)"]
        );
        let several = json!({"pipelines": [client, fallback, cpu_only]});
        assert_eq!(
            mps_failures(&several)
                .iter()
                .map(Failure::to_string)
                .collect::<Vec<_>>(),
            ["pipeline 1: the trial failed to run: not an MPS client (not in the client list)"]
        );
    }

    #[test]
    fn listening_lines_give_their_ports_and_the_sender_gets_the_tick() {
        assert_eq!(
            parse_listening_port(
                "kplace run: pipeline 1: listening on udp://127.0.0.1:40123 (socket ...)"
            ),
            Some(40123)
        );
        assert_eq!(parse_listening_port("kplace run: graph ..."), None);
        let cpi: Cpi = "1024x128".parse().unwrap();
        let args = sender_args(9000, cpi, 250.5, 40, 7, 100);
        let joined = args.join(" ");
        assert!(
            joined.contains("--dest 127.0.0.1:9000")
                && joined.contains("--rate 250.5")
                && joined.contains("--pacing-tick-us 100")
                && joined.contains("--seed 7"),
            "{joined}"
        );
    }
}

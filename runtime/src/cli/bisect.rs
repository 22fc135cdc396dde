//! `kplace bisect-rate`: the highest input rate each placement sustains, found by real
//! trials: `kplace send` paces a stream into `kplace run` (two processes, open loop), and
//! each trial is judged by the gates of `kplace::rate` on the run's JSON report.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use kplace::graph::{Graph, Overrides};
use kplace::placement::Placement;
use kplace::plan::Plan;
use kplace::rate::{
    Failure, Gates, LatencyBound, Phase, SearchConfig, SearchError, TrialMeasurement, Verdict,
    judge, search,
};
use kplace_radar::Cpi;
use serde_json::{Value, json};

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

/// Runs the sweep, prints the table, writes JSON and CSV.
pub fn main(args: BisectArgs) -> anyhow::Result<ExitCode> {
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = Arc::clone(&stop);
        // A second handler would fail if `kplace send`'s were installed; this process has none.
        let _ = ctrlc::set_handler(move || stop.store(true, Ordering::SeqCst));
    }
    let placements = placement_files(&args.placements)?;
    fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let exe = std::env::current_exe().context("cannot find the kplace executable")?;
    let mut rows = Vec::new();
    let mut results = Vec::new();
    'sweep: for placement in &placements {
        for &cpi in &args.cpi {
            if let Err(reason) = plannable(&args.graph, placement, cpi) {
                eprintln!(
                    "bisect-rate: {} at {cpi}: skipped: {reason:#}",
                    placement.display()
                );
                results.push(json!({"placement": placement.display().to_string(), "cpi": cpi.to_string(), "skipped": format!("{reason:#}")}));
                rows.push(format!(
                    "| {} | {cpi} | skipped: {reason:#} | | | | | |",
                    placement_name(placement)
                ));
                continue;
            }
            for repeat in 0..args.repeat {
                let mut runs: Vec<TrialRun> = Vec::new();
                let start = args.start_rate.unwrap_or(1.0 / cpi.period_s());
                let mut config = SearchConfig::new(start);
                config.tolerance = args.tolerance;
                config.confirm = args.confirm;
                config.max_trials = args.max_trials;
                let gates = Gates {
                    latency_bound: match args.latency_bound_ms {
                        Some(ms) => LatencyBound::Fixed(Duration::from_secs_f64(ms / 1e3)),
                        None => LatencyBound::OneCpiPeriod,
                    },
                    ..Gates::default()
                };
                let outcome = search(&config, |rate, phase| {
                    if stop.load(Ordering::SeqCst) {
                        return Err(TrialError::Interrupted);
                    }
                    let index = runs.len();
                    let dir = args
                        .out
                        .join(format!("{}-{cpi}-{repeat}", placement_name(placement)));
                    let run = trial(&exe, &args, placement, cpi, rate, &dir, index, &gates)?;
                    eprintln!(
                        "bisect-rate: {} {cpi} #{repeat} trial {index}: {rate:.1} CPI/s ({phase}): {}",
                        placement_name(placement),
                        run.verdict
                    );
                    let verdict = run.verdict.clone();
                    runs.push(TrialRun { phase, ..run });
                    Ok(verdict)
                });
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
                let row = table_row(
                    placement,
                    cpi,
                    repeat,
                    result.sustained,
                    at_result.as_ref(),
                    runs.len(),
                    &result.outcome.to_string(),
                );
                rows.push(row);
                results.push(json!({
                    "placement": placement.display().to_string(),
                    "cpi": cpi.to_string(),
                    "repeat": repeat,
                    "sustained_cpi_per_s": result.sustained,
                    "highest_pass": result.highest_pass,
                    "lowest_fail": result.lowest_fail,
                    "outcome": result.outcome.to_string(),
                    "trials": runs.iter().map(|t| json!({
                        "rate": t.rate,
                        "phase": t.phase.to_string(),
                        "passed": t.verdict.is_pass(),
                        "failures": t.verdict.failures.iter().map(Failure::to_string).collect::<Vec<_>>(),
                        "measurement": t.measurement,
                    })).collect::<Vec<_>>(),
                }));
                write_csv(&args.out, placement, cpi, repeat, &runs)?;
                if interrupted {
                    break 'sweep;
                }
            }
        }
    }
    println!(
        "| placement | CPI | sustained CPI/s | Gbit/s | post-CPI p50 ms | post-CPI p99.9 ms | cores used | trials, outcome |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for row in &rows {
        println!("{row}");
    }
    let machine = machine_facts();
    let json_path = args.out.join("bisect-rate.json");
    let text = serde_json::to_string_pretty(&json!({"machine": machine, "results": results}))?;
    fs::write(&json_path, text + "\n")
        .with_context(|| format!("cannot write {}", json_path.display()))?;
    eprintln!(
        "bisect-rate: results in {} and {}/trials-*.csv",
        json_path.display(),
        args.out.display()
    );
    Ok(if stop.load(Ordering::SeqCst) {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
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

/// Plans once here, so that a placement that cannot run (a GPU placement without a GPU) is
/// reported as skipped with the planner's reason instead of failing every trial.
fn plannable(graph: &Path, placement: &Path, cpi: Cpi) -> anyhow::Result<()> {
    let overrides = Overrides {
        dims: vec![
            ("N".into(), cpi.samples as u64),
            ("M".into(), cpi.chirps as u64),
        ],
        params: Vec::new(),
    };
    Plan::new(Graph::load(graph, &overrides)?, Placement::load(placement)?)?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn trial(
    exe: &Path,
    args: &BisectArgs,
    placement: &Path,
    cpi: Cpi,
    rate: f64,
    dir: &Path,
    index: usize,
    gates: &Gates,
) -> Result<TrialRun, TrialError> {
    fs::create_dir_all(dir)
        .map_err(|e| TrialError::Spawn(format!("cannot create {}: {e}", dir.display())))?;
    let warmup = ((rate * args.warmup_s).ceil() as u64).max(10);
    let measured = ((rate * args.window_s).ceil() as u64).max(30);
    let frames = warmup + measured;
    let report_path = dir.join(format!("trial-{index}.json"));
    let _ = fs::remove_file(&report_path);
    let spawn_error =
        |what: &str, e: std::io::Error| TrialError::Spawn(format!("cannot start {what}: {e}"));
    let mut receiver = Command::new(exe)
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
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| spawn_error("the receiver", e))?;
    let port = match listening_port(&mut receiver) {
        Ok(port) => port,
        Err(stderr) => {
            let _ = receiver.kill();
            let _ = receiver.wait();
            return Ok(failed(
                rate,
                format!("the receiver did not start: {stderr}"),
            ));
        }
    };
    let sent = Command::new(exe)
        .args([
            "send",
            "--dest",
            &format!("127.0.0.1:{port}"),
            "--cpi",
            &cpi.to_string(),
        ])
        .args(["--seed", &args.seed.to_string(), "--scene-frames", "16"])
        .args([
            "--frames",
            &frames.to_string(),
            "--rate",
            &format!("{rate}"),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| spawn_error("the sender", e))?;
    let status = receiver
        .wait()
        .map_err(|e| TrialError::Spawn(format!("waiting for the receiver: {e}")))?;
    if !sent.status.success() {
        return Ok(failed(
            rate,
            format!(
                "the sender failed: {}",
                String::from_utf8_lossy(&sent.stderr).trim()
            ),
        ));
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
    let measurement = measure(&report, rate, frames);
    let verdict = judge(&measurement, gates);
    Ok(TrialRun {
        rate,
        phase: Phase::ProbeUp,
        verdict,
        measurement: Some(measurement),
        report: Some(report),
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
    let Some(stderr) = child.stderr.take() else {
        return Err("no stderr".into());
    };
    let mut reader = BufReader::new(stderr);
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return Err(seen.trim().to_string()),
            Ok(_) => {}
        }
        seen.push_str(&line);
        if let Some(rest) = line.split("listening on udp://").nth(1)
            && let Some(port) = rest
                .split_whitespace()
                .next()
                .and_then(|a| a.rsplit(':').next())
                .and_then(|p| p.parse().ok())
        {
            std::thread::spawn(move || {
                let mut sink = Vec::new();
                let _ = reader.read_to_end(&mut sink);
            });
            return Ok(port);
        }
    }
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

#[allow(clippy::too_many_arguments)]
fn table_row(
    placement: &Path,
    cpi: Cpi,
    repeat: u32,
    sustained: Option<f64>,
    report: Option<&Value>,
    trials: usize,
    outcome: &str,
) -> String {
    let name = placement_name(placement);
    let label = if repeat > 0 {
        format!("{name} #{repeat}")
    } else {
        name
    };
    match (sustained, report) {
        (Some(rate), Some(r)) => format!(
            "| {label} | {cpi} | {rate:.1} | {:.2} | {:.2} | {:.2} | {:.2} | {trials}, {outcome} |",
            r["input_gbit_per_s"].as_f64().unwrap_or(0.0),
            r["latency"]["post_cpi"]["p50_ms"].as_f64().unwrap_or(0.0),
            r["latency"]["post_cpi"]["p999_ms"].as_f64().unwrap_or(0.0),
            r["cores_used"].as_f64().unwrap_or(0.0),
        ),
        _ => format!("| {label} | {cpi} | none | | | | | {trials}, {outcome} |"),
    }
}

fn write_csv(
    out: &Path,
    placement: &Path,
    cpi: Cpi,
    repeat: u32,
    runs: &[TrialRun],
) -> anyhow::Result<()> {
    let path = out.join(format!(
        "trials-{}-{cpi}-{repeat}.csv",
        placement_name(placement)
    ));
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

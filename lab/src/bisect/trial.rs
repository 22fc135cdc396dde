//! One trial of kplace itself: `kplace send` at the trial's rate into `kplace run` on the
//! placement, judged on the run's JSON report (every pipeline's, with several).

use std::fs;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use kplace::report::MAX_REPORT_BYTES;
use kplace::report::ready::wait_ready;
use kplace::report::run::{MULTI_SCHEMA, MultiRunReport, PipelineEntry, RunReport};
use kplace::report::send::SendFile;
use kplace::session::child::{Pace, SendChild};
use serde_json::Value;

use super::failure::TrialFault;
#[cfg(test)]
use crate::rate::LatencyBudget;
use crate::rate::sweep::{SenderEntry, StageTime, TrialLatency};
use crate::rate::{
    Failure, Gates, Judgement, TrialMeasurement, TrialRequest, Verdict, judge, loss_ratio,
};

use super::{SearchShape, TrialError, TrialFigures, TrialRun, Trials, failed};

/// One trial of kplace: `kplace send` at `rate` into `kplace run` on the first of
/// `placements`, switching to the others as it needs (`--adapt`, judged against the trial's
/// latency budget) when there are several.
pub(super) fn trial(
    ctx: &Trials<'_>,
    placements: &[PathBuf],
    shape: &SearchShape,
    request: &TrialRequest,
    dir: &Path,
    index: usize,
) -> Result<TrialRun, TrialError> {
    let config = ctx.config;
    let rate = request.load;
    let (warmup, frames, duration_s) = ctx.begin_trial(dir, request)?;
    let report_path = dir.join(format!("trial-{index}.json"));
    let ready_path = dir.join(format!("trial-{index}.ready"));
    let _ = fs::remove_file(&report_path);
    let _ = fs::remove_file(&ready_path);
    let (placement, others) = placements
        .split_first()
        .ok_or_else(|| TrialError::Spawn("no placement to run".into()))?;
    let budget = config.latency_budget(shape).at(rate);
    let mut spec = ctx.receiver();
    spec.placement = Some(placement.clone());
    spec.adapt = others.to_vec();
    spec.budget = (!others.is_empty()).then(|| whole_us(budget));
    // A trial measures: the cost model's admission check must not stand in its way.
    spec.force = config.pipelines > 1;
    spec.shape = Some(shape.shape.clone());
    spec.frames_of = Some(config.receiver_frames());
    spec.frames = Some(frames);
    spec.warmup_frames = warmup;
    spec.report = Some(report_path.clone());
    spec.ready_file = Some(ready_path.clone());
    spec.pipelines = config.pipelines;
    spec.pipeline_mode = config.pipeline_mode;
    // `slots: auto` sizes for the offered stream, and a slow stream's own gaps never cut its
    // frames short.
    spec.stream_rate = Some(rate);
    spec.frame_timeout = Some(Duration::from_millis(frame_timeout_ms(rate)));
    let mut receiver = ctx
        .receiver_command(&spec)?
        .envs(ctx.mps.map(|d| d.client_env()).into_iter().flatten())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| TrialError::Spawn(format!("cannot start the receiver: {e}")))?;
    ctx.stop.add(receiver.id());
    let ports = match ready_ports(&mut receiver, &ready_path) {
        Ok(ports) => ports,
        Err(stderr) => {
            let _ = receiver.kill();
            let _ = receiver.wait();
            ctx.stop.remove(receiver.id());
            return Ok(failed(
                rate,
                duration_s,
                format!("the receiver did not start: {stderr}"),
            ));
        }
    };
    // One sender per pipeline, all at once: each pipeline sees the trial's rate.
    let sent: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = ports
            .iter()
            .map(|&port| {
                let report = dir.join(format!("trial-{index}.send-{port}.json"));
                scope.spawn(move || send(ctx, port, shape, rate, frames, None, &report))
            })
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
    ctx.stop.remove(receiver.id());
    let status = status.map_err(|e| TrialError::Spawn(format!("waiting for the receiver: {e}")))?;
    let mut senders = Vec::new();
    for result in sent {
        match result? {
            Ok(sender) => senders.push(sender),
            Err(why) => return Ok(failed(rate, duration_s, why.to_string())),
        }
    }
    let sender = worst_sender(&senders);
    let report = match TrialReport::read(&report_path) {
        Ok(report) => report,
        Err(why) => {
            return Ok(failed(
                rate,
                duration_s,
                format!("the receiver exited ({status}) {why}"),
            ));
        }
    };
    let (measurement, mut verdict, mut loss) =
        judge_pipelines(&report, rate, frames, &config.gates(shape));
    if ctx.mps.is_some() {
        let not_clients = mps_failures(&report);
        if !not_clients.is_empty() {
            verdict.passed = false;
            verdict.failures.extend(not_clients);
            loss = 1.0;
        }
    }
    let judgement = judge_sender(verdict, sender.as_ref(), rate, config.max_sender_lag_ms);
    Ok(TrialRun {
        rate,
        request: Some(*request),
        loss_ratio: judgement.verdict().map(|_| loss),
        judgement,
        duration_s,
        measurement: Some(measurement),
        figures: Some(figures(report.representative())),
        report_path: Some(report_path),
        sender,
    })
}

/// The frame timeout of a trial at `rate`, in ms: the receiver's usual 20 ms, or one frame
/// period when that is longer, so that a slow stream's own gaps between packets never end a
/// frame as partial.
pub(super) fn frame_timeout_ms(rate: f64) -> u64 {
    let period_ms = (1e3 / rate).ceil();
    if period_ms.is_finite() {
        (period_ms as u64).clamp(20, 3_600_000)
    } else {
        3_600_000
    }
}

/// The worst schedule any of a trial's senders kept (the largest lag, oversleep and switch
/// count of them all).
pub(super) fn worst_sender(senders: &[SenderEntry]) -> Option<SenderEntry> {
    senders.iter().cloned().reduce(|a, b| SenderEntry {
        max_lag_ms: a.max_lag_ms.max(b.max_lag_ms),
        max_stall_ms: a.max_stall_ms.max(b.max_stall_ms),
        involuntary_switches: a.involuntary_switches.max(b.involuntary_switches),
        sent_per_s: match (a.sent_per_s, b.sent_per_s) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        },
    })
}

/// Below this fraction of the offered rate, the sender could not offer the rate at all.
const SENDER_LIMIT_RATIO: f64 = 0.95;

/// The trial's judgement: its verdict, unless the load generator did not offer the rate: it
/// reached less than 95% of it, fell further behind its schedule than `max_lag_ms`, or was
/// kept off the CPU (descheduled) longer than that. Such a trial is invalid: it says nothing
/// of the system, and the search retries it or takes the rate for the sender's limit here.
pub(super) fn judge_sender(
    verdict: Verdict,
    sender: Option<&SenderEntry>,
    offered: f64,
    max_lag_ms: f64,
) -> Judgement {
    // "Is it within", so that a NaN is outside.
    let beyond = |ms: f64| ms.partial_cmp(&max_lag_ms).is_none_or(|o| o.is_gt());
    match sender {
        // A sender that cannot reach the rate at all bounds what this machine can measure.
        Some(SenderEntry {
            sent_per_s: Some(achieved),
            ..
        }) if *achieved < SENDER_LIMIT_RATIO * offered => Judgement::Invalid(
            Failure::SenderLimit {
                offered,
                achieved: *achieved,
            }
            .to_string(),
        ),
        Some(s) if beyond(s.max_lag_ms) => Judgement::Invalid(format!(
            "the sender fell {:.3} ms behind its schedule, more than {max_lag_ms} ms \
             (kept off the CPU up to {:.3} ms, {} involuntary switches)",
            s.max_lag_ms, s.max_stall_ms, s.involuntary_switches
        )),
        Some(s) if beyond(s.max_stall_ms) => Judgement::Invalid(format!(
            "the sender was kept off the CPU for {:.3} ms, more than {max_lag_ms} ms \
             ({} involuntary switches)",
            s.max_stall_ms, s.involuntary_switches
        )),
        _ => Judgement::Verdict(verdict),
    }
}

/// What a trial's receiver reported: one pipeline's run, or several pipelines'.
#[derive(Debug)]
pub(super) enum TrialReport {
    /// `kplace run` with one pipeline.
    One(Box<RunReport>),
    /// `kplace run --pipelines N`.
    Several(Box<MultiRunReport>),
}

impl TrialReport {
    /// The report at `path`, read strictly; the error says what is wrong, after "exited".
    fn read(path: &Path) -> Result<TrialReport, TrialFault> {
        let text = kplace::os::files::read_text_bounded(path, MAX_REPORT_BYTES, "run report")
            .map_err(|e| match e.is_not_found() {
                true => TrialFault::NoReport,
                false => TrialFault::ReportUnreadable(e),
            })?;
        let origin = path.display().to_string();
        let unreadable = TrialFault::ReportInvalid;
        let value: Value = serde_json::from_str(&text).map_err(|e| {
            unreadable(kplace::report::ReadError::Json {
                origin: origin.clone(),
                source: e,
            })
        })?;
        if value.get("schema").and_then(Value::as_str) == Some(MULTI_SCHEMA) {
            kplace::report::from_value(value, &origin)
                .map(|r| TrialReport::Several(Box::new(r)))
                .map_err(unreadable)
        } else {
            kplace::report::from_value(value, &origin)
                .map(|r| TrialReport::One(Box::new(r)))
                .map_err(unreadable)
        }
    }

    /// The report whose latency and rate a table row and the plot show: the run's own, or for
    /// several pipelines the one with the worst post-frame p99 (`None` if none ran).
    fn representative(&self) -> Option<&RunReport> {
        match self {
            TrialReport::One(report) => Some(report),
            TrialReport::Several(multi) => multi
                .pipelines
                .iter()
                .filter_map(PipelineEntry::report)
                .max_by(|a, b| {
                    a.latency
                        .post_frame
                        .p99_ms
                        .total_cmp(&b.latency.post_frame.p99_ms)
                }),
        }
    }
}

/// What the results file keeps of a run's report beside the trial's measurement.
fn figures(report: Option<&RunReport>) -> TrialFigures {
    let Some(report) = report else {
        return TrialFigures::default();
    };
    let post = &report.latency.post_frame;
    TrialFigures {
        latency: Some(TrialLatency {
            p50_ms: post.p50_ms,
            p99_ms: post.p99_ms,
            p999_ms: post.p999_ms,
            histogram: post.histogram.clone(),
        }),
        stages: report
            .stages
            .iter()
            .map(|s| StageTime {
                name: s.name.clone(),
                device: s.device.clone(),
                per_frame_ms: s.per_frame_ms,
                gpu_ms_per_frame: s.gpu_ms_per_frame,
            })
            .collect(),
        cores_used: Some(report.cores_used),
    }
}

/// Judges a run's report: one pipeline's, or every pipeline's of a several-pipeline report (a
/// trial passes only if all pass; failures name their pipeline), with the fraction of frames
/// lost (the worst pipeline's). The measurement kept is the slowest pipeline's.
fn judge_pipelines(
    report: &TrialReport,
    rate: f64,
    frames: u64,
    gates: &Gates,
) -> (TrialMeasurement, Verdict, f64) {
    let budget = gates.latency_budget.at(rate);
    let pipelines = match report {
        TrialReport::One(report) => {
            let measurement = measure(report, rate, frames, budget);
            let verdict = judge(&measurement, gates);
            let loss = loss_ratio(&measurement, &verdict);
            return (measurement, verdict, loss);
        }
        TrialReport::Several(multi) => &multi.pipelines,
    };
    let mut verdict = Verdict::pass();
    let mut slowest: Option<TrialMeasurement> = None;
    let mut worst_loss: f64 = 0.0;
    for (i, entry) in pipelines.iter().enumerate() {
        let r = match entry {
            PipelineEntry::Failed(failure) => {
                verdict.passed = false;
                verdict.failures.push(Failure::Pipeline(
                    i,
                    Box::new(Failure::SystemFailed(failure.error.clone())),
                ));
                worst_loss = 1.0;
                continue;
            }
            PipelineEntry::Ran(r) => r,
        };
        let m = measure(r, rate, frames, budget);
        let v = judge(&m, gates);
        worst_loss = worst_loss.max(loss_ratio(&m, &v));
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
    let measurement = slowest.unwrap_or_else(|| nothing_measured(rate, frames));
    if pipelines.is_empty() {
        worst_loss = 1.0;
    }
    (measurement, verdict, worst_loss)
}

/// Under `--mps on`: a failure for each pipeline that uses a GPU (its report's `mps` is not
/// null) but is not a client of the daemon.
fn mps_failures(report: &TrialReport) -> Vec<Failure> {
    let not_a_client = |r: &RunReport| {
        r.mps
            .as_ref()
            .filter(|mps| !mps.is_client)
            .map(|mps| Failure::SystemFailed(format!("not an MPS client ({})", mps.checked)))
    };
    match report {
        TrialReport::One(r) => not_a_client(r).into_iter().collect(),
        TrialReport::Several(multi) => multi
            .pipelines
            .iter()
            .enumerate()
            .filter_map(|(i, entry)| {
                let failure = not_a_client(entry.report()?)?;
                Some(Failure::Pipeline(i, Box::new(failure)))
            })
            .collect(),
    }
}

/// Runs `kplace send` to `port`, its report written to `report`; returns what it says of
/// its schedule. The inner error is the sender's own failure (a failed trial).
pub(super) fn send(
    ctx: &Trials<'_>,
    port: u16,
    shape: &SearchShape,
    rate: f64,
    frames: u64,
    times: Option<&Path>,
    report: &Path,
) -> Result<Result<SenderEntry, TrialFault>, TrialError> {
    let _ = fs::remove_file(report);
    let mut spec = sender_spec(ctx, port, shape, rate, frames);
    spec.times = times.map(Path::to_path_buf);
    spec.report = Some(report.to_path_buf());
    let sender = ctx
        .sender_child(&spec)?
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| TrialError::Spawn(format!("cannot start the sender: {e}")))?;
    ctx.stop.add(sender.id());
    let id = sender.id();
    let out = sender.wait_with_output();
    ctx.stop.remove(id);
    let out = out.map_err(|e| TrialError::Spawn(format!("waiting for the sender: {e}")))?;
    if !out.status.success() {
        return Ok(Err(TrialFault::Sender(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        )));
    }
    Ok(read_sender_report(report))
}

/// What a sender's `--report` says of its schedule, read strictly.
fn read_sender_report(path: &Path) -> Result<SenderEntry, TrialFault> {
    let text = kplace::os::files::read_text_bounded(path, MAX_REPORT_BYTES, "sender's report")
        .map_err(|e| match e.is_not_found() {
            true => TrialFault::NoSenderReport(path.to_path_buf()),
            false => TrialFault::SenderReportUnreadable(e),
        })?;
    let report: SendFile = kplace::report::read_json(&text, &path.display().to_string())
        .map_err(TrialFault::SenderReport)?;
    Ok(SenderEntry {
        max_lag_ms: report.max_lag_ms,
        max_stall_ms: report.max_oversleep_ms,
        sent_per_s: Some(report.frames_per_s),
        involuntary_switches: report.involuntary_switches,
    })
}

/// `kplace send` of one trial's stream: `frames` frames at `rate` to `port` on loopback,
/// at the sweep's pacing tick and nice value.
fn sender_spec(
    ctx: &Trials<'_>,
    port: u16,
    shape: &SearchShape,
    rate: f64,
    frames: u64,
) -> SendChild {
    let pace = Pace::Rate {
        frames_per_s: rate,
        tick: Some(Duration::from_micros(ctx.config.sender_tick_us)),
    };
    let dest = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut spec = ctx.config.sender(shape, dest, pace, frames);
    spec.nice = Some(ctx.config.sender_nice);
    spec
}

/// `budget` in whole microseconds, at least one.
fn whole_us(budget: Duration) -> Duration {
    Duration::from_micros(u64::try_from(budget.as_micros()).unwrap_or(u64::MAX).max(1))
}

/// The ports `child` listens on, from its readiness file (one per pipeline), once every
/// pipeline takes packets; its stderr is drained in the background so it never blocks on a
/// full pipe, and is what the error says if it ends first.
pub(super) fn ready_ports(child: &mut Child, ready: &Path) -> Result<Vec<u16>, TrialFault> {
    let stderr = child.stderr.take();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let text = stderr.map_or_else(String::new, |stderr| {
            kplace::os::process::drain_tail(stderr, STDERR_TAIL)
        });
        let _ = tx.send(text);
    });
    match wait_ready(child, ready, READY_TIMEOUT) {
        Ok(sources) => Ok(sources.iter().map(|a| a.port()).collect()),
        Err(why) => {
            let _ = child.kill();
            let stderr = rx.recv_timeout(Duration::from_secs(5)).unwrap_or_default();
            Err(TrialFault::NotReady {
                why,
                stderr: stderr.trim().to_string(),
            })
        }
    }
}

/// How long a receiver may take to become ready (a GPU placement creates its context,
/// modules and plans first).
const READY_TIMEOUT: Duration = Duration::from_secs(300);

/// The most of a trial receiver's stderr kept for an error: its last 4 KiB.
const STDERR_TAIL: usize = 4096;

/// A report's `seconds` as a duration: none below zero (or NaN), and one too long for a
/// duration the longest there is (which fails the latency gate rather than panic).
fn seconds(seconds: f64) -> Duration {
    Duration::try_from_secs_f64(seconds.max(0.0)).unwrap_or(Duration::MAX)
}

fn measure(report: &RunReport, rate: f64, frames_sent: u64, budget: Duration) -> TrialMeasurement {
    let latency = &report.latency;
    TrialMeasurement {
        offered_rate: rate,
        frames_sent,
        frames_completed: report.frames,
        partial_frames: report.partial_frames,
        dropped_frames: report.dropped_frames,
        frames_failed_verification: report.verification.frames_failed,
        processed_rate: report.frames_per_s,
        post_frame_p99: seconds(latency.post_frame.p99_ms / 1e3),
        post_frame_trend: latency.post_frame_trend_ms_per_s / 1e3,
        window: seconds(report.wall_s),
        frames_over_budget: latency
            .post_frame
            .histogram
            .as_deref()
            .map_or(0, |h| frames_over(h, budget).unwrap_or(frames_sent)),
        frames_timed: latency.post_frame.count,
    }
}

/// How many of a base64 HdrHistogram's latencies (ns) exceed `budget` (each bucket judged at
/// its median value); `None` when the histogram cannot be decoded (the caller then counts
/// every frame as over: fails closed).
pub(super) fn frames_over(histogram: &str, budget: Duration) -> Option<u64> {
    let h = crate::rate::gates::decode_histogram(histogram).ok()?;
    let budget_ns = u64::try_from(budget.as_nanos()).unwrap_or(u64::MAX);
    Some(
        h.iter_recorded()
            .filter(|v| h.median_equivalent(v.value_iterated_to()) > budget_ns)
            .map(|v| v.count_at_value())
            .sum(),
    )
}

/// The measurement of a trial none of whose pipelines ran.
fn nothing_measured(rate: f64, frames_sent: u64) -> TrialMeasurement {
    TrialMeasurement {
        offered_rate: rate,
        frames_sent,
        frames_completed: 0,
        partial_frames: 0,
        dropped_frames: 0,
        frames_failed_verification: 0,
        processed_rate: 0.0,
        post_frame_p99: Duration::ZERO,
        post_frame_trend: 0.0,
        window: Duration::ZERO,
        frames_over_budget: 0,
        frames_timed: 0,
    }
}

#[cfg(test)]
mod tests;

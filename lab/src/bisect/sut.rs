//! One trial of another receiver (`--sut-cmd`): the same sender, verifier and gates as
//! kplace's own trials, judged on the detections it writes and, when it writes completion
//! times, on its post-frame latency.

use std::fs;
use std::path::Path;
use std::process::Child;
use std::time::Duration;

use kplace::report::run::LatencyEntry;

use crate::rate::sweep::TrialLatency;
use crate::rate::sweep::{SUT_TRIAL_SCHEMA, SutTrialLatency, SutTrialReport};
use crate::rate::{Gates, LatencyBudget, TrialMeasurement, TrialRequest, judge, loss_ratio};

use super::trial::{frames_over, judge_sender, send};
use super::{SearchShape, TrialError, TrialFigures, TrialRun, Trials, failed};

/// One trial of another receiver, run by `command` with its placeholders replaced; judged by
/// verifying the detections file it writes. Without timestamps from the receiver, latency is
/// not measured and the processed rate is the offered rate scaled by the frames reported.
pub(super) fn sut_trial(
    ctx: &Trials<'_>,
    command: &str,
    shape: &SearchShape,
    request: &TrialRequest,
    dir: &Path,
    index: usize,
) -> Result<TrialRun, TrialError> {
    let config = ctx.config;
    let rate = request.load;
    let (warmup, frames, duration_s) = ctx.begin_trial(dir, request)?;
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .map(|a| a.port())
        .map_err(|e| TrialError::Spawn(format!("cannot pick a port: {e}")))?;
    let detections = dir.join(format!("trial-{index}.det"));
    let _ = fs::remove_file(&detections);
    // A SUT that takes {times} writes when it finished each frame; with the sender's times that
    // gives its post-frame latency, judged by the same gate as kplace's.
    let timed = command.contains("{times}");
    let done_times = dir.join(format!("trial-{index}.done.csv"));
    let _ = fs::remove_file(&done_times);
    // Paths go in shell-quoted, so that a results directory with spaces or quotes in its
    // name reaches the command as one word.
    let quoted = |path: &Path| {
        let text = path.display().to_string();
        shlex::try_quote(&text)
            .map(|q| q.into_owned())
            .map_err(|e| TrialError::Spawn(format!("cannot pass {text} to the shell: {e}")))
    };
    // The innermost two extents, by the radar's names for them (`{samples}`, `{chirps}`).
    let extent = |axis: usize| {
        shape
            .shape
            .extents()
            .get(axis)
            .map_or(String::new(), u64::to_string)
    };
    let text = command
        .replace("{port}", &port.to_string())
        .replace("{frames}", &frames.to_string())
        .replace("{cpi}", &shape.to_string())
        .replace("{shape}", &shape.to_string())
        .replace("{samples}", &extent(0))
        .replace("{chirps}", &extent(1))
        .replace("{detections}", &quoted(&detections)?)
        .replace("{times}", &quoted(&done_times)?);
    let log = fs::File::create(dir.join(format!("trial-{index}.log")))
        .map_err(|e| TrialError::Spawn(format!("cannot create a log in {}: {e}", dir.display())))?;
    let log_err = log
        .try_clone()
        .map_err(|e| TrialError::Spawn(e.to_string()))?;
    let mut sut = ctx
        .sut_command("sh")
        .args(["-c", &text])
        .stdout(log)
        .stderr(log_err)
        .spawn()
        .map_err(|e| TrialError::Spawn(format!("cannot start the system under test: {e}")))?;
    ctx.stop.add(sut.id());
    let finish = |sut: &mut Child, outcome: TrialRun| {
        let _ = sut.kill();
        let _ = sut.wait();
        ctx.stop.remove(sut.id());
        Ok(outcome)
    };
    if !wait_udp_listener(port, &mut sut) {
        return finish(
            &mut sut,
            failed(
                rate,
                duration_s,
                format!("the system under test never listened on port {port}"),
            ),
        );
    }
    let started = std::time::Instant::now();
    let send_times = timed.then(|| dir.join(format!("trial-{index}.sent.csv")));
    let send_report = dir.join(format!("trial-{index}.send.json"));
    let sender = match send(
        ctx,
        port,
        shape,
        rate,
        frames,
        send_times.as_deref(),
        &send_report,
    )? {
        Ok(sender) => sender,
        Err(why) => return finish(&mut sut, failed(rate, duration_s, why)),
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    // wait4, not try_wait: its rusage is the SUT's CPU time, its children's included.
    let exited = loop {
        match kplace::os::process::reap_with_usage(&sut) {
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
                duration_s,
                "the system under test did not exit within 30 s of the last packet".into(),
            ),
        );
    };
    ctx.stop.remove(sut.id());
    let verdict = match config.workload_request(shape, frames, |kind, request| {
        kind.judge_results(request, &detections)
            .map_err(|e| e.to_string())
    }) {
        Ok(v) => v.verification,
        Err(why) => return Ok(failed(rate, duration_s, why)),
    };
    let completed = frames.saturating_sub(verdict.frames_missing);
    let latency = match &send_times {
        Some(sent) => match sut_latency(sent, &done_times, warmup) {
            Ok(latency) => Some(latency),
            Err(why) => return Ok(failed(rate, duration_s, why)),
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
        frames_failed_verification: verdict.frames_failed,
        processed_rate: rate * completed as f64 / frames as f64,
        post_frame_p99: latency.as_ref().map_or(Duration::ZERO, |l| l.summary.p99),
        post_frame_trend: latency.as_ref().map_or(0.0, |l| l.trend),
        window,
        frames_over_budget: 0,
    };
    // Without the SUT's completion times there is no latency to judge.
    let gates = match latency {
        Some(_) => config.gates(shape),
        None => Gates {
            latency_budget: LatencyBudget::Fixed {
                bound: Duration::MAX,
            },
            ..config.gates(shape)
        },
    };
    let budget = gates.latency_budget.at(rate);
    let measurement = TrialMeasurement {
        frames_over_budget: latency
            .as_ref()
            .and_then(|l| l.summary.histogram.as_deref())
            .map_or(0, |h| frames_over(h, budget).unwrap_or(frames)),
        ..measurement
    };
    let verdict = judge(&measurement, &gates);
    let loss = loss_ratio(&measurement, &verdict);
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let cores_used = cpu.as_secs_f64() / ran.as_secs_f64().max(1e-9);
    let report = SutTrialReport {
        schema: SUT_TRIAL_SCHEMA.to_string(),
        frames_per_s: measurement.processed_rate,
        input_gbit_per_s: measurement.processed_rate * (shape.frame_bytes * 8) as f64 / 1e9,
        cores_used,
        latency: latency.as_ref().map(|l| SutTrialLatency {
            post_frame: LatencyEntry::from(&l.summary),
            post_frame_trend_ms_per_s: l.trend * 1e3,
        }),
    };
    // Beside the SUT's detections and log, as kplace's own trials leave their run report.
    let report_path = dir.join(format!("trial-{index}.json"));
    if let Ok(text) = serde_json::to_string(&report) {
        let _ = fs::write(&report_path, text);
    }
    let figures = TrialFigures {
        latency: latency.as_ref().map(|l| TrialLatency {
            p50_ms: ms(l.summary.p50),
            p99_ms: ms(l.summary.p99),
            p999_ms: ms(l.summary.p999),
            histogram: l.summary.histogram.clone(),
        }),
        stages: Vec::new(),
        cores_used: Some(cores_used),
    };
    let judgement = judge_sender(verdict, Some(&sender), rate, config.max_sender_lag_ms);
    Ok(TrialRun {
        rate,
        request: Some(*request),
        loss_ratio: judgement.verdict().map(|_| loss),
        judgement,
        duration_s,
        measurement: Some(measurement),
        figures: Some(figures),
        report_path: Some(report_path),
        sender: Some(sender),
    })
}

/// A SUT's post-frame latency over the measured frames (ids from `warmup` on).
struct SutLatency {
    summary: kplace::report::metrics::LatencySummary,
    /// Seconds of latency gained per second of run.
    trend: f64,
}

/// Post-frame latency from the sender's times (`frame_id,first_ns,last_ns`) and the SUT's
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
    let mut latency = kplace::report::metrics::Latency::new();
    let mut trend = kplace::report::metrics::Trend::default();
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

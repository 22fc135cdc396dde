//! One trial of another receiver (`--sut-cmd`): the same sender, verifier and gates as
//! kplace's own trials, judged on the detections it writes and, when it writes completion
//! times, on its post-frame latency.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use kplace::report::run::LatencyEntry;

use super::failure::TrialFault;
use crate::rate::sweep::TrialLatency;
use crate::rate::sweep::{SUT_TRIAL_SCHEMA, SenderEntry, SutTrialLatency, SutTrialReport};
use crate::rate::{Gates, LatencyBudget, TrialMeasurement, TrialRequest, judge, loss_ratio};

use super::trial::{frames_over, judge_sender, send};
use super::{SearchShape, TrialError, TrialFigures, TrialRun, Trials, failed};

/// How long another receiver has to exit after the last packet.
const EXIT_TIMEOUT: Duration = Duration::from_secs(30);

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
    let (warmup, frames, duration_s) = ctx.begin_trial(dir, request)?;
    let trial = SutTrial {
        ctx,
        shape,
        request: *request,
        warmup,
        frames,
        duration_s,
        // A SUT that takes {times} writes when it finished each frame; with the sender's
        // times that gives its post-frame latency, judged by the same gate as kplace's.
        files: SutFiles::fresh(dir, index, command.contains("{times}")),
    };
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .map(|a| a.port())
        .map_err(|e| TrialError::Spawn(format!("cannot pick a port: {e}")))?;
    let mut sut = trial.start(command, port)?;
    match trial.drive(&mut sut, port) {
        Ok(Ok(exited)) => Ok(trial.judged(exited)),
        Ok(Err(why)) => Ok(trial.abandoned(&mut sut, why.to_string())),
        Err(e) => {
            // The trial cannot go on (the sender could not start): the receiver ends with it.
            trial.end(&mut sut);
            Err(e)
        }
    }
}

/// The files of one trial of another receiver, in the trial's directory.
struct SutFiles {
    /// The directory.
    dir: PathBuf,
    /// The detections it writes (`{detections}`).
    detections: PathBuf,
    /// When it finished each frame (`{times}`), if it takes them.
    done_times: PathBuf,
    /// When the sender sent each frame, when the receiver writes its own times.
    sent_times: Option<PathBuf>,
    /// The sender's report.
    send_report: PathBuf,
    /// Its stdout and stderr.
    log: PathBuf,
    /// What was measured of it, as kplace's own trials leave their run report.
    report: PathBuf,
}

impl SutFiles {
    /// Trial `index`'s files in `dir`, with what a trial before it wrote there removed;
    /// `timed`: the receiver writes its completion times.
    fn fresh(dir: &Path, index: usize, timed: bool) -> SutFiles {
        let file = |suffix: &str| dir.join(format!("trial-{index}.{suffix}"));
        let files = SutFiles {
            dir: dir.to_path_buf(),
            detections: file("det"),
            done_times: file("done.csv"),
            sent_times: timed.then(|| file("sent.csv")),
            send_report: file("send.json"),
            log: file("log"),
            report: file("json"),
        };
        let _ = fs::remove_file(&files.detections);
        let _ = fs::remove_file(&files.done_times);
        files
    }
}

/// One trial of another receiver: what it was asked, and where its files go.
struct SutTrial<'a> {
    ctx: &'a Trials<'a>,
    shape: &'a SearchShape,
    request: TrialRequest,
    /// Warm-up frames, the first of `frames`.
    warmup: u64,
    /// Every frame sent.
    frames: u64,
    /// The measured window, s of stream.
    duration_s: f64,
    files: SutFiles,
}

/// What a receiver that ran the whole trial left to judge it by.
struct Exited {
    /// The sender's account of its schedule.
    sender: SenderEntry,
    /// The receiver's CPU time, its children's included.
    cpu: Duration,
    /// From the first packet sent to its exit.
    ran: Duration,
}

impl SutTrial<'_> {
    /// `command` with its placeholders replaced: paths shell-quoted, so that a results
    /// directory with spaces or quotes in its name reaches the command as one word.
    fn command_line(&self, command: &str, port: u16) -> Result<String, TrialError> {
        let quoted = |path: &Path| {
            let text = path.display().to_string();
            shlex::try_quote(&text)
                .map(|q| q.into_owned())
                .map_err(|e| TrialError::Spawn(format!("cannot pass {text} to the shell: {e}")))
        };
        let shape = self.shape.to_string();
        let extents = self.shape.shape.extents();
        let extent = |axis: usize| extents.get(axis).map_or(String::new(), u64::to_string);
        let mut words = vec![
            ("port".to_string(), port.to_string()),
            ("frames".to_string(), self.frames.to_string()),
            ("shape".to_string(), shape.clone()),
        ];
        words.extend((0..extents.len()).map(|axis| (format!("extent{axis}"), extent(axis))));
        // The workload's own words for them (the radar's `{cpi}`, `{samples}`, `{chirps}`).
        if let Some(kind) = &self.ctx.config.workload {
            let (whole, axes) = kind.shape_words();
            words.extend(whole.map(|word| (word.to_string(), shape.clone())));
            words.extend(
                axes.iter()
                    .enumerate()
                    .map(|(axis, word)| (word.to_string(), extent(axis))),
            );
        }
        // The paths last: a placeholder's name in a path is not a placeholder.
        words.push(("detections".into(), quoted(&self.files.detections)?));
        words.push(("times".into(), quoted(&self.files.done_times)?));
        Ok(words
            .into_iter()
            .fold(command.to_string(), |line, (word, value)| {
                line.replace(&format!("{{{word}}}"), &value)
            }))
    }

    /// Starts `command` for `port` in a shell confined to the SUT's CPUs, its output in the
    /// trial's log; the sweep's stop knows it from now on.
    fn start(&self, command: &str, port: u16) -> Result<Child, TrialError> {
        let text = self.command_line(command, port)?;
        let log = fs::File::create(&self.files.log).map_err(|e| {
            TrialError::Spawn(format!(
                "cannot create a log in {}: {e}",
                self.files.dir.display()
            ))
        })?;
        let log_err = log
            .try_clone()
            .map_err(|e| TrialError::Spawn(e.to_string()))?;
        let sut = self
            .ctx
            .sut_command("sh")
            .args(["-c", &text])
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(|e| TrialError::Spawn(format!("cannot start the system under test: {e}")))?;
        self.ctx.stop.add(sut.id());
        Ok(sut)
    }

    /// Once `sut` listens on `port`, sends it the trial's frames and waits for it to exit
    /// ([`EXIT_TIMEOUT`]); reaped, it is no longer the stop's. `Ok(Err)`: why the trial
    /// failed, `sut` still running.
    fn drive(&self, sut: &mut Child, port: u16) -> Result<Result<Exited, TrialFault>, TrialError> {
        if !wait_udp_listener(port, sut) {
            return Ok(Err(TrialFault::NeverListened(port)));
        }
        let started = Instant::now();
        let sender = match send(
            self.ctx,
            port,
            self.shape,
            self.request.load,
            self.frames,
            self.files.sent_times.as_deref(),
            &self.files.send_report,
        )? {
            Ok(sender) => sender,
            Err(why) => return Ok(Err(why)),
        };
        let deadline = Instant::now() + EXIT_TIMEOUT;
        // wait4, not try_wait: its rusage is the SUT's CPU time, its children's included.
        let exited = loop {
            match kplace::os::process::reap_with_usage(sut) {
                Ok(Some(cpu)) => break Some(cpu),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                _ => break None,
            }
        };
        let ran = started.elapsed();
        let Some(cpu) = exited else {
            return Ok(Err(TrialFault::NoExit(EXIT_TIMEOUT.as_secs())));
        };
        self.ctx.stop.remove(sut.id());
        Ok(Ok(Exited { sender, cpu, ran }))
    }

    /// Ends `sut`, which failed the trial for `why`.
    fn abandoned(&self, sut: &mut Child, why: String) -> TrialRun {
        self.end(sut);
        failed(self.request.load, self.duration_s, why)
    }

    /// Kills and reaps `sut`; the sweep's stop forgets it.
    fn end(&self, sut: &mut Child) {
        let _ = sut.kill();
        let _ = sut.wait();
        self.ctx.stop.remove(sut.id());
    }

    /// The trial judged on what the receiver that `exited` wrote, its report written beside
    /// its detections.
    fn judged(&self, exited: Exited) -> TrialRun {
        let (rate, duration_s) = (self.request.load, self.duration_s);
        let (measurement, latency, gates) = match self.measured() {
            Ok(measured) => measured,
            Err(why) => return failed(rate, duration_s, why.to_string()),
        };
        let verdict = judge(&measurement, &gates);
        let loss = loss_ratio(&measurement, &verdict);
        let cores_used = exited.cpu.as_secs_f64() / exited.ran.as_secs_f64().max(1e-9);
        self.write_report(&measurement, latency.as_ref(), cores_used);
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
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
        let max_lag_ms = self.ctx.config.max_sender_lag_ms;
        let judgement = judge_sender(verdict, Some(&exited.sender), rate, max_lag_ms);
        TrialRun {
            rate,
            request: Some(self.request),
            loss_ratio: judgement.verdict().map(|_| loss),
            judgement,
            duration_s,
            measurement: Some(measurement),
            figures: Some(figures),
            report_path: Some(self.files.report.clone()),
            sender: Some(exited.sender),
        }
    }

    /// What the receiver's detections and times say of the trial, and the gates it is judged
    /// by (without its completion times, no latency gate); `Err`: why they say nothing.
    fn measured(&self) -> Result<(TrialMeasurement, Option<SutLatency>, Gates), TrialFault> {
        let (config, shape) = (self.ctx.config, self.shape);
        let (rate, frames) = (self.request.load, self.frames);
        let verdict = config
            .workload_request(shape, frames, |kind, request| {
                kind.judge_results(request, &self.files.detections)
                    .map_err(|e| TrialFault::Kind(Box::new(e)))
            })?
            .verification;
        let completed = frames.saturating_sub(verdict.frames_missing);
        let latency = match &self.files.sent_times {
            Some(sent) => Some(sut_latency(sent, &self.files.done_times, self.warmup)?),
            None => None,
        };
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
            offered_rate: rate,
            frames_sent: frames,
            frames_completed: completed,
            partial_frames: 0,
            dropped_frames: 0,
            frames_failed_verification: verdict.frames_failed,
            processed_rate: rate * completed as f64 / frames as f64,
            post_frame_p99: latency.as_ref().map_or(Duration::ZERO, |l| l.summary.p99),
            post_frame_trend: latency.as_ref().map_or(0.0, |l| l.trend),
            window: Duration::from_secs_f64(frames as f64 / rate),
            frames_over_budget: latency
                .as_ref()
                .and_then(|l| l.summary.histogram.as_deref())
                .map_or(0, |h| frames_over(h, budget).unwrap_or(frames)),
            frames_timed: latency.as_ref().map_or(0, |l| l.summary.count),
        };
        Ok((measurement, latency, gates))
    }

    /// Writes what was measured of the receiver beside its detections and log, as kplace's
    /// own trials leave their run report (best effort: the results file has it too).
    fn write_report(
        &self,
        measurement: &TrialMeasurement,
        latency: Option<&SutLatency>,
        cores_used: f64,
    ) {
        let report = SutTrialReport {
            schema: SUT_TRIAL_SCHEMA.to_string(),
            frames_per_s: measurement.processed_rate,
            input_gbit_per_s: measurement.processed_rate * (self.shape.frame_bytes * 8) as f64
                / 1e9,
            cores_used,
            latency: latency.map(|l| SutTrialLatency {
                post_frame: LatencyEntry::from(&l.summary),
                post_frame_trend_ms_per_s: l.trend * 1e3,
            }),
        };
        if let Ok(text) = serde_json::to_string(&report) {
            let _ = fs::write(&self.files.report, text);
        }
    }
}

/// A SUT's post-frame latency over the measured frames (ids from `warmup` on).
struct SutLatency {
    summary: kplace::report::metrics::LatencySummary,
    /// Seconds of latency gained per second of run.
    trend: f64,
}

/// The most bytes a times file (the sender's, the system under test's) is read for: a line
/// of some 40 bytes per frame, for millions of frames.
const MAX_TIMES_BYTES: u64 = 256 << 20;

/// The most bytes of `/proc/net/udp` read: a line of 128 bytes per socket, for a machine's
/// hundreds of thousands of them.
const MAX_SOCKET_TABLE_BYTES: u64 = 64 << 20;

/// Post-frame latency from the sender's times (`frame_id,first_ns,last_ns`) and the SUT's
/// (`frame_id,done_ns`, CLOCK_MONOTONIC like the sender's; a header line is allowed): done
/// minus last packet sent, for every measured frame the SUT finished.
fn sut_latency(sent: &Path, done: &Path, warmup: u64) -> Result<SutLatency, TrialFault> {
    let read = |path: &Path, what: &'static str| {
        kplace::os::files::read_text_bounded(path, MAX_TIMES_BYTES, what).map_err(TrialFault::Times)
    };
    let mut last_sent = std::collections::HashMap::new();
    for line in read(sent, "sender's times")?.lines().skip(1) {
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
    for (n, line) in read(done, "system under test's times")?.lines().enumerate() {
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        let parsed = match f[..] {
            [id, done] => id.parse::<u64>().ok().zip(done.parse::<u64>().ok()),
            _ => None,
        };
        let Some((id, done_ns)) = parsed else {
            if n == 0 {
                continue; // a header
            }
            return Err(TrialFault::TimesLine {
                path: done.to_path_buf(),
                line: n + 1,
                got: kplace::os::files::excerpt(line).to_string(),
            });
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
            kplace::os::files::read_text_bounded(
                Path::new(f),
                MAX_SOCKET_TABLE_BYTES,
                "socket table",
            )
            .is_ok_and(|t| {
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

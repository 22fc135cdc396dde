//! A hog as a child process: started with its settings, stopped with a report.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use kplace::session::child::{self, ChildSpec};
use serde::{Deserialize, Serialize};

use super::gpu::GpuHogConfig;
use super::{CpuMode, HogError, HogEvent, HogLine};

/// How long [`Cotenant::start`] waits for the hog's `started` line (a GPU hog creates a
/// context and warms cuBLAS up first).
pub const START_TIMEOUT: Duration = Duration::from_secs(60);

/// How long [`Cotenant::stop`] waits after SIGTERM before SIGKILL.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(15);

/// The most bytes of the hog's stderr kept for a report.
const STDERR_TAIL: usize = 4096;

/// Which co-tenant to run beside a measurement, and how hard: the intensity recorded with
/// every result. Serializes as `{"kind": "gpu-hog", "gpu": 0, "size": 4096, "duty": 1.0,
/// "period_ms": 100}` or `{"kind": "cpu-hog", "threads": 8, "mode": "spin", "buffer_mib":
/// 256}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum CotenantSpec {
    /// `kplace hog gpu`: SGEMMs for `duty` of every `period_ms`.
    GpuHog {
        /// The device ordinal.
        gpu: u32,
        /// The matrices' side.
        size: usize,
        /// Fraction of each period spent in GEMMs, in [0, 1].
        duty: f64,
        /// The duty cycle's period in milliseconds.
        period_ms: u64,
    },
    /// `kplace hog cpu`: `threads` threads of `mode` load.
    CpuHog {
        /// Worker threads.
        threads: usize,
        /// Spin (cores) or membw (memory bandwidth).
        mode: CpuMode,
        /// Membw: the total buffer in MiB.
        buffer_mib: usize,
    },
}

impl CotenantSpec {
    /// The names [`parse`](Self::parse) accepts.
    pub const CHOICES: &'static str = "gpu-hog, cpu-hog, membw-hog or none";

    /// The co-tenant named `choice` at `intensity`, or `None` for `none`:
    /// - `gpu-hog`: the GPU hog on gpu:0 with 4096 x 4096 matrices; `intensity` is the duty
    ///   cycle, in [0, 1] (default 1).
    /// - `cpu-hog` / `membw-hog`: the CPU hog spinning / streaming 256 MiB; `intensity` is the
    ///   fraction of this machine's cores given threads, in (0, 1] (default 1: every core),
    ///   rounded, at least one thread.
    ///
    /// Errors name the accepted choices, or the intensity's range.
    pub fn parse(choice: &str, intensity: Option<f64>) -> Result<Option<CotenantSpec>, HogError> {
        let spec = match choice {
            "none" => return Ok(None),
            "gpu-hog" => {
                let duty = intensity.unwrap_or(1.0);
                if !(0.0..=1.0).contains(&duty) {
                    return Err(HogError::Invalid(format!(
                        "gpu-hog intensity (duty cycle) must be in [0, 1], got {duty}"
                    )));
                }
                CotenantSpec::GpuHog {
                    gpu: 0,
                    size: 4096,
                    duty,
                    period_ms: GpuHogConfig::DEFAULT_PERIOD.as_millis() as u64,
                }
            }
            "cpu-hog" | "membw-hog" => {
                let share = intensity.unwrap_or(1.0);
                if !(share > 0.0 && share <= 1.0) {
                    return Err(HogError::Invalid(format!(
                        "{choice} intensity (share of the cores) must be in (0, 1], got {share}"
                    )));
                }
                let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
                CotenantSpec::CpuHog {
                    threads: ((cores as f64 * share).round() as usize).max(1),
                    mode: if choice == "cpu-hog" {
                        CpuMode::Spin
                    } else {
                        CpuMode::Membw
                    },
                    buffer_mib: super::cpu::CpuHogConfig::DEFAULT_BUFFER_BYTES >> 20,
                }
            }
            other => {
                return Err(HogError::Invalid(format!(
                    "unknown co-tenant {other:?}: expected {}",
                    Self::CHOICES
                )));
            }
        };
        Ok(Some(spec))
    }

    /// The co-tenant's name: `gpu-hog`, `cpu-hog` (spin) or `membw-hog`.
    pub fn kind(&self) -> &'static str {
        match self {
            CotenantSpec::GpuHog { .. } => "gpu-hog",
            CotenantSpec::CpuHog {
                mode: CpuMode::Spin,
                ..
            } => "cpu-hog",
            CotenantSpec::CpuHog {
                mode: CpuMode::Membw,
                ..
            } => "membw-hog",
        }
    }

    /// The child spec that runs this co-tenant until stopped, reporting every second, and
    /// stopping by itself when the process `parent_pid` is gone.
    pub fn child(&self, parent_pid: Option<u32>) -> HogChild {
        HogChild {
            hog: self.clone(),
            report_every: Duration::from_secs(1),
            parent_pid,
        }
    }
}

/// `kplace hog`, as a library starts it ([`kplace::session::child`]): which hog, how often it reports,
/// and the process whose death stops it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HogChild {
    /// Which hog, and how hard.
    pub hog: CotenantSpec,
    /// The time between two report lines.
    pub report_every: Duration,
    /// The pid of the process that started it: the hog stops when its parent is no longer
    /// that process.
    pub parent_pid: Option<u32>,
}

impl ChildSpec for HogChild {
    const KIND: &'static str = "hog";
}

/// What a co-tenant did, from its start to its stop.
#[derive(Clone, Debug, Serialize)]
pub struct CotenantReport {
    /// `gpu-hog`, `cpu-hog` or `membw-hog`.
    pub kind: String,
    /// The settings it ran with.
    pub intensity: CotenantSpec,
    /// Its process id.
    pub pid: u32,
    /// The command line, program first.
    pub command: Vec<String>,
    /// Seconds from its `started` line to the stop request.
    pub ran_s: f64,
    /// Its `started` line.
    pub started: HogLine,
    /// Its `report` lines, in order.
    pub reports: Vec<HogLine>,
    /// Its `summary` line: the achieved rate over the whole run; `None` when it ended without
    /// one (killed after [`STOP_TIMEOUT`], or crashed).
    pub summary: Option<HogLine>,
    /// How it ended, e.g. `exit status: 0` or `signal: 9 (SIGKILL)`.
    pub exit: String,
    /// Whether it ended by itself after SIGTERM, with status 0 and a summary line.
    pub clean: bool,
    /// The end of what it wrote to stderr (empty for a quiet hog).
    pub stderr: String,
}

/// A hog running as a child process (`kplace hog ...`). Dropping it without [`stop`] kills the
/// hog (SIGKILL) and waits for it, so no hog outlives its owner by accident.
///
/// [`stop`]: Cotenant::stop
#[derive(Debug)]
pub struct Cotenant {
    spec: CotenantSpec,
    command: Vec<String>,
    child: Option<Child>,
    lines: Receiver<HogLine>,
    stdout: Option<JoinHandle<()>>,
    stderr: Option<JoinHandle<String>>,
    started: HogLine,
    started_at: Instant,
}

impl Cotenant {
    /// Starts `spec` as `<this executable> hog ...` (the `kplace` binary's own path), and waits
    /// until the hog's `started` line says its load is running. See [`start_with`].
    ///
    /// [`start_with`]: Cotenant::start_with
    pub fn start(spec: &CotenantSpec) -> Result<Cotenant, HogError> {
        let exe = std::env::current_exe().map_err(|source| HogError::Os {
            what: "cannot find the kplace executable".into(),
            source,
        })?;
        Cotenant::start_with(&exe, spec, START_TIMEOUT)
    }

    /// Starts `spec` with the `kplace` binary at `exe`, waiting up to `timeout` for its
    /// `started` line. The hog stops by itself when this process dies: call this from a thread
    /// that lives as long as the hog should (the main thread, say), because Linux delivers the
    /// parent-death signal when the *thread* that started the child exits.
    ///
    /// Errors when the process cannot be spawned, or ends or stays silent before its `started`
    /// line; the error carries the hog's stderr (e.g. "no CUDA driver found ..."), and the hog
    /// is killed and reaped.
    pub fn start_with(
        exe: &Path,
        spec: &CotenantSpec,
        timeout: Duration,
    ) -> Result<Cotenant, HogError> {
        let fail = |reason: String| HogError::Cotenant {
            kind: spec.kind().into(),
            reason,
        };
        let args =
            child::args(&spec.child(Some(std::process::id()))).map_err(|e| fail(e.to_string()))?;
        let mut command = vec![exe.display().to_string()];
        command.extend(args.iter().cloned());
        let mut child = Command::new(exe)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| fail(format!("cannot start {}: {e}", exe.display())))?;
        let (tx, lines) = mpsc::channel();
        let stdout = child.stdout.take().map(|out| {
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines() {
                    let Ok(line) = line else { break };
                    // Only the hog's JSON lines matter; anything else is ignored.
                    if let Ok(parsed) = serde_json::from_str::<HogLine>(&line)
                        && tx.send(parsed).is_err()
                    {
                        break;
                    }
                }
            })
        });
        let stderr = child.stderr.take().map(|err| {
            std::thread::spawn(move || {
                kplace::os::process::drain_tail(err, STDERR_TAIL)
                    .trim_end()
                    .to_string()
            })
        });
        let mut cotenant = Cotenant {
            spec: spec.clone(),
            command,
            child: Some(child),
            lines,
            stdout,
            stderr,
            started: HogLine::new(super::HogKind::Cpu, HogEvent::Started, 0.0),
            started_at: Instant::now(),
        };
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match cotenant.lines.recv_timeout(left) {
                Ok(line) if line.event == HogEvent::Started => {
                    cotenant.started = line;
                    cotenant.started_at = Instant::now();
                    return Ok(cotenant);
                }
                Ok(_) => continue,
                Err(RecvTimeoutError::Timeout) => {
                    let (exit, stderr) = cotenant.kill_and_reap();
                    return Err(fail(format!(
                        "no started line within {:.0} s ({exit}){}",
                        timeout.as_secs_f64(),
                        stderr_suffix(&stderr)
                    )));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let (exit, stderr) = cotenant.kill_and_reap();
                    return Err(fail(format!(
                        "ended before it started ({exit}){}",
                        stderr_suffix(&stderr)
                    )));
                }
            }
        }
    }

    /// The hog's settings.
    pub fn spec(&self) -> &CotenantSpec {
        &self.spec
    }

    /// The hog's process id (0 once reaped, which only `stop` and drop do).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Stops the hog: SIGTERM, then up to [`STOP_TIMEOUT`] for it to print its summary and
    /// exit, SIGKILL after that. Returns every line it printed and how it ended; errors only
    /// when waiting for the process fails.
    pub fn stop(mut self) -> Result<CotenantReport, HogError> {
        let ran_s = self.started_at.elapsed().as_secs_f64();
        let Some(mut child) = self.child.take() else {
            return Err(HogError::Cotenant {
                kind: self.spec.kind().into(),
                reason: "already reaped".into(),
            });
        };
        let pid = child.id();
        // Not yet reaped, so the pid is still the child's own.
        let _ = kplace::os::process::terminate(child.id());
        let deadline = Instant::now() + STOP_TIMEOUT;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Ok(None) => {
                    let _ = child.kill();
                    break child.wait().map_err(|source| HogError::Os {
                        what: format!("cannot wait for co-tenant {pid}"),
                        source,
                    })?;
                }
                Err(source) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(HogError::Os {
                        what: format!("cannot wait for co-tenant {pid}"),
                        source,
                    });
                }
            }
        };
        let stderr = self.join_readers();
        let mut reports = Vec::new();
        let mut summary = None;
        for line in self.lines.try_iter() {
            match line.event {
                HogEvent::Report => reports.push(line),
                HogEvent::Summary => summary = Some(line),
                HogEvent::Started => {}
            }
        }
        let clean = status.success() && summary.is_some();
        Ok(CotenantReport {
            kind: self.spec.kind().into(),
            intensity: self.spec.clone(),
            pid,
            command: std::mem::take(&mut self.command),
            ran_s,
            started: self.started.clone(),
            reports,
            summary,
            exit: describe_exit(status),
            clean,
            stderr,
        })
    }

    /// Joins the output readers (once the process has exited); returns the stderr tail.
    fn join_readers(&mut self) -> String {
        if let Some(handle) = self.stdout.take() {
            let _ = handle.join();
        }
        self.stderr
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }

    /// SIGKILL, reap, join the readers; returns how it ended and its stderr tail.
    fn kill_and_reap(&mut self) -> (String, String) {
        let exit = match self.child.take() {
            Some(mut child) => {
                let _ = child.kill();
                match child.wait() {
                    Ok(status) => describe_exit(status),
                    Err(e) => format!("cannot wait: {e}"),
                }
            }
            None => "already reaped".into(),
        };
        (exit, self.join_readers())
    }
}

impl Drop for Cotenant {
    fn drop(&mut self) {
        if self.child.is_some() {
            let _ = self.kill_and_reap();
        }
    }
}

fn describe_exit(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status.signal() {
        Some(sig) => format!("signal: {sig}"),
        None => status.to_string(),
    }
}

fn stderr_suffix(stderr: &str) -> String {
    if stderr.is_empty() {
        String::new()
    } else {
        format!(": {stderr}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_parse_with_their_intensity() {
        assert_eq!(CotenantSpec::parse("none", None).expect("none"), None);
        let gpu = CotenantSpec::parse("gpu-hog", Some(0.25))
            .expect("valid")
            .expect("a hog");
        assert_eq!(
            gpu,
            CotenantSpec::GpuHog {
                gpu: 0,
                size: 4096,
                duty: 0.25,
                period_ms: 100
            }
        );
        assert_eq!(gpu.kind(), "gpu-hog");
        assert_eq!(
            serde_json::to_value(&gpu).expect("json"),
            serde_json::json!({"kind": "gpu-hog", "gpu": 0, "size": 4096, "duty": 0.25, "period_ms": 100})
        );
        let [sub, kind, json] = child::args(&gpu.child(Some(7))).expect("a spec");
        assert_eq!([sub.as_str(), kind.as_str()], [child::SUBCOMMAND, "hog"]);
        assert_eq!(
            child::parse::<HogChild>(&json).expect("read back"),
            HogChild {
                hog: gpu.clone(),
                report_every: Duration::from_secs(1),
                parent_pid: Some(7)
            }
        );

        let cpu = CotenantSpec::parse("membw-hog", Some(0.01))
            .expect("valid")
            .expect("a hog");
        assert!(
            matches!(
                cpu,
                CotenantSpec::CpuHog {
                    threads: 1,
                    mode: CpuMode::Membw,
                    ..
                }
            ),
            "{cpu:?}"
        );
        assert_eq!(cpu.kind(), "membw-hog");

        for (choice, intensity) in [("gpu-hog", 1.5), ("cpu-hog", 0.0), ("cpu-hog", f64::NAN)] {
            assert!(CotenantSpec::parse(choice, Some(intensity)).is_err());
        }
        let err = CotenantSpec::parse("disk-hog", None).expect_err("unknown");
        assert!(err.to_string().contains("gpu-hog, cpu-hog"), "{err}");
    }
}

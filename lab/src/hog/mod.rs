//! Co-tenants: processes that load the machine beside a run, so a measurement can say what a
//! placement sustains when it does not have the GPU or the CPUs to itself.
//!
//! - [`gpu`]: a cuBLAS SGEMM loop on one GPU with an adjustable duty cycle, reporting its own
//!   TFLOP/s.
//! - [`cpu`]: spinning threads, or threads streaming through buffers much larger than the
//!   last-level cache (a memory-bandwidth hog), reporting iterations/s or GB/s.
//! - [`Cotenant`]: a hog started as a child process (`kplace hog ...`) and stopped with a
//!   report, for `kplace bisect-rate --cotenant`.
//!
//! # Output
//! A hog writes one JSON object per line on stdout (a [`HogLine`]): one `started` line once
//! its load is running, a `report` line every report interval with the rate achieved over that
//! interval, and one `summary` line with the rate over the whole run and why it stopped.
//! Nothing else goes to stdout; diagnostics go to stderr.
//!
//! # Stopping
//! A hog stops at the end of `--seconds`, on SIGINT, SIGTERM or SIGHUP, and when its parent
//! process dies (see [`stop_on_signal_or_parent_death`]); in each case it finishes its current
//! step (at most a few milliseconds of work), frees what it holds and prints the summary line.

pub mod cpu;
pub mod gpu;

mod cotenant;

pub use cotenant::{Cotenant, CotenantReport, CotenantSpec, HogChild, START_TIMEOUT, STOP_TIMEOUT};

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use kplace::cuda::GpuError;
use kplace::os::process::parent_pid;

/// Which hog wrote a [`HogLine`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HogKind {
    /// The GPU hog ([`gpu`]).
    Gpu,
    /// The CPU hog ([`cpu`]).
    Cpu,
}

/// What a [`HogLine`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HogEvent {
    /// The load is running (for the GPU hog: buffers allocated, cuBLAS warmed up and
    /// calibrated). Printed once, first.
    Started,
    /// The rate over the last report interval.
    Report,
    /// The rate over the whole run, and why it ended. Printed once, last.
    Summary,
}

/// Why a hog stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// `--seconds` elapsed.
    Time,
    /// SIGINT, SIGTERM or SIGHUP.
    Signal,
    /// The parent process died.
    Parent,
}

/// The CPU hog's load.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum CpuMode {
    /// Each thread runs a chain of dependent integer multiply-adds: takes cores, not memory.
    Spin,
    /// Each thread reads and writes its share of a buffer much larger than the last-level
    /// cache, over and over: takes memory bandwidth (and the cores doing it).
    Membw,
}

impl CpuMode {
    /// The name used on the command line and in JSON: `spin` or `membw`.
    pub fn as_str(self) -> &'static str {
        match self {
            CpuMode::Spin => "spin",
            CpuMode::Membw => "membw",
        }
    }
}

/// One line of a hog's output (see the [module docs](self)). Fields that do not apply to the
/// hog or the event are `None` and left out of the JSON.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HogLine {
    /// Which hog.
    pub hog: HogKind,
    /// What this line reports.
    pub event: HogEvent,
    /// Seconds covered: the report interval, the whole run for the summary, the time the hog
    /// took to get its load running for `started`.
    pub seconds: f64,
    /// GPU: TFLOP/s achieved over `seconds` of wall time (sleeps included): the load imposed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tflops: Option<f64>,
    /// GPU: TFLOP/s while busy (sleeps excluded): what the GPU gave the hog.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_tflops: Option<f64>,
    /// GPU: SGEMMs completed in `seconds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gemms: Option<u64>,
    /// GPU: the duty cycle asked for, in [0, 1].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duty: Option<f64>,
    /// GPU: the matrices' side (n of n x n).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<usize>,
    /// GPU: the device ordinal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<u32>,
    /// CPU: the load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<CpuMode>,
    /// CPU: threads running the load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
    /// CPU spin: multiply-add iterations per second, all threads together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iters_per_s: Option<f64>,
    /// CPU membw: GB/s (1e9 bytes) read plus written, all threads together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gb_per_s: Option<f64>,
    /// Summary only: why the hog stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<StopReason>,
}

impl HogLine {
    /// A line with every optional field empty.
    pub fn new(hog: HogKind, event: HogEvent, seconds: f64) -> HogLine {
        HogLine {
            hog,
            event,
            seconds,
            tflops: None,
            busy_tflops: None,
            gemms: None,
            duty: None,
            size: None,
            gpu: None,
            mode: None,
            threads: None,
            iters_per_s: None,
            gb_per_s: None,
            stopped_by: None,
        }
    }

    /// The line's headline rate: TFLOP/s for the GPU hog, iterations/s or GB/s for the CPU
    /// hog; `None` for a `started` line.
    pub fn rate(&self) -> Option<f64> {
        self.tflops.or(self.iters_per_s).or(self.gb_per_s)
    }

    /// The line as one line of JSON (no newline). Never fails: every field is plain data
    /// (a non-finite rate, which the hogs never produce, would print as `null`).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

/// Why a hog, or a co-tenant, could not run.
#[derive(Debug, thiserror::Error)]
pub enum HogError {
    /// A setting out of range (bad input: the CLI exits 2).
    #[error("invalid hog setting: {0}")]
    Invalid(String),
    /// The GPU could not be opened or used: no driver, no such device, a failed driver call.
    #[error(transparent)]
    Gpu(#[from] GpuError),
    /// libcublas cannot be loaded.
    #[error("cuBLAS not found: {0}")]
    NoCublas(String),
    /// A cuBLAS call failed.
    #[error("gpu:{gpu}: {call} failed: {status}")]
    Cublas {
        /// The device ordinal.
        gpu: u32,
        /// The call, with its key arguments.
        call: String,
        /// cuBLAS's status name.
        status: String,
    },
    /// An operating-system call failed (threads, signals, memory).
    #[error("{what}: {source}")]
    Os {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// A co-tenant process failed to start, ended early, or could not be stopped.
    #[error("co-tenant {kind}: {reason}")]
    Cotenant {
        /// `gpu-hog`, `cpu-hog` or `membw-hog`.
        kind: String,
        /// What went wrong, with the hog's own stderr when it said something.
        reason: String,
    },
}

/// A stop request shared between signal handlers, the parent watch and a hog's loops. The
/// first reason given is kept.
#[derive(Debug, Default)]
pub struct StopFlag(AtomicU8);

impl StopFlag {
    /// A flag not yet set.
    pub fn new() -> StopFlag {
        StopFlag(AtomicU8::new(0))
    }

    /// Asks the hog to stop for `why`; a later call does not change the reason.
    pub fn stop(&self, why: StopReason) {
        let code = match why {
            StopReason::Time => 1,
            StopReason::Signal => 2,
            StopReason::Parent => 3,
        };
        let _ = self
            .0
            .compare_exchange(0, code, Ordering::SeqCst, Ordering::SeqCst);
    }

    /// Why a stop was asked for, or `None` while the hog should run.
    pub fn reason(&self) -> Option<StopReason> {
        match self.0.load(Ordering::SeqCst) {
            0 => None,
            1 => Some(StopReason::Time),
            2 => Some(StopReason::Signal),
            _ => Some(StopReason::Parent),
        }
    }

    /// Whether a stop was asked for.
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed) != 0
    }
}

/// How often the parent watch polls `getppid()`.
const PARENT_POLL: Duration = Duration::from_millis(100);

/// Makes this process stop (through the returned flag) on SIGINT, SIGTERM or SIGHUP, and when
/// its parent dies: Linux's `PR_SET_PDEATHSIG` delivers SIGTERM then, and a thread polling
/// `getppid()` every 100 ms catches what that misses (a parent that died before the call).
/// Linux sends the death signal when the *thread* that forked this process exits, even if the
/// parent process lives on: see [`Cotenant::start`]. `expected_parent` is
/// the pid the parent had when it started this process (`--parent-pid`), so a parent that
/// died before this call is noticed at once; `None` takes the current parent.
///
/// A second signal of the same kind ends the process at once, without a summary
/// ([`kplace::interrupt`]).
/// Call once per process: the signal handler can be installed only once.
pub fn stop_on_signal_or_parent_death(
    expected_parent: Option<u32>,
) -> Result<Arc<StopFlag>, HogError> {
    let stop = Arc::new(StopFlag::new());
    let parent = expected_parent.unwrap_or_else(parent_pid);
    {
        let stop = Arc::clone(&stop);
        kplace::interrupt::install()
            .and_then(|()| {
                kplace::interrupt::on_request(move |_| {
                    // PR_SET_PDEATHSIG arrives as SIGTERM: tell it apart by the parent being
                    // gone.
                    let why = if parent_pid() != parent {
                        StopReason::Parent
                    } else {
                        StopReason::Signal
                    };
                    stop.stop(why);
                })
            })
            .map_err(|source| HogError::Os {
                what: "cannot install the signal handler".into(),
                source,
            })?;
    }
    kplace::os::process::term_on_parent_death().map_err(|source| HogError::Os {
        what: "prctl(PR_SET_PDEATHSIG)".into(),
        source,
    })?;
    if parent_pid() != parent {
        stop.stop(StopReason::Parent);
    }
    let watch = Arc::clone(&stop);
    std::thread::Builder::new()
        .name("hog-parent-watch".into())
        .spawn(move || {
            while !watch.is_set() {
                std::thread::sleep(PARENT_POLL);
                if parent_pid() != parent {
                    watch.stop(StopReason::Parent);
                }
            }
        })
        .map_err(|source| HogError::Os {
            what: "cannot start the parent-watch thread".into(),
            source,
        })?;
    Ok(stop)
}

/// Sleeps until `until` or until `stop` is set, whichever comes first, waking every 10 ms at
/// most to look. Returns whether `stop` is set.
pub(crate) fn sleep_until(until: Instant, stop: &StopFlag) -> bool {
    const SLICE: Duration = Duration::from_millis(10);
    loop {
        if stop.is_set() {
            return true;
        }
        let now = Instant::now();
        if now >= until {
            return false;
        }
        std::thread::sleep((until - now).min(SLICE));
    }
}

/// The longest duration a hog accepts (about 31 years): deadlines stay far from `Instant`'s
/// overflow.
const MAX_SECONDS: f64 = 1e9;

/// `seconds` as a duration, or an error naming `what` for a negative, non-finite or absurdly
/// large value.
pub(crate) fn duration_of(what: &str, seconds: f64) -> Result<Duration, HogError> {
    if !(0.0..=MAX_SECONDS).contains(&seconds) {
        return Err(HogError::Invalid(format!(
            "{what} must be 0 to {MAX_SECONDS:e} seconds, got {seconds}"
        )));
    }
    Duration::try_from_secs_f64(seconds).map_err(|_| {
        HogError::Invalid(format!("{what} must be a number of seconds, got {seconds}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_stop_reason_is_kept() {
        let flag = StopFlag::new();
        assert!(!flag.is_set());
        assert_eq!(flag.reason(), None);
        flag.stop(StopReason::Parent);
        flag.stop(StopReason::Signal);
        assert!(flag.is_set());
        assert_eq!(flag.reason(), Some(StopReason::Parent));
    }

    #[test]
    fn lines_round_trip_through_json_and_leave_out_empty_fields() {
        let mut line = HogLine::new(HogKind::Gpu, HogEvent::Report, 1.0);
        line.tflops = Some(42.5);
        line.duty = Some(0.5);
        line.size = Some(4096);
        let text = line.to_json();
        assert_eq!(
            text,
            r#"{"hog":"gpu","event":"report","seconds":1.0,"tflops":42.5,"duty":0.5,"size":4096}"#
        );
        let back: HogLine = serde_json::from_str(&text).expect("parses");
        assert_eq!(back, line);
        assert_eq!(back.rate(), Some(42.5));
    }

    #[test]
    fn durations_reject_negative_and_non_finite_seconds() {
        assert!(duration_of("--seconds", -1.0).is_err());
        assert!(duration_of("--seconds", f64::NAN).is_err());
        assert!(duration_of("--seconds", 1e300).is_err());
        assert_eq!(
            duration_of("--seconds", 0.25).ok(),
            Some(Duration::from_millis(250))
        );
    }
}

//! The background sampler: one thread reading NVML between [`Sampler::start`] and
//! [`Sampler::stop`].

use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use super::nvml::sample_until_stopped;
use super::{GpuNow, MIN_INTERVAL, Telemetry};
use crate::devices::init_nvml;
use kplace_core::cuda::probe::panic_text;

/// A background sampler of GPU telemetry; see the [module](super) for its guarantees. Dropping
/// it without [`stop`](Self::stop) ends its thread at its next wake-up, unjoined.
#[derive(Debug)]
pub struct Sampler {
    state: State,
    /// Each device as the thread last read it.
    latest: Arc<Mutex<Vec<GpuNow>>>,
}

#[derive(Debug)]
enum State {
    /// No thread: the answer is known.
    Done(Telemetry),
    Running {
        /// Dropped to stop the thread.
        stop: Sender<()>,
        thread: JoinHandle<Telemetry>,
        interval: Duration,
    },
}

impl Sampler {
    /// Starts sampling the CUDA devices `ordinals` (duplicates ignored) every `interval`
    /// (at least [`MIN_INTERVAL`]; [`DEFAULT_INTERVAL`](super::DEFAULT_INTERVAL) is the usual choice), the first sample
    /// at once, on one background thread. Never panics and never fails: without NVML, with no
    /// ordinals, or if the thread cannot be spawned, the sampler holds no thread and
    /// [`stop`](Self::stop) says why. Blocks only for NVML's initialisation; mapping ordinals
    /// to devices (which may initialise the CUDA driver) happens on the thread.
    pub fn start(ordinals: &[u32], interval: Duration) -> Sampler {
        let interval = interval.max(MIN_INTERVAL);
        let mut distinct: Vec<u32> = Vec::with_capacity(ordinals.len());
        for &o in ordinals {
            if !distinct.contains(&o) {
                distinct.push(o);
            }
        }
        let latest = Arc::new(Mutex::new(Vec::new()));
        let done = |reason: String| Sampler {
            state: State::Done(Telemetry {
                interval_ms: interval.as_secs_f64() * 1e3,
                ..Telemetry::unavailable(reason)
            }),
            latest: Arc::clone(&latest),
        };
        if distinct.is_empty() {
            return done("no GPU to sample".into());
        }
        let nvml = match init_nvml() {
            Ok(nvml) => nvml,
            Err(e) => return done(format!("NVML not available: {e}")),
        };
        let (stop, stopped) = mpsc::channel();
        let shared = Arc::clone(&latest);
        let spawned = thread::Builder::new()
            .name("kplace-telemetry".into())
            .spawn(move || sample_until_stopped(nvml, distinct, interval, stopped, &shared));
        match spawned {
            Ok(thread) => Sampler {
                state: State::Running {
                    stop,
                    thread,
                    interval,
                },
                latest,
            },
            Err(e) => done(format!("telemetry thread not started: {e}")),
        }
    }

    /// Each device the sampler reads, as its last pass read it (one entry per device found,
    /// in ordinal order); empty before the first pass and without NVML.
    pub fn latest(&self) -> Vec<GpuNow> {
        self.latest
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Stops sampling and returns the summary. Returns as soon as the thread ends its current
    /// pass (it does not wait out the interval); called very soon after `start`, it also waits
    /// for the thread's one-off device lookup (which may initialise the CUDA driver) and first
    /// pass, so every started sampler has at least one sample per device found. Never panics:
    /// a panic on the thread becomes `available: false` with the panic's message.
    pub fn stop(self) -> Telemetry {
        match self.state {
            State::Done(telemetry) => telemetry,
            State::Running {
                stop,
                thread,
                interval,
            } => {
                drop(stop);
                thread.join().unwrap_or_else(|panic| Telemetry {
                    interval_ms: interval.as_secs_f64() * 1e3,
                    ..Telemetry::unavailable(format!(
                        "telemetry thread panicked: {}",
                        panic_text(&*panic)
                    ))
                })
            }
        }
    }
}

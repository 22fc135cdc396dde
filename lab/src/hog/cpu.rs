//! The CPU co-tenant: threads that take cores ([`CpuMode::Spin`]) or memory bandwidth
//! ([`CpuMode::Membw`]).
//!
//! # What it guarantees
//! - Every worker checks the stop request at least every ~1 ms of work (spin: every 2^16
//!   iterations; membw: every 1 MiB pass over a slice), so a stop takes effect within a few
//!   milliseconds plus the time to join the threads.
//! - Rates are counted by the workers and sampled by the calling thread, which only sleeps:
//!   the reported rate is the work done in the interval divided by the interval's wall time.
//! - Membw buffers are allocated and written once before `started` is printed, so the first
//!   report already measures streaming, not page faults.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use kplace::plan::memory::MemoryAvailable;

use super::{
    CpuMode, HogError, HogEvent, HogKind, HogLine, StopFlag, StopReason, duration_of, sleep_until,
};

/// Iterations of the spin loop between two looks at the stop request.
const SPIN_CHUNK: u64 = 1 << 16;

/// Bytes of the membw buffer streamed between two looks at the stop request.
const MEMBW_CHUNK: usize = 1 << 20;

/// What the CPU hog runs.
#[derive(Clone, Debug, PartialEq)]
pub struct CpuHogConfig {
    /// Worker threads (at least 1).
    pub threads: usize,
    /// The load.
    pub mode: CpuMode,
    /// Membw: the total buffer, split evenly between the threads; should be several times the
    /// last-level cache. Ignored by spin.
    pub buffer_bytes: usize,
    /// Stop after this many seconds; `None` runs until stopped.
    pub seconds: Option<f64>,
    /// Seconds between two `report` lines (> 0).
    pub report_every_s: f64,
}

impl CpuHogConfig {
    /// The default membw buffer: 256 MiB in all, beyond any current server's last-level cache
    /// per socket.
    pub const DEFAULT_BUFFER_BYTES: usize = 256 << 20;

    /// Threads per core this process may use, at most: enough to oversubscribe every core
    /// several times over, far short of exhausting the system's threads.
    pub const MAX_THREADS_PER_CORE: usize = 4;

    fn validate(&self) -> Result<(Option<Duration>, Duration), HogError> {
        if self.threads == 0 {
            return Err(HogError::Invalid("--threads must be at least 1".into()));
        }
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let most = Self::MAX_THREADS_PER_CORE * cores;
        if self.threads > most {
            return Err(HogError::Invalid(format!(
                "--threads {} is more than {most} ({} per core, {cores} cores this process may use)",
                self.threads,
                Self::MAX_THREADS_PER_CORE
            )));
        }
        if self.mode == CpuMode::Membw
            && let Some(host) = MemoryAvailable::probe().host
            && self.buffer_bytes as u64 > host.bytes / 2
        {
            return Err(HogError::Invalid(format!(
                "the membw buffer of {} MiB is more than half of the {} MiB of memory available ({}): choose a smaller --buffer-mib",
                self.buffer_bytes >> 20,
                host.bytes >> 20,
                host.measured
            )));
        }
        if self.mode == CpuMode::Membw && self.buffer_bytes < self.threads * MEMBW_CHUNK {
            return Err(HogError::Invalid(format!(
                "the membw buffer ({} bytes) must hold at least 1 MiB per thread ({} threads)",
                self.buffer_bytes, self.threads
            )));
        }
        let run = self
            .seconds
            .map(|s| duration_of("--duration", s))
            .transpose()?;
        let every = duration_of("--report-every", self.report_every_s)?;
        if every.is_zero() {
            return Err(HogError::Invalid(
                "--report-every must be longer than zero".into(),
            ));
        }
        Ok((run, every))
    }
}

/// Runs the CPU hog until `config.seconds` pass or `stop` is set, calling `emit` with the
/// `started` line, a `report` line every `config.report_every_s`, and returning the `summary`
/// line (which it does not emit). Errors only for an invalid config or a thread that cannot be
/// started (then no line is emitted).
pub fn run(
    config: &CpuHogConfig,
    stop: &StopFlag,
    emit: &mut dyn FnMut(&HogLine),
) -> Result<HogLine, HogError> {
    let (run_for, every) = config.validate()?;
    let counters: Vec<AtomicU64> = (0..config.threads).map(|_| AtomicU64::new(0)).collect();
    let done = AtomicBool::new(false);
    let per_thread = (config.buffer_bytes / config.threads / 8).max(MEMBW_CHUNK / 8);
    let line = |event: HogEvent, seconds: f64, amount: u64| {
        let mut l = HogLine::new(HogKind::Cpu, event, seconds);
        l.mode = Some(config.mode);
        l.threads = Some(config.threads);
        if event != HogEvent::Started {
            let rate = if seconds > 0.0 {
                amount as f64 / seconds
            } else {
                0.0
            };
            match config.mode {
                CpuMode::Spin => l.iters_per_s = Some(rate),
                CpuMode::Membw => l.gb_per_s = Some(rate / 1e9),
            }
        }
        l
    };
    let began = Instant::now();
    let ready = AtomicU64::new(0);
    std::thread::scope(|scope| -> Result<HogLine, HogError> {
        let mut spawned = Vec::with_capacity(config.threads);
        for (i, counter) in counters.iter().enumerate() {
            let (done, ready) = (&done, &ready);
            let worker = move || match config.mode {
                CpuMode::Spin => {
                    ready.fetch_add(1, Ordering::SeqCst);
                    spin(counter, done, stop, i as u64);
                }
                CpuMode::Membw => {
                    // vec! writes every element: the pages are faulted in before `started`.
                    let mut buffer = vec![i as u64 + 1; per_thread];
                    ready.fetch_add(1, Ordering::SeqCst);
                    stream(&mut buffer, counter, done, stop);
                }
            };
            match std::thread::Builder::new()
                .name(format!("cpu-hog-{i}"))
                .spawn_scoped(scope, worker)
            {
                Ok(handle) => spawned.push(handle),
                Err(source) => {
                    done.store(true, Ordering::SeqCst);
                    return Err(HogError::Os {
                        what: format!("cannot start CPU hog thread {i}"),
                        source,
                    });
                }
            }
        }
        while ready.load(Ordering::SeqCst) < config.threads as u64 && !stop.is_set() {
            std::thread::sleep(Duration::from_millis(1));
        }
        let total = || {
            counters
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .sum::<u64>()
        };
        let start = Instant::now();
        emit(&line(HogEvent::Started, (start - began).as_secs_f64(), 0));
        let (start_count, deadline) = (total(), run_for.map(|d| start + d));
        let (mut last_at, mut last_count) = (start, start_count);
        let stopped_by = loop {
            let next = last_at + every;
            let wake = deadline.map_or(next, |d| d.min(next));
            if sleep_until(wake, stop) {
                break stop.reason().unwrap_or(StopReason::Signal);
            }
            let now = Instant::now();
            if now >= next {
                let count = total();
                emit(&line(
                    HogEvent::Report,
                    (now - last_at).as_secs_f64(),
                    count - last_count,
                ));
                (last_at, last_count) = (now, count);
            }
            if deadline.is_some_and(|d| now >= d) {
                break StopReason::Time;
            }
        };
        let end = Instant::now();
        let end_count = total();
        done.store(true, Ordering::SeqCst);
        for handle in spawned {
            // A worker only panics on allocation failure, which aborts anyway.
            let _ = handle.join();
        }
        let mut summary = line(
            HogEvent::Summary,
            (end - start).as_secs_f64(),
            end_count - start_count,
        );
        summary.stopped_by = Some(stopped_by);
        Ok(summary)
    })
}

/// The spin load: dependent 64-bit multiply-adds (a linear congruential generator), counted in
/// iterations.
fn spin(counter: &AtomicU64, done: &AtomicBool, stop: &StopFlag, seed: u64) {
    // Constants the compiler cannot see: with known ones it folds unrolled steps together
    // (x*a*a + (a*c + c)), and an "iteration" would no longer be one multiply-add.
    let (a, c) = black_box((6_364_136_223_846_793_005u64, 1_442_695_040_888_963_407u64));
    let mut x = seed;
    while !done.load(Ordering::Relaxed) && !stop.is_set() {
        for _ in 0..SPIN_CHUNK {
            x = x.wrapping_mul(a).wrapping_add(c);
        }
        x = black_box(x);
        counter.fetch_add(SPIN_CHUNK, Ordering::Relaxed);
    }
}

/// The membw load: passes over `buffer`, reading and writing every word, counted in bytes
/// moved (read + written).
fn stream(buffer: &mut [u64], counter: &AtomicU64, done: &AtomicBool, stop: &StopFlag) {
    let words = MEMBW_CHUNK / 8;
    loop {
        for chunk in buffer.chunks_mut(words) {
            if done.load(Ordering::Relaxed) || stop.is_set() {
                return;
            }
            for v in chunk.iter_mut() {
                *v = v.wrapping_add(1);
            }
            // Keeps the stores: the buffer is never read otherwise.
            black_box(&mut *chunk);
            counter.fetch_add(2 * (chunk.len() * 8) as u64, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(mode: CpuMode) -> CpuHogConfig {
        CpuHogConfig {
            threads: 1,
            mode,
            buffer_bytes: 8 << 20,
            seconds: Some(0.3),
            report_every_s: 0.1,
        }
    }

    #[test]
    fn both_modes_report_positive_rates_and_stop_on_time() {
        for mode in [CpuMode::Spin, CpuMode::Membw] {
            let mut lines = Vec::new();
            let summary = run(&config(mode), &StopFlag::new(), &mut |l| {
                lines.push(l.clone())
            })
            .expect("runs");
            assert_eq!(lines[0].event, HogEvent::Started, "{lines:?}");
            assert!(lines.len() >= 2, "{lines:?}");
            for l in &lines[1..] {
                assert_eq!(l.event, HogEvent::Report);
                assert!(l.rate().is_some_and(|r| r > 0.0), "{l:?}");
            }
            assert_eq!(summary.stopped_by, Some(StopReason::Time));
            assert!(summary.rate().is_some_and(|r| r > 0.0), "{summary:?}");
            assert!(summary.seconds >= 0.3, "{summary:?}");
        }
    }

    #[test]
    fn a_stop_request_ends_the_run() {
        let stop = StopFlag::new();
        stop.stop(StopReason::Signal);
        let mut cfg = config(CpuMode::Spin);
        cfg.seconds = None;
        let summary = run(&cfg, &stop, &mut |_| {}).expect("runs");
        assert_eq!(summary.stopped_by, Some(StopReason::Signal));
    }

    #[test]
    fn what_the_machine_cannot_hold_is_refused_before_anything_starts() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut cfg = config(CpuMode::Spin);
        cfg.threads = CpuHogConfig::MAX_THREADS_PER_CORE * cores + 1;
        let e = cfg.validate().unwrap_err().to_string();
        assert!(e.contains("--threads") && e.contains("per core"), "{e}");
        cfg.threads = CpuHogConfig::MAX_THREADS_PER_CORE * cores;
        assert!(cfg.validate().is_ok());
        let available = MemoryAvailable::probe().host.expect("host memory on Linux");
        let mut cfg = config(CpuMode::Membw);
        cfg.buffer_bytes = usize::try_from(available.bytes).unwrap();
        let e = cfg.validate().unwrap_err().to_string();
        assert!(
            e.contains("more than half") && e.contains("--buffer-mib"),
            "{e}"
        );
    }

    #[test]
    fn invalid_settings_are_rejected() {
        let mut cfg = config(CpuMode::Membw);
        cfg.threads = 0;
        assert!(run(&cfg, &StopFlag::new(), &mut |_| {}).is_err());
        cfg.threads = 2;
        cfg.buffer_bytes = 1 << 20;
        let err = run(&cfg, &StopFlag::new(), &mut |_| {}).expect_err("too small");
        assert!(err.to_string().contains("1 MiB per thread"), "{err}");
        let mut cfg = config(CpuMode::Spin);
        cfg.report_every_s = 0.0;
        assert!(run(&cfg, &StopFlag::new(), &mut |_| {}).is_err());
    }
}

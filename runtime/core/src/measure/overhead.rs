//! Where a run's threads spend their time besides the kernels: the runtime's own overhead.
//!
//! Each thread of a run keeps its own tally in plain fields — a worker a [`WorkerTally`], the
//! source thread a [`SourceTally`], the collector a [`CollectorTally`] — and hands it back when
//! it ends, so counting costs no shared cache line on the hot path: a clock read or two per
//! task and per frame, and per wait. [`Overhead`] is their sum over the run;
//! [`Overhead::per_frame`] divides it by the frames.
//!
//! What the figures mean, for one worker (with more, the worker figures are summed over them):
//! - `launch`: time inside kernels (CPU stages) or enqueueing (GPU stages);
//! - `bookkeeping`: the rest of a task: counting it done, releasing the stages it completes,
//!   sending their tasks and the frame's completion;
//! - `parked` and `parks`: time and times a worker found every queue empty and slept; `spun`
//!   and `spins`: time spinning, and times it found a task by spinning briefly first;
//! - the source's `busy` time, less its waits for a free slot and its `staging`: for a replay,
//!   its work per frame (writing packets and launching tiles, or handing over a frame staged in
//!   pinned memory); for a network receiver, also its waits for packets; `staging` is a
//!   replay's one copy of its prepared frames into pinned memory before its first frame;
//! - the collector's `busy` time (handing frames to the sink, resetting slots);
//! - `stage_sets` and `stage_sets_peak`: the sets of buffers for tensors that live only while
//!   a frame's stages run, and the most ever bound to frames at once. Every set bound is
//!   memory the kernels sweep in turn; one worker running frames one after another binds one.
//!
//! Guarantee: every duration is measured on the thread it describes, so the worker figures add
//! up to the workers' time in their loop, less the loop's own few instructions per task.

use std::fmt;
use std::time::Duration;

/// A worker's own counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkerTally {
    /// Tasks run.
    pub tasks: u64,
    /// Time inside kernels or GPU enqueues.
    pub launch: Duration,
    /// Time completing tasks.
    pub bookkeeping: Duration,
    /// Times the worker spun for a task and found one.
    pub spins: u64,
    /// Time spent spinning.
    pub spun: Duration,
    /// Times the worker parked.
    pub parks: u64,
    /// Time parked.
    pub parked: Duration,
}

/// The source thread's own counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SourceTally {
    /// Time in the source, less its waits for a free slot and its staging (a receiver's waits
    /// for packets included).
    pub busy: Duration,
    /// Time staging whole frames in pinned memory, once, before the first frame
    /// ([`crate::executor::Ingest::stage`]); zero when none were.
    pub staging: Duration,
    /// Times it waited for a free slot (the run's own count, `RunMetrics::slot_waits`).
    pub slot_waits: u64,
    /// Time it waited.
    pub slot_waited: Duration,
}

/// The collector's own counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CollectorTally {
    /// Time handing frames to the sink and returning their slots.
    pub busy: Duration,
}

/// The run's overhead: every thread's tally, summed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Overhead {
    /// Frames the run completed (the per-frame figures' divisor).
    pub frames: u64,
    /// Workers that ran.
    pub workers: u32,
    /// The workers' tallies, summed.
    pub workers_total: WorkerTally,
    /// The source's.
    pub source: SourceTally,
    /// The collector's.
    pub collector: CollectorTally,
    /// Sets of buffers for tensors that live only while a frame's stages run (0 when the plan
    /// has no such tensor).
    pub stage_sets: u32,
    /// The most of them bound to frames at once.
    pub stage_sets_peak: u32,
}

impl WorkerTally {
    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &WorkerTally) {
        self.tasks += other.tasks;
        self.launch += other.launch;
        self.bookkeeping += other.bookkeeping;
        self.spins += other.spins;
        self.spun += other.spun;
        self.parks += other.parks;
        self.parked += other.parked;
    }
}

/// The overhead per frame, as reports print it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PerFrame {
    /// Tasks per frame.
    pub tasks: f64,
    /// Kernel (or enqueue) time per frame, ms, summed over workers.
    pub launch_ms: f64,
    /// Completion bookkeeping per frame, us.
    pub bookkeeping_us: f64,
    /// Spins that found a task, per frame.
    pub spins: f64,
    /// Time spinning per frame, us.
    pub spun_us: f64,
    /// Parks per frame.
    pub parks: f64,
    /// Time parked per frame, us, summed over workers.
    pub parked_us: f64,
    /// Source time per frame, us.
    pub source_us: f64,
    /// The source's staging, once for the run, ms (not per frame).
    pub source_staging_ms: f64,
    /// Source waits for a free slot per frame.
    pub slot_waits: f64,
    /// Collector time per frame, us.
    pub collector_us: f64,
}

impl Overhead {
    /// The figures per frame (zeros for a run without frames).
    pub fn per_frame(&self) -> PerFrame {
        let n = self.frames.max(1) as f64;
        let us = |d: Duration| d.as_secs_f64() * 1e6 / n;
        let w = &self.workers_total;
        PerFrame {
            tasks: w.tasks as f64 / n,
            launch_ms: us(w.launch) / 1e3,
            bookkeeping_us: us(w.bookkeeping),
            spins: w.spins as f64 / n,
            spun_us: us(w.spun),
            parks: w.parks as f64 / n,
            parked_us: us(w.parked),
            source_us: us(self.source.busy),
            source_staging_ms: self.source.staging.as_secs_f64() * 1e3,
            slot_waits: self.source.slot_waits as f64 / n,
            collector_us: us(self.collector.busy),
        }
    }
}

impl fmt::Display for Overhead {
    /// One line: `runtime per frame: ...`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = self.per_frame();
        write!(
            f,
            "runtime per frame: {:.1} tasks, kernels {:.3} ms, bookkeeping {:.1} us, \
             spins {:.2} ({:.1} us), parks {:.2} ({:.1} us), \
             source {:.1} us, slot waits {:.2}, collector {:.1} us",
            p.tasks,
            p.launch_ms,
            p.bookkeeping_us,
            p.spins,
            p.spun_us,
            p.parks,
            p.parked_us,
            p.source_us,
            p.slot_waits,
            p.collector_us
        )?;
        if !self.source.staging.is_zero() {
            write!(f, ", source staging {:.1} ms once", p.source_staging_ms)?;
        }
        if self.stage_sets > 0 {
            write!(
                f,
                ", stage buffer sets {} of {} at most",
                self.stage_sets_peak, self.stage_sets
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_frame_divides_by_frames() {
        let mut total = WorkerTally::default();
        let one = WorkerTally {
            tasks: 10,
            launch: Duration::from_millis(2),
            bookkeeping: Duration::from_micros(20),
            spins: 2,
            spun: Duration::from_micros(4),
            parks: 3,
            parked: Duration::from_micros(300),
        };
        total.add(&one);
        total.add(&one);
        let overhead = Overhead {
            frames: 4,
            workers: 2,
            workers_total: total,
            source: SourceTally {
                busy: Duration::from_micros(400),
                slot_waits: 2,
                slot_waited: Duration::from_millis(1),
                staging: Duration::ZERO,
            },
            collector: CollectorTally {
                busy: Duration::from_micros(40),
            },
            stage_sets: 4,
            stage_sets_peak: 1,
        };
        let p = overhead.per_frame();
        assert_eq!(p.tasks, 5.0);
        assert!((p.launch_ms - 1.0).abs() < 1e-9);
        assert!((p.bookkeeping_us - 10.0).abs() < 1e-9);
        assert_eq!(p.parks, 1.5);
        assert!((p.parked_us - 150.0).abs() < 1e-9);
        assert_eq!(p.spins, 1.0);
        assert!((p.spun_us - 2.0).abs() < 1e-9);
        assert!((p.source_us - 100.0).abs() < 1e-9);
        assert_eq!(p.slot_waits, 0.5);
        assert!((p.collector_us - 10.0).abs() < 1e-9);
        let line = overhead.to_string();
        assert!(
            line.starts_with("runtime per frame: 5.0 tasks, kernels 1.000 ms"),
            "{line}"
        );
        assert!(
            line.ends_with(", stage buffer sets 1 of 4 at most"),
            "{line}"
        );
    }

    #[test]
    fn no_frames_no_division_by_zero() {
        let p = Overhead::default().per_frame();
        assert_eq!(p, PerFrame::default());
    }
}

//! The threads of a run: every lane's workers and the source on threads of their own, the
//! collector on the calling one; then each stopped and joined, whatever failed, and what they
//! measured gathered. Also the two things a run does around them: the cores its unpinned
//! threads keep to, and the wait for every GPU stream before its state goes.
//!
//! Guarantees: every thread started is joined before [`Threads::run`] returns, on a failure
//! too, and a panic in any of them is returned as [`RunError::Panic`]; [`drain_streams`]
//! waits for every stream whatever failed, so no GPU callback outlives the state it points at.

use std::sync::atomic::Ordering;
use std::time::Instant;

use crossbeam::channel::Receiver;

use super::collector::collect;
use super::outcome::Measured;
use super::scratch::WorkerScratch;
use super::setup::Channels;
use super::slot::Slot;
use super::worker::{Queues, worker};
use super::{
    Event, FrameSink, Ingest, RunError, RunOptions, Shared, Source, Task, send_task, wait,
};
use crate::cuda::GpuError;
use crate::measure::overhead::{Overhead, WorkerTally};
use crate::plan::Plan;

/// The threads of a run and what they share.
pub(super) struct Threads<'a, 'p> {
    pub(super) lanes: &'a [Shared<'p>],
    pub(super) spare_cores: Option<&'a crate::os::CpuSet>,
    pub(super) rule: Option<&'a crate::adapt::Rule>,
}

impl Threads<'_, '_> {
    /// The run itself: every lane's workers and the source on threads of their own, the
    /// collector on this one until every frame is delivered or the run fails; then every
    /// thread is stopped and joined. Returns what the collector gathered, every thread's spans
    /// and the overheads.
    pub(super) fn run(
        self,
        mut scratches: Vec<Vec<WorkerScratch>>,
        channels: Vec<Channels>,
        event_rx: Receiver<Event>,
        source: &mut dyn Source,
        sink: &mut dyn FrameSink,
        options: &RunOptions,
    ) -> Result<Measured, RunError> {
        let Threads {
            lanes,
            spare_cores,
            rule,
        } = self;
        let common = lanes[0].common;
        let (mut frees, mut free_rxs) = (Vec::new(), Vec::new());
        std::thread::scope(|scope| {
            let mut workers = Vec::new();
            for ((shared, channels), lane_scratches) in
                lanes.iter().zip(channels).zip(&mut scratches)
            {
                let first = workers.len();
                for (w, scratch) in lane_scratches.drain(..).enumerate() {
                    let queues = Queues {
                        gpu: channels.gpu.1.clone(),
                        ready: channels.ready.1.clone(),
                        streamed: channels.streamed.1.clone(),
                    };
                    let core = shared.plan.runtime.pin_cores.get(w).copied();
                    let index = (first + w) as u32;
                    workers.push(scope.spawn(move || worker(shared, queues, scratch, core, index)));
                }
                frees.push(channels.free.0);
                free_rxs.push(channels.free.1);
            }
            let source_thread = scope.spawn(move || {
                let _cores =
                    spare_cores.and_then(|cores| crate::os::confine_current_thread(cores).ok());
                wait::prepare_thread();
                let mut ingest = Ingest::new(lanes, free_rxs);
                let started = Instant::now();
                let result = source.run(&mut ingest);
                ingest.tally.busy = started
                    .elapsed()
                    .saturating_sub(ingest.tally.slot_waited)
                    .saturating_sub(ingest.tally.staging);
                // Counted once, where progress reports read it too.
                ingest.tally.slot_waits = common.slot_waits.load(Ordering::Relaxed);
                let _ = lanes[0].events.send(Event::SourceEnded {
                    result,
                    begun: ingest.begun,
                    dropped: common.dropped.load(Ordering::Relaxed),
                });
                (ingest.spans, ingest.tally)
            });

            // Parameter changes apply to a run of one lane ([`run_adaptive`] refuses them).
            let control = options
                .control
                .as_ref()
                .map(|updates| scope.spawn(move || lanes[0].control(updates)));
            let switcher = rule.map(|rule| crate::adapt::Switcher::new(rule.clone(), lanes.len()));
            let collected = collect(lanes, &event_rx, frees, sink, options, switcher);

            common.stopping.store(true, Ordering::Release);
            let source_joined = source_thread.join();
            let control_panicked = control.is_some_and(|c| c.join().is_err());
            for lane in lanes {
                for _ in 0..lane.plan.runtime.workers {
                    send_task(&lane.ready, Task::Stop);
                }
            }
            let joined: Vec<_> = workers.into_iter().map(|w| w.join()).collect();
            let worker_panicked = joined.iter().any(Result::is_err);
            match (collected, source_joined) {
                (Err(e), _) => Err(e),
                (Ok(_), Err(_)) => Err(RunError::Panic("source")),
                (Ok(_), Ok(_)) if worker_panicked => Err(RunError::Panic("worker")),
                (Ok(_), Ok(_)) if control_panicked => Err(RunError::Panic("control")),
                (Ok(c), Ok((source_spans, source_tally))) => {
                    let mut spans = Vec::with_capacity(joined.len() + 1);
                    let mut workers_total = WorkerTally::default();
                    for (worker_spans, tally) in joined.into_iter().flatten() {
                        spans.push(worker_spans);
                        workers_total.add(&tally);
                    }
                    spans.push(source_spans);
                    let (mut stage_sets, mut stage_sets_peak) = (0, 0);
                    for lane in lanes {
                        let (sets, peak) = lane.sets.usage();
                        stage_sets += sets;
                        stage_sets_peak += peak;
                    }
                    let overhead = Overhead {
                        frames: c.frames,
                        workers: lanes.iter().map(|l| l.plan.runtime.workers as u32).sum(),
                        workers_total,
                        source: source_tally,
                        collector: c.tally,
                        stage_sets: stage_sets as u32,
                        stage_sets_peak: stage_sets_peak as u32,
                    };
                    Ok(Measured {
                        collected: c,
                        spans,
                        overhead,
                    })
                }
            }
        })
    }
}

/// Waits for every stream of every slot of every lane to drain, whatever fails (a faulted
/// device fails them all); the first failure is kept.
pub(super) fn drain_streams(lanes: &[Shared<'_>]) -> Result<(), GpuError> {
    let mut drained = Ok(());
    for result in lanes
        .iter()
        .flat_map(|lane| lane.slots.iter())
        .flat_map(Slot::drain)
    {
        if drained.is_ok() {
            drained = result;
        }
    }
    drained
}

/// The cores this process may use that no worker of any plan is pinned to, when workers are
/// pinned and some are left; `None` otherwise.
pub(super) fn spare_cores(plans: &[&Plan]) -> Option<crate::os::CpuSet> {
    let pinned: Vec<usize> = plans
        .iter()
        .flat_map(|p| p.runtime.pin_cores.iter().copied())
        .collect();
    if pinned.is_empty() {
        return None;
    }
    crate::os::CpuSet::allowed().ok()?.without(&pinned)
}

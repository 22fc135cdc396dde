//! The workers: each takes launches from its queues (GPU stages' first, then frames already
//! in flight, then new ones), spins briefly and parks when all are empty, and runs each launch
//! to its end on its own thread (pinned to a core when the placement says so), counting where
//! its time went.
//!
//! Guarantees: a worker never blocks on a queue it sends to (each holds every launch of its
//! lane), starts no launch once the run is stopping, and hands a launch's failure to the
//! collector, which stops the run; a launch releases what follows it only once it has run,
//! or, for a GPU stage, once its work is enqueued.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam::channel::Receiver;

use super::scratch::WorkerScratch;
use super::slot::CarryEnqueue;
use super::{Event, RunError, Shared, Task, wait};
use crate::measure::overhead::WorkerTally;
use crate::measure::trace::{Span, SpanBuffer, SpanKind, Track};
use crate::model::graph::StageId;

/// A worker's queues, in the order it takes from them.
pub(super) struct Queues {
    pub(super) gpu: Receiver<Task>,
    pub(super) ready: Receiver<Task>,
    pub(super) streamed: Receiver<Task>,
}

/// The next launch for a worker: GPU stages' tasks first (they take microseconds, and each
/// keeps a GPU busy), then frames already in flight. A frame's later stages read what its
/// earlier stages just wrote, still in cache; starting tiles of newer frames first would evict
/// it (at 2048x256 that cost a third of the throughput). FIFO within each queue keeps frames
/// in the order they began.
///
/// With every queue empty, the worker spins for up to `spin` ([`wait::spin`]) before it
/// parks.
fn next_task(queues: &Queues, spin: Duration, tally: &mut WorkerTally) -> Option<Task> {
    if let Some(task) = try_next_task(queues) {
        return Some(task);
    }
    let (found, spun) = wait::spin(spin, || try_next_task(queues));
    tally.spun += spun;
    if let Some(task) = found {
        tally.spins += 1;
        return Some(task);
    }
    let parked_from = Instant::now();
    let task = crossbeam::select! {
        recv(queues.gpu) -> task => task.ok(),
        recv(queues.ready) -> task => task.ok(),
        recv(queues.streamed) -> task => task.ok(),
    };
    tally.parks += 1;
    tally.parked += parked_from.elapsed();
    task
}

/// The first task of the queues in priority order, without waiting.
fn try_next_task(queues: &Queues) -> Option<Task> {
    [&queues.gpu, &queues.ready, &queues.streamed]
        .into_iter()
        .find_map(|queue| queue.try_recv().ok())
}

pub(super) fn worker(
    shared: &Shared<'_>,
    queues: Queues,
    mut scratch: WorkerScratch,
    core: Option<usize>,
    index: u32,
) -> (SpanBuffer, WorkerTally) {
    let mut spans = SpanBuffer::new(shared.span_limit);
    let mut tally = WorkerTally::default();
    wait::prepare_thread();
    if let Some(id) = core {
        // Pinning is a performance hint: a core that does not exist here leaves the thread
        // unpinned, and says so (a placement written for another machine still runs).
        if let Err(e) = crate::os::pin_current_thread(id) {
            tracing::warn!(
                "runtime.pin_cores: worker {index} not pinned to core {id}, it runs unpinned: {e}"
            );
        }
    }
    while let Some(task) = next_task(&queues, shared.spin, &mut tally) {
        let Task::Launch {
            slot,
            stage,
            launch,
        } = task
        else {
            break;
        };
        if shared.common.stopping.load(Ordering::Acquire) {
            continue;
        }
        let stage = StageId(stage as usize);
        let slot = slot as usize;
        let started = shared.now_ns();
        let traced = shared
            .trace
            .then(|| shared.slots[slot].frame_id.load(Ordering::Relaxed));
        let mut launched = started;
        let mut record = |spans: &mut SpanBuffer, kind| {
            launched = shared.now_ns();
            if let Some(frame) = traced {
                let span = Span::new(kind, Track::Worker(index), frame, started, launched);
                spans.push(span.of_stage(stage.0 as u32, Some(launch)));
            }
        };
        let range = shared.nvtx.as_ref().map(|n| n.range(stage.0));
        // A CPU launch runs here; a GPU task only enqueues, and its time is the host's cost.
        let result = if shared.slots[slot].is_gpu(stage) {
            // A stateful stage's stream first waits for the stage in the frame before, when
            // this lane ran it.
            let carry = shared.admitted_carry(stage).map(|admitted| {
                let carry = admitted.gpu_carry();
                let after = carry
                    .after_slot
                    .and_then(|before| shared.slots[before].gpu_event(stage));
                CarryEnqueue { carry, after }
            });
            let enqueued = shared.slots[slot].enqueue_gpu(stage, launch, carry);
            record(&mut spans, SpanKind::Enqueue);
            enqueued
                .map_err(RunError::from)
                .and_then(|()| shared.gpu_enqueued(slot, stage, &mut spans, Track::Worker(index)))
        } else {
            let carry = shared
                .admitted_carry(stage)
                .map(|admitted| admitted.cpu_args());
            let launched = shared.slots[slot].launch(
                stage,
                launch,
                &shared.sets,
                &mut scratch,
                carry.as_ref(),
            );
            // Recorded before the launch is completed: completing it may hand the frame on.
            record(&mut spans, SpanKind::Launch);
            launched.map(|()| shared.complete(slot, stage))
        };
        drop(range);
        let ended = shared.now_ns();
        shared.common.counters[stage.0].record(ended.saturating_sub(started));
        tally.tasks += 1;
        tally.launch += Duration::from_nanos(launched.saturating_sub(started));
        tally.bookkeeping += Duration::from_nanos(ended.saturating_sub(launched));
        if let Err(e) = result {
            shared.common.stopping.store(true, Ordering::Release);
            let _ = shared.events.send(Event::Failed(e));
        }
    }
    (spans, tally)
}

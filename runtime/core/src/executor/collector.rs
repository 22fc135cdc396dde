//! The collector: this thread's part of a run. It delivers completed frames to the sink in
//! the order they began, whatever lane ran them, returns their slots to the source, measures
//! latency and rate after the warm-up, reports progress when due, decides switches between
//! lanes when the run adapts, and ends the run on the first failure.
//!
//! Guarantees: every frame the source began reaches the sink exactly once, processed or
//! partial, in the order frames began; a slot returns to the source only once its frame has
//! been handed on; the first failure, from any thread, stops the run and is what it returns;
//! progress reports, when asked for, add up to the run's counts.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam::channel::{self, Receiver, Sender};

use super::slot::FrameEnd;
use super::{
    CompletedFrame, Event, FrameSink, PartialFrame, RunError, RunOptions, Shared, SinkError, wait,
};
use crate::measure::metrics::{Latency, StageCounters, Trend, process_cpu_time};
use crate::measure::overhead::CollectorTally;
use crate::measure::progress::Progress;
use crate::measure::trace::{Span, SpanBuffer, SpanKind, Track};
use crate::model::graph::StageId;

pub(super) struct Collected {
    /// Frames processed by every stage.
    pub(super) frames: u64,
    /// Of those, frames delivered after the warm-up.
    pub(super) measured: u64,
    /// When the warm-up ended (the last warm-up frame's delivery) and the CPU time then;
    /// `None` without a warm-up.
    pub(super) window_start: Option<Duration>,
    pub(super) cpu_at_window_start: Option<Duration>,
    /// Frames that ended with packets missing.
    pub(super) partial: u64,
    /// Frames the source dropped for want of a free slot.
    pub(super) dropped: u64,
    pub(super) first_start: Duration,
    pub(super) last_delivery: Duration,
    pub(super) post_frame: Latency,
    pub(super) end_to_end: Latency,
    pub(super) trend: Trend,
    /// The collector's spans, when traced: each frame's packets and delivery.
    pub(super) spans: SpanBuffer,
    /// The collector's own time delivering.
    pub(super) tally: CollectorTally,
    /// Per lane: frames delivered that began on it, processed or partial.
    pub(super) lane_frames: Vec<u64>,
    /// Every switch between lanes, in order.
    pub(super) switches: Vec<crate::adapt::Switch>,
}

/// The progress reports of a run: when the next is due, and what the previous one counted.
struct Ticker {
    every: Duration,
    due: Duration,
    at: Duration,
    frames: u64,
    partial: u64,
    dropped: u64,
    cpu: Duration,
    /// Post-frame latency of the interval's frames; its memory is allocated once.
    post_frame: Latency,
    /// Post-frame latency of every frame so far, in fixed buckets.
    buckets: crate::measure::progress::LatencyBuckets,
}

impl Ticker {
    fn new(every: Duration) -> Ticker {
        // At least 1 ms apart: a report costs the collector a few microseconds, not a frame.
        let every = every.max(Duration::from_millis(1));
        Ticker {
            every,
            due: every,
            at: Duration::ZERO,
            frames: 0,
            partial: 0,
            dropped: 0,
            cpu: process_cpu_time(),
            post_frame: Latency::new(),
            buckets: Default::default(),
        }
    }

    /// Tells `sink` what the run has done since the previous report.
    fn report(
        &mut self,
        lanes: &[Shared<'_>],
        out: &Collected,
        sink: &mut dyn FrameSink,
        last: bool,
    ) -> Result<(), SinkError> {
        let shared = &lanes[0];
        let now = shared.common.start.elapsed();
        let cpu = process_cpu_time();
        let dropped = shared.common.dropped.load(Ordering::Relaxed);
        let progress = Progress {
            elapsed: now,
            interval: now.saturating_sub(self.at),
            frames: out.frames,
            interval_frames: out.frames - self.frames,
            partial_frames: out.partial,
            interval_partial_frames: out.partial - self.partial,
            dropped_frames: dropped,
            interval_dropped_frames: dropped.saturating_sub(self.dropped),
            post_frame: self.post_frame.quantiles(),
            cpu: cpu.saturating_sub(self.cpu),
            slot_waits: shared.common.slot_waits.load(Ordering::Relaxed),
            gpus: Vec::new(),
            stages: shared
                .common
                .counters
                .iter()
                .map(StageCounters::totals)
                .collect(),
            post_frame_buckets: self.buckets,
            placement: shared.common.several.then(|| {
                let active = shared.common.active.load(Ordering::Relaxed);
                lanes[active.min(lanes.len() - 1)]
                    .plan
                    .placement
                    .name
                    .clone()
            }),
            switches: out.switches.len() as u64,
            last,
        };
        (self.at, self.frames, self.partial, self.dropped, self.cpu) =
            (now, out.frames, out.partial, dropped, cpu);
        self.post_frame.reset();
        // The next report is due an interval from now: a collector held up skips reports, it
        // does not catch up with a burst of them.
        self.due = now + self.every;
        sink.progress(&progress)
    }
}

/// The collector: delivers frames in order, returns slots, stops on the first failure; with
/// progress reports, says the last one once every frame is delivered.
pub(super) fn collect(
    lanes: &[Shared<'_>],
    events: &Receiver<Event>,
    free: Vec<Sender<usize>>,
    sink: &mut dyn FrameSink,
    options: &RunOptions,
    switcher: Option<crate::adapt::Switcher>,
) -> Result<Collected, RunError> {
    let mut ticker = options.progress_every.map(Ticker::new);
    let mut collector = Collector {
        lanes,
        free,
        warmup: options.warmup_frames,
        switcher,
        out: Collected {
            frames: 0,
            measured: 0,
            window_start: None,
            cpu_at_window_start: None,
            partial: 0,
            dropped: 0,
            first_start: Duration::MAX,
            last_delivery: Duration::ZERO,
            post_frame: Latency::new(),
            end_to_end: Latency::new(),
            trend: Trend::default(),
            spans: SpanBuffer::new(lanes[0].span_limit),
            tally: CollectorTally::default(),
            lane_frames: vec![0; lanes.len()],
            switches: Vec::new(),
        },
    };
    collector.deliver(events, sink, &mut ticker)?;
    let out = collector.out;
    if let Some(ticker) = &mut ticker {
        ticker.report(lanes, &out, sink, true)?;
    }
    Ok(out)
}

/// The collector's state while it delivers.
struct Collector<'a, 'p> {
    lanes: &'a [Shared<'p>],
    /// Per lane: where its slots return.
    free: Vec<Sender<usize>>,
    warmup: u64,
    switcher: Option<crate::adapt::Switcher>,
    out: Collected,
}

impl Collector<'_, '_> {
    /// The collector loop: delivers frames in order, returns slots, reports progress when
    /// due, stops on the first failure.
    fn deliver(
        &mut self,
        events: &Receiver<Event>,
        sink: &mut dyn FrameSink,
        ticker: &mut Option<Ticker>,
    ) -> Result<(), RunError> {
        let lanes = self.lanes;
        let common = lanes[0].common;
        // Ended frames waiting for an earlier one, by lane and slot.
        let mut parked: Vec<Vec<Option<FrameEnd>>> =
            lanes.iter().map(|l| vec![None; l.slots.len()]).collect();
        // Frames the source began, known once it has returned.
        let mut begun: Option<u64> = None;
        let fail = |e: RunError| {
            common.stopping.store(true, Ordering::Release);
            // Dropping `free` here (by returning) wakes a source waiting for a slot.
            Err(e)
        };
        loop {
            let delivered = self.out.frames + self.out.partial;
            if begun == Some(delivered) {
                return Ok(());
            }
            if let Some(t) = ticker.as_mut()
                && common.start.elapsed() >= t.due
                && let Err(e) = t.report(lanes, &self.out, sink, false)
            {
                return fail(e.into());
            }
            let event = match next_event(lanes, events, ticker.as_ref().map(|t| t.due)) {
                Ok(Next::Event(event)) => event,
                Ok(Next::Due) => continue,
                Ok(Next::Closed) => return Ok(()),
                Err(e) => return fail(e),
            };
            match event {
                Event::FrameEnded { lane, slot, end } => parked[lane][slot] = Some(end),
                Event::SourceEnded {
                    result: Ok(()),
                    begun: n,
                    dropped,
                } => {
                    begun = Some(n);
                    self.out.dropped = dropped;
                }
                Event::SourceEnded { result: Err(e), .. } => return fail(e.into()),
                Event::Failed(e) => return fail(e),
            }
            while let Some((lane, slot, end)) =
                next_in_order(lanes, &parked, self.out.frames + self.out.partial)
            {
                parked[lane][slot] = None;
                if let Err(e) = self.hand_on(lane, slot, end, sink, ticker) {
                    return fail(e);
                }
            }
        }
    }

    /// Hands the frame in `slot` of `lane` to the sink, measures it, and returns its slot.
    fn hand_on(
        &mut self,
        lane: usize,
        slot: usize,
        end: FrameEnd,
        sink: &mut dyn FrameSink,
        ticker: &mut Option<Ticker>,
    ) -> Result<(), RunError> {
        let delivering_from = Instant::now();
        let shared = &self.lanes[lane];
        let out = &mut self.out;
        let s = &shared.slots[slot];
        let frame_id = s.frame_id.load(Ordering::Relaxed);
        let sequence = s.sequence.load(Ordering::Relaxed);
        out.lane_frames[lane] += 1;
        if end == FrameEnd::Partial {
            out.partial += 1;
            sink.partial(&PartialFrame { frame_id, sequence })?;
        } else {
            let done = shared.now_ns();
            let last = s.last_packet_ns.load(Ordering::Relaxed);
            let post_frame = done.saturating_sub(last);
            if let Some(t) = ticker.as_mut() {
                t.post_frame.record(post_frame);
                t.buckets.record(post_frame);
            }
            if sequence >= self.warmup {
                let first = s.first_packet_ns.load(Ordering::Relaxed);
                out.post_frame.record(post_frame);
                out.trend
                    .record(done as f64 * 1e-9, post_frame as f64 * 1e-9);
                out.end_to_end.record(done.saturating_sub(first));
                out.first_start = out.first_start.min(Duration::from_nanos(first));
                out.measured += 1;
            }
            out.frames += 1;
            for (i, counters) in shared.common.counters.iter().enumerate() {
                if let Some(time) = s.gpu_time(StageId(i)) {
                    counters.record_gpu(time?.as_nanos() as u64);
                }
            }
            if shared.trace {
                for i in 0..shared.common.counters.len() {
                    s.gpu_spans(StageId(i), slot as u32, frame_id, &mut out.spans)?;
                }
            }
            sink.frame(&CompletedFrame {
                frame_id,
                sequence,
                plan: shared.plan,
                slot: s,
            })?;
            self.judge(lane, frame_id, Duration::from_nanos(post_frame));
        }
        let out = &mut self.out;
        if shared.trace {
            let at = shared.now_ns();
            let first = s.first_packet_ns.load(Ordering::Relaxed);
            let last = s.last_packet_ns.load(Ordering::Relaxed);
            if last > 0 {
                let packets = Span::new(SpanKind::Packets, Track::Source, frame_id, first, last);
                out.spans.push(packets);
            }
            let done = Span::new(SpanKind::Deliver, Track::Collector, frame_id, at, at);
            out.spans.push(done.on_lane(lane as u32));
        }
        out.last_delivery = shared.common.start.elapsed();
        if self.warmup > 0 && sequence + 1 == self.warmup {
            out.window_start = Some(out.last_delivery);
            out.cpu_at_window_start = Some(process_cpu_time());
        }
        s.reset(&shared.schedule);
        let _ = self.free[lane].send(slot);
        out.tally.busy += delivering_from.elapsed();
        Ok(())
    }

    /// When the run adapts: shows the switching rule a frame of `lane` just delivered, and
    /// makes the switch it decides, if any, from the next frame to begin.
    fn judge(&mut self, lane: usize, frame_id: u64, post_frame: Duration) {
        let Some(switcher) = self.switcher.as_mut() else {
            return;
        };
        let shared = &self.lanes[lane];
        let common = shared.common;
        // The lane's own frames only: those of a lane left behind are not this one's load.
        let delivered = self.out.lane_frames[lane];
        let observation = crate::adapt::rule::Observation {
            at: common.start.elapsed(),
            placement: lane,
            post_frame,
            // This frame is still counted as in flight: it is being handed on.
            in_flight: common.begun[lane]
                .load(Ordering::Acquire)
                .saturating_sub(delivered - 1),
            slots: shared.slots.len() as u64,
            slot_misses: common.slot_misses.load(Ordering::Relaxed),
        };
        let Some(switch) = switcher.observe(observation) else {
            return;
        };
        common.active.store(switch.to, Ordering::Release);
        let name = |i: usize| self.lanes[i].plan.placement.name.as_str();
        let e = &switch.evidence;
        tracing::info!(
            "kplace run: switching from {} to {} after frame {frame_id} ({}: {}/{} frames late, worst {:.3} ms, slots {:.0}% used, {} without a slot)",
            name(switch.from),
            name(switch.to),
            switch.reason.name(),
            e.late,
            e.frames,
            e.worst_ms,
            e.occupancy * 100.0,
            e.slot_misses,
        );
        if shared.trace {
            let at = shared.now_ns();
            let span = Span::new(SpanKind::Switch, Track::Collector, frame_id, at, at);
            self.out.spans.push(span.on_lane(switch.to as u32));
        }
        self.out.switches.push(switch);
    }
}

/// How often the collector, while it waits, asks each GPU whether work already enqueued has
/// failed: a faulting kernel stops its device's streams, so the callbacks that would complete
/// frames never run and nothing else would say so.
const GPU_CHECK_INTERVAL: Duration = Duration::from_millis(100);

/// What the collector waits for next.
enum Next {
    Event(Event),
    /// A progress report is due.
    Due,
    /// Every sender is gone.
    Closed,
}

/// The next event, a progress report once the run's clock reaches `due`, the end of the
/// events, or a GPU's sticky error.
fn next_event(
    lanes: &[Shared<'_>],
    events: &Receiver<Event>,
    due: Option<Duration>,
) -> Result<Next, RunError> {
    let shared = &lanes[0];
    let checks_gpus = lanes.iter().any(|l| !l.plan.gpus.is_empty());
    // A frame that completes while the collector spins costs its worker no wake-up.
    if let Some(event) = wait::spin_recv(shared.spin, events) {
        return Ok(event.map_or(Next::Closed, Next::Event));
    }
    if !checks_gpus && due.is_none() {
        return Ok(events.recv().map_or(Next::Closed, Next::Event));
    }
    loop {
        let mut wait = GPU_CHECK_INTERVAL;
        if let Some(due) = due {
            let left = due.saturating_sub(shared.common.start.elapsed());
            if left.is_zero() {
                return Ok(Next::Due);
            }
            wait = if checks_gpus { wait.min(left) } else { left };
        }
        match events.recv_timeout(wait) {
            Ok(event) => return Ok(Next::Event(event)),
            Err(channel::RecvTimeoutError::Disconnected) => return Ok(Next::Closed),
            Err(channel::RecvTimeoutError::Timeout) => {
                for gpu in lanes.iter().flat_map(|l| l.plan.gpus.values()) {
                    gpu.check()?;
                }
            }
        }
    }
}

/// The parked frame that began `next_sequence`-th: its lane, its slot and how it ended.
fn next_in_order(
    lanes: &[Shared<'_>],
    parked: &[Vec<Option<FrameEnd>>],
    next_sequence: u64,
) -> Option<(usize, usize, FrameEnd)> {
    lanes
        .iter()
        .zip(parked)
        .enumerate()
        .find_map(|(lane, (shared, parked))| {
            parked.iter().enumerate().find_map(|(i, p)| {
                let end = (*p)?;
                (shared.slots[i].sequence.load(Ordering::Relaxed) == next_sequence)
                    .then_some((lane, i, end))
            })
        })
}

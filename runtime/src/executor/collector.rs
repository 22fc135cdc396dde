//! The collector: this thread's part of a run. It delivers completed frames to the sink in
//! the order they began, returns their slots to the source, measures latency and rate after
//! the warm-up, reports progress when due, and ends the run on the first failure.

use super::*;

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
    buckets: crate::report::progress::LatencyBuckets,
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
        shared: &Shared<'_>,
        out: &Collected,
        sink: &mut dyn FrameSink,
        last: bool,
    ) -> Result<(), SinkError> {
        let now = shared.start.elapsed();
        let cpu = process_cpu_time();
        let dropped = shared.dropped.load(Ordering::Relaxed);
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
            slot_waits: shared.slot_waits.load(Ordering::Relaxed),
            gpus: Vec::new(),
            stages: shared.counters.iter().map(StageCounters::totals).collect(),
            post_frame_buckets: self.buckets,
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
    shared: &Shared<'_>,
    events: &Receiver<Event>,
    free: Sender<usize>,
    sink: &mut dyn FrameSink,
    options: &RunOptions,
) -> Result<Collected, RunError> {
    let mut ticker = options.progress_every.map(Ticker::new);
    let out = deliver(
        shared,
        events,
        free,
        sink,
        options.warmup_frames,
        &mut ticker,
    )?;
    if let Some(ticker) = &mut ticker {
        ticker.report(shared, &out, sink, true)?;
    }
    Ok(out)
}

/// The collector loop: delivers frames in order, returns slots, reports progress when due,
/// stops on the first failure.
fn deliver(
    shared: &Shared<'_>,
    events: &Receiver<Event>,
    free: Sender<usize>,
    sink: &mut dyn FrameSink,
    warmup: u64,
    ticker: &mut Option<Ticker>,
) -> Result<Collected, RunError> {
    let mut out = Collected {
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
        spans: SpanBuffer::new(shared.span_limit),
        tally: CollectorTally::default(),
    };
    // Ended frames waiting for an earlier one, by slot: Some(partial).
    let mut parked: Vec<Option<bool>> = vec![None; shared.slots.len()];
    // Frames the source began, known once it has returned.
    let mut begun: Option<u64> = None;
    let fail = |e: RunError| {
        shared.stopping.store(true, Ordering::Release);
        // Dropping `free` here (by returning) wakes a source waiting for a slot.
        Err(e)
    };
    loop {
        if begun == Some(out.frames + out.partial) {
            return Ok(out);
        }
        if let Some(t) = ticker.as_mut()
            && shared.start.elapsed() >= t.due
            && let Err(e) = t.report(shared, &out, sink, false)
        {
            return fail(e.into());
        }
        let event = match next_event(shared, events, ticker.as_ref().map(|t| t.due)) {
            Ok(Next::Event(event)) => event,
            Ok(Next::Due) => continue,
            Ok(Next::Closed) => return Ok(out),
            Err(e) => return fail(e),
        };
        match event {
            Event::FrameDone(slot) => parked[slot] = Some(false),
            Event::FramePartial(slot) => parked[slot] = Some(true),
            Event::SourceEnded(Ok(()), n, dropped) => {
                begun = Some(n);
                out.dropped = dropped;
            }
            Event::SourceEnded(Err(e), _, _) => return fail(e.into()),
            Event::Failed(e) => return fail(e),
        }
        while let Some((slot, partial)) = next_in_order(shared, &parked, out.frames + out.partial) {
            let delivering_from = Instant::now();
            parked[slot] = None;
            let s = &shared.slots[slot];
            let frame_id = s.frame_id.load(Ordering::Relaxed);
            let sequence = s.sequence.load(Ordering::Relaxed);
            let delivered = if partial {
                out.partial += 1;
                sink.partial(&PartialFrame { frame_id, sequence })
            } else {
                let done = shared.now_ns();
                let last = s.last_packet_ns.load(Ordering::Relaxed);
                if let Some(t) = ticker.as_mut() {
                    t.post_frame.record(done.saturating_sub(last));
                    t.buckets.record(done.saturating_sub(last));
                }
                if sequence >= warmup {
                    let first = s.first_packet_ns.load(Ordering::Relaxed);
                    out.post_frame.record(done.saturating_sub(last));
                    out.trend
                        .record(done as f64 * 1e-9, done.saturating_sub(last) as f64 * 1e-9);
                    out.end_to_end.record(done.saturating_sub(first));
                    out.first_start = out.first_start.min(Duration::from_nanos(first));
                    out.measured += 1;
                }
                out.frames += 1;
                for (i, counters) in shared.counters.iter().enumerate() {
                    match s.gpu_time(StageId(i)) {
                        Some(Ok(time)) => counters.record_gpu(time.as_nanos() as u64),
                        Some(Err(e)) => return fail(e.into()),
                        None => {}
                    }
                }
                if shared.trace {
                    for i in 0..shared.counters.len() {
                        let stream_spans =
                            s.gpu_spans(StageId(i), slot as u32, frame_id, &mut out.spans);
                        if let Err(e) = stream_spans {
                            return fail(e.into());
                        }
                    }
                }
                sink.frame(&CompletedFrame {
                    frame_id,
                    sequence,
                    plan: shared.plan,
                    slot: s,
                })
            };
            if let Err(e) = delivered {
                return fail(e.into());
            }
            if shared.trace {
                let at = shared.now_ns();
                let first = s.first_packet_ns.load(Ordering::Relaxed);
                let last = s.last_packet_ns.load(Ordering::Relaxed);
                if last > 0 {
                    let packets =
                        Span::new(SpanKind::Packets, Track::Source, frame_id, first, last);
                    out.spans.push(packets);
                }
                let done = Span::new(SpanKind::Deliver, Track::Collector, frame_id, at, at);
                out.spans.push(done);
            }
            out.last_delivery = shared.start.elapsed();
            if warmup > 0 && sequence + 1 == warmup {
                out.window_start = Some(out.last_delivery);
                out.cpu_at_window_start = Some(process_cpu_time());
            }
            s.reset(&shared.schedule);
            let _ = free.send(slot);
            out.tally.busy += delivering_from.elapsed();
        }
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
    shared: &Shared<'_>,
    events: &Receiver<Event>,
    due: Option<Duration>,
) -> Result<Next, RunError> {
    let checks_gpus = !shared.plan.gpus.is_empty();
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
            let left = due.saturating_sub(shared.start.elapsed());
            if left.is_zero() {
                return Ok(Next::Due);
            }
            wait = if checks_gpus { wait.min(left) } else { left };
        }
        match events.recv_timeout(wait) {
            Ok(event) => return Ok(Next::Event(event)),
            Err(channel::RecvTimeoutError::Disconnected) => return Ok(Next::Closed),
            Err(channel::RecvTimeoutError::Timeout) => {
                for gpu in shared.plan.gpus.values() {
                    gpu.check()?;
                }
            }
        }
    }
}

/// The parked frame that began `next_sequence`-th, with whether it is partial.
fn next_in_order(
    shared: &Shared<'_>,
    parked: &[Option<bool>],
    next_sequence: u64,
) -> Option<(usize, bool)> {
    parked.iter().enumerate().find_map(|(i, p)| {
        let partial = (*p)?;
        (shared.slots[i].sequence.load(Ordering::Relaxed) == next_sequence).then_some((i, partial))
    })
}

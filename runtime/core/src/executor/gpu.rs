//! The host's side of GPU stages: what a worker does once it has enqueued a GPU stage's task
//! (the stage's fence, and the GPU stages that read it released at once), and the host
//! callbacks that run once the GPU has done a stage's work (its CPU readers released, the
//! stage and the frame counted done).
//!
//! Guarantees: no thread here waits for the GPU; a GPU stage's GPU readers are released once
//! its work is enqueued, its CPU readers only once the GPU has executed it; a task that a
//! callback ends is counted in flight until the callback has run; a panic in a callback stops
//! the run instead of unwinding into the driver.

use std::ffi::c_void;
use std::sync::atomic::Ordering;

use super::slot::{Callback, Completion, TaskEnd};
use super::{Event, RunError, Shared};
use crate::measure::trace::{Span, SpanBuffer, SpanKind, Track};
use crate::model::graph::StageId;

impl Shared<'_> {
    /// Called by a worker after it enqueued a task of GPU stage `stage`. After the stage's last
    /// task it fences the stage (what follows its work on its stream: downloads, event, host
    /// callback, as its path has them) and releases the GPU stages that read its outputs at
    /// once: their work goes behind its event or on the same stream, so nobody waits on the
    /// host. CPU readers are released by a callback, once the GPU has done the work.
    pub(super) fn gpu_enqueued(
        &self,
        slot_index: usize,
        stage: StageId,
        spans: &mut SpanBuffer,
        track: Track,
    ) -> Result<(), RunError> {
        let slot = &self.slots[slot_index];
        if let Completion::Pending = slot.finish_launch(stage) {
            if let Some(partial) = slot.launch_finished() {
                self.frame_ended(slot_index, partial);
            }
            return Ok(());
        }
        let fenced_from = self.now_ns();
        // Until a callback ends this task, the frame's GPU work is in flight.
        let task_end = slot.fence_gpu(stage, gpu_stage_done)?;
        if self.trace {
            let frame = slot.frame_id.load(Ordering::Relaxed);
            let span = Span::new(SpanKind::Fence, track, frame, fenced_from, self.now_ns());
            spans.push(span.of_stage(stage.0 as u32, None));
        }
        for &next in &self.schedule.successors[stage.0] {
            if slot.is_gpu(next) && slot.satisfy(next) {
                self.stage_ready(slot_index, next);
            }
        }
        // A stateful stage's work is on its stream, before its event: the next frame's may be
        // enqueued now in this lane, its stream waiting on that event; in another, once it
        // has executed.
        if let Some(admitted) = self.common.gates[stage.0]
            .as_ref()
            .and_then(|g| g.done(true))
        {
            self.dispatch_at(admitted, stage);
        }
        if task_end == TaskEnd::Now
            && let Some(partial) = slot.launch_finished()
        {
            self.frame_ended(slot_index, partial);
        }
        Ok(())
    }

    /// The host side of a GPU callback: every stage it finishes has executed (launches and
    /// downloads). Releases their CPU readers, and the frame if one was its last stage. The
    /// task a callback ends was kept in flight until now, so the slot cannot be reused under
    /// the GPU's feet.
    fn gpu_finished(&self, callback: &Callback) {
        let slot_index = callback.slot;
        let slot = &self.slots[slot_index];
        let mut processed = None;
        for &stage in &callback.finishes {
            // A stateful stage's carry is complete here: another lane's frame may take it. With
            // one lane nothing waits for this: no lock on every frame's callback.
            if let Some(gate) = self.common.gates[stage.0]
                .as_ref()
                .filter(|_| self.common.several)
            {
                let sequence = slot.sequence.load(Ordering::Relaxed);
                if let Some(admitted) = gate.executed(self.lane, sequence) {
                    self.dispatch_at(admitted, stage);
                }
            }
            if self.trace {
                let (frame, now) = (slot.frame_id.load(Ordering::Relaxed), self.now_ns());
                slot.gpu_callback_at(stage, now);
                let span = Span::new(SpanKind::Callback, Track::Driver, frame, now, now);
                self.driver_spans
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(span.of_stage(stage.0 as u32, None));
            }
            for &next in &self.schedule.successors[stage.0] {
                if !slot.is_gpu(next) && slot.satisfy(next) {
                    self.stage_ready(slot_index, next);
                }
            }
            // Every stage is counted, whichever was the frame's last.
            if let Some(end) = slot.finish_stage() {
                processed = Some(end);
            }
        }
        if callback.ends_task
            && let Some(partial) = slot.launch_finished()
        {
            self.frame_ended(slot_index, partial);
        }
        if let Some(processed) = processed {
            self.frame_ended(slot_index, processed);
        }
    }
}

/// A GPU host callback, run by the driver once its stream reaches it.
///
/// # Safety
/// `data` points at a slot's [`Callback`] of a run that has not returned, linked to its lane.
pub(super) unsafe extern "C" fn gpu_stage_done(data: *mut c_void) {
    // SAFETY: per the contract; the run drains every stream before its slots are dropped.
    let callback = unsafe { &*data.cast::<Callback>() };
    let lane = callback.lane.load(Ordering::Acquire);
    if lane.is_null() {
        // Only a callback of a slot never linked to a lane, which no run enqueues.
        return;
    }
    // SAFETY: a linked callback points at the `Shared` that owns its slot, alive and in place
    // until the run returns, after every stream has drained.
    let shared = unsafe { &*lane.cast::<Shared<'static>>() };
    // A panic must not unwind into the driver's thread.
    let finished = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        shared.gpu_finished(callback);
    }));
    if finished.is_err() {
        shared.common.stopping.store(true, Ordering::Release);
        let _ = shared
            .events
            .send(Event::Failed(RunError::Panic("GPU callback")));
    }
}

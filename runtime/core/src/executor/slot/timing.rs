//! What a slot's timing events say once its frame has completed, when the run profiles its
//! GPU stages: each stage's time on its stream, and its launches and downloads as spans of the
//! run's timeline, placed on the run's clock by the stage's host callback.
//!
//! Guarantees: read only once the frame has completed, so every event read has been recorded
//! and has completed; nothing here enqueues work or waits for the GPU.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::Slot;
use crate::cuda::GpuError;
use crate::cuda::owned::OwnedEvent;
use crate::measure::trace::{Span, SpanBuffer, SpanKind, Track};
use crate::model::graph::StageId;

impl Slot {
    /// GPU time of `stage` in the frame just completed, when profiling: the sum of its timing
    /// pairs (each launch with its uploads, and its downloads). `None` for a CPU stage or
    /// without profiling. Call only once the frame has completed, so every record has.
    pub(crate) fn gpu_time(&self, stage: StageId) -> Option<Result<Duration, GpuError>> {
        let g = self.stages[stage.0].gpu.as_ref()?;
        if g.timing.is_empty() {
            return None;
        }
        let mut total_ms = 0.0f64;
        for (start, end) in &g.timing {
            // SAFETY: both are this slot's timing events, made on the stage's GPU; their
            // latest records, for the frame just completed, have completed with it.
            match unsafe { g.gpu.elapsed_ms(start.raw(), end.raw()) } {
                Ok(ms) => total_ms += f64::from(ms),
                Err(e) => return Some(Err(e)),
            }
        }
        Some(Ok(Duration::from_secs_f64(total_ms.max(0.0) * 1e-3)))
    }

    /// Notes that `stage`'s host callback ran at `now_ns` on the run's clock (when tracing).
    pub(crate) fn gpu_callback_at(&self, stage: StageId, now_ns: u64) {
        if let Some(g) = &self.stages[stage.0].gpu {
            g.callback_ns.store(now_ns, Ordering::Relaxed);
        }
    }

    /// What `stage`'s stream ran for the frame just completed, when profiling: each launch
    /// (with its uploads) as a [`SpanKind::GpuLaunch`], then the downloads as a
    /// [`SpanKind::Download`], on the stream's track, placed on the run's clock by the
    /// stage's host callback ([`Slot::gpu_callback_at`]): the last timing event completed just
    /// before it. Nothing for a CPU stage or without profiling. Call only once the frame has
    /// completed.
    pub(crate) fn gpu_spans(
        &self,
        stage: StageId,
        slot: u32,
        frame: u64,
        out: &mut SpanBuffer,
    ) -> Result<(), GpuError> {
        let Some(g) = &self.stages[stage.0].gpu else {
            return Ok(());
        };
        let Some((_, last)) = g.timing.last() else {
            return Ok(());
        };
        let anchor = g.callback_ns.load(Ordering::Relaxed);
        let track = Track::Stream {
            stage: stage.0 as u32,
            slot,
        };
        let downloads = usize::from(!g.downloads.is_empty());
        let launches = g.timing.len() - downloads;
        for (i, (start, end)) in g.timing.iter().enumerate() {
            // SAFETY: both are this slot's timing events, made on the stage's GPU; their
            // latest records, for the frame just completed, have completed with it.
            let before = |e: &OwnedEvent| unsafe { g.gpu.elapsed_ms(e.raw(), last.raw()) };
            let at = |ms: f32| anchor.saturating_sub((f64::from(ms.max(0.0)) * 1e6) as u64);
            let (from, to) = (at(before(start)?), at(before(end)?));
            let span = if i < launches {
                Span::new(SpanKind::GpuLaunch, track, frame, from, to)
                    .of_stage(stage.0 as u32, Some(i as u32))
            } else {
                Span::new(SpanKind::Download, track, frame, from, to).of_stage(stage.0 as u32, None)
            };
            out.push(span);
        }
        Ok(())
    }
}

//! A slot's GPU work: what each GPU stage enqueues per frame, on the path the plan chose
//! ([`crate::plan::gpu_path`]). On the path without a graph, each stage on its own stream: its
//! waits, uploads, launches, downloads, event and host callback. On the chain, every stage on
//! the slot's one stream: a streamed stage tile by tile, then the slot's graph, captured here
//! once when the slot is built and launched with one call per frame (after the upload of a
//! staged frame, whose address changes from frame to frame). Every host callback is a
//! [`Callback`] the slot owns, at an address that stays put, so a graph can hold it.
//!
//! Guarantees: nothing here waits for the GPU but [`Slot::drain`]; every address enqueued is
//! the slot's own (or a staged frame, which the run keeps until its streams have drained), so
//! what a graph captured stays valid for every launch; a slot's work for one frame is queued
//! behind its work for the frame before on the same stream (checked at every enqueue).

use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use super::Slot;
use crate::cuda::owned::{Capture, OwnedEvent, OwnedGraph, OwnedStream};
use crate::cuda::{Event, Gpu, GpuError, HostFn, LaunchFailure, LaunchRequest, Stream};
use crate::executor::carry::GpuCarry;
use crate::executor::slot_error::SlotError;
use crate::model::graph::StageId;
use crate::plan::Plan;
use crate::plan::gpu_path::Chain;
use crate::plugin::CarryArgs;

/// A GPU stage's stream, fence and copies in one slot.
pub(super) struct SlotGpu {
    pub(super) gpu: Arc<dyn Gpu>,
    pub(super) stream: OwnedStream,
    /// Recorded after the stage's launches and downloads, on the path without a graph: its
    /// writes are complete.
    pub(super) event: OwnedEvent,
    /// Events of the GPU stages whose outputs it reads, in this slot.
    pub(super) waits: Vec<Event>,
    pub(super) uploads: Vec<MirrorCopy>,
    pub(super) downloads: Vec<MirrorCopy>,
    /// Whether each task enqueues one tile (the source streams it), or all launches at once.
    pub(super) per_tile: bool,
    /// The slot's callback ([`Slot::callbacks`]) that finishes this stage after its last task,
    /// when it has one of its own (always without a graph; on the chain, a tiled stage that a
    /// CPU stage reads).
    pub(super) callback: Option<usize>,
    /// When profiling: timing events around each launch (with its uploads), then one pair
    /// around the downloads; empty otherwise.
    pub(super) timing: Vec<(OwnedEvent, OwnedEvent)>,
    /// One more than the sequence number of the latest frame with work enqueued on its
    /// stream (0 before the first): see [`Slot::enqueue_gpu`].
    pub(super) enqueued_through: AtomicU64,
    /// When tracing: the run's clock when the stage's host callback ran for the current frame
    /// ([`Slot::gpu_callback_at`]), which places its timing events on the run's timeline.
    pub(super) callback_ns: AtomicU64,
}

/// One copy between a tensor's home and its mirror: whole, or in `pieces` equal parts.
#[derive(Clone, Copy)]
pub(super) struct MirrorCopy {
    pub(super) dst: *mut u8,
    pub(super) src: *const u8,
    pub(super) bytes: usize,
    pub(super) pieces: u64,
    /// Whether it uploads the source tensor, whose bytes may be a staged frame's.
    pub(super) source: bool,
}

impl MirrorCopy {
    /// Bytes and offset of piece `index` (the whole copy when it has one piece).
    fn piece(&self, index: u64) -> (usize, usize) {
        let len = self.bytes / self.pieces as usize;
        (index as usize * len, len)
    }
}

/// When the last task of a GPU stage ends, once fenced ([`Slot::fence_gpu`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TaskEnd {
    /// When a host callback that follows the stage's work has run: the task stays in flight
    /// until then, so that its slot is not reused under the GPU's feet.
    AtCallback,
    /// Now: no callback of the stage's own follows its work.
    Now,
}

/// Where a stage's upload of the source tensor reads the frame.
#[derive(Clone, Copy)]
pub(super) enum SourceBytes {
    /// The slot's own buffer, piece by piece before each tile's launch as planned.
    Slot,
    /// A staged frame, whole, before the first launch.
    Staged(*const u8),
    /// Not here: the chain uploads the staged frame ahead of the graph.
    Ahead,
}

/// The chain's part of a slot: its one stream and its graph.
pub(super) struct SlotChain {
    /// The stream every GPU stage of the slot enqueues on (the first GPU stage's).
    pub(super) stream: Stream,
    /// The stage whose task launches the graph, and the graph; `None` without a graph stage.
    pub(super) graph: Option<(StageId, OwnedGraph)>,
    /// The tiled stage, when a stage is streamed tile by tile ahead of the graph.
    pub(super) tiles: Option<StageId>,
    /// When frames are staged and a graph stage reads the source: the stage whose source
    /// upload goes ahead of the graph.
    pub(super) staged_reader: Option<StageId>,
}

/// What a GPU host callback finishes, in which slot, for which lane: the data pointer the
/// driver hands back. Made with its slot, at an address that stays put until the slot is
/// dropped (so that a graph may hold it); its lane is set once the lane is in place.
pub(crate) struct Callback {
    /// The lane (`Shared`) that owns the slot, set by `Shared::link`.
    pub(crate) lane: AtomicPtr<c_void>,
    /// The slot.
    pub(crate) slot: usize,
    /// The stages it finishes, in the order they ran.
    pub(crate) finishes: Vec<StageId>,
    /// Whether it ends the task that enqueued it (the slot's count of work in flight).
    pub(crate) ends_task: bool,
}

impl Callback {
    pub(super) fn new(slot: usize, finishes: Vec<StageId>, ends_task: bool) -> Callback {
        Callback {
            lane: AtomicPtr::new(std::ptr::null_mut()),
            slot,
            finishes,
            ends_task,
        }
    }

    /// The data pointer a host callback is enqueued with.
    fn data(&self) -> *mut c_void {
        std::ptr::from_ref(self).cast_mut().cast()
    }
}

impl SlotGpu {
    /// Enqueues on `stream` the uploads due before launch `launch`: a split upload's piece, a
    /// whole upload before the first launch, the source tensor as `source` says.
    ///
    /// # Safety
    /// The copies' blocks are the slot's, valid until the stream has run the copies (pools
    /// outlive every stream); `source`'s staged bytes are the source tensor's size and stay
    /// valid likewise; `stream` is this stage's GPU's.
    unsafe fn upload_before(
        &self,
        launch: u32,
        stream: Stream,
        source: SourceBytes,
    ) -> Result<(), GpuError> {
        for copy in &self.uploads {
            let (src, offset, len) = match (copy.source, source) {
                (true, SourceBytes::Ahead) => continue,
                (true, SourceBytes::Staged(_)) if launch > 0 => continue,
                (true, SourceBytes::Staged(frame)) => (frame, 0, copy.bytes),
                _ if copy.pieces > 1 => {
                    let (offset, len) = copy.piece(u64::from(launch));
                    (copy.src, offset, len)
                }
                _ if launch > 0 => continue,
                _ => (copy.src, 0, copy.bytes),
            };
            // SAFETY: `offset + len` lies within both blocks (a piece of a copy whose blocks
            // hold `bytes`), which stay valid until the copy has run (the caller's contract);
            // the source is pinned (a home or a staged frame), the destination device memory.
            unsafe {
                self.gpu
                    .copy_to_device(copy.dst.add(offset), src.add(offset), len, stream)
            }?;
        }
        Ok(())
    }

    /// Enqueues the upload of the source tensor, whole, from `frame`, a staged frame.
    ///
    /// # Safety
    /// As for [`SlotGpu::upload_before`].
    unsafe fn upload_staged(&self, frame: *const u8, stream: Stream) -> Result<(), GpuError> {
        for copy in self.uploads.iter().filter(|c| c.source) {
            // SAFETY: the staged frame holds the source tensor's bytes, as the mirror does;
            // both valid until the copy has run (the caller's contract).
            unsafe { self.gpu.copy_to_device(copy.dst, frame, copy.bytes, stream) }?;
        }
        Ok(())
    }

    /// Enqueues the stage's downloads on `stream`.
    ///
    /// # Safety
    /// As for [`SlotGpu::upload_before`].
    unsafe fn download(&self, stream: Stream) -> Result<(), GpuError> {
        for copy in &self.downloads {
            // SAFETY: the slot's device home and pinned mirror of `bytes` each, valid until
            // the copy has run (the caller's contract).
            unsafe {
                self.gpu
                    .copy_to_host(copy.dst, copy.src, copy.bytes, stream)
            }?;
        }
        Ok(())
    }

    /// Checks that frame `sequence`'s work is not queued behind a later frame's on this
    /// stage's stream, and notes it as the latest. A complete frame's slot is reused only
    /// after its stages' work has run; a partial frame's once its tasks are enqueued, while
    /// its work may still be queued. That work touches only this slot's buffers, and runs
    /// before the slot's next frame's only because both go on one stream, in order: checked
    /// here, so that no change of streams or schedule can silently break it.
    fn in_order(&self, stage: StageId, sequence: u64) -> Result<(), GpuError> {
        let frame = sequence + 1;
        let latest = self.enqueued_through.fetch_max(frame, Ordering::AcqRel);
        if latest > frame {
            return Err(GpuError::new(
                self.gpu.name(),
                format!("enqueue of stage {} in a reused slot", stage.0),
                format!(
                    "frame {} would be queued behind frame {} on the same stream",
                    frame - 1,
                    latest - 1
                ),
            ));
        }
        Ok(())
    }
}

impl Slot {
    fn slot_gpu(&self, stage: StageId) -> Result<&SlotGpu, GpuError> {
        self.stages[stage.0].gpu.as_ref().ok_or_else(|| {
            GpuError::new(
                "cuda",
                format!("GPU enqueue of stage {}", stage.0),
                "the stage runs on the CPU (an executor bug)",
            )
        })
    }

    /// A launch request of `stage`'s launch `launch`, with `carry`.
    ///
    /// # Safety
    /// The request points at this slot's state, tensors and workspace: the caller enqueues it
    /// only where the slot outlives its execution and nothing else writes what it writes.
    unsafe fn request(
        &self,
        stage: StageId,
        launch: u32,
        carry: Option<CarryArgs>,
    ) -> LaunchRequest {
        let s = &self.stages[stage.0];
        let ws = s.workspaces[launch as usize];
        // SAFETY: per this function's contract.
        unsafe {
            LaunchRequest::new(
                s.state(),
                &s.inputs,
                &s.outputs,
                (ws.ptr.cast(), ws.bytes),
                Self::tile(s, launch),
            )
            .with_carry(carry)
        }
    }

    /// Enqueues task `task` of GPU stage `stage`, without waiting for the GPU, on the path the
    /// slot was built for. Without a graph, on the stage's stream: one tile with its piece of
    /// the upload when the source streams the stage, else the waits on its producers' events,
    /// the uploads and every launch; a stateful stage's stream also waits for `carry`'s event
    /// (the stage's in the frame before), copies over the carry what it must start from
    /// (zeros, or the carry another lane left), gives the launch its carry, and keeps a copy
    /// in host memory when another lane may take it. On the chain: the tiled stage's tile, or
    /// for the graph's first stage the staged frame's upload and the graph's launch.
    pub(crate) fn enqueue_gpu(
        &self,
        stage: StageId,
        task: u32,
        carry: Option<(GpuCarry, Option<Event>)>,
    ) -> Result<(), LaunchFailure> {
        let g = self.slot_gpu(stage)?;
        g.gpu.bind_thread()?;
        g.in_order(stage, self.sequence.load(Ordering::Relaxed))?;
        let source = if self.staged {
            SourceBytes::Staged(self.source_from.load(Ordering::Relaxed))
        } else {
            SourceBytes::Slot
        };
        if let Some(chain) = &self.chain {
            return self.enqueue_chained(chain, stage, task, source);
        }
        let s = &self.stages[stage.0];
        let stream = g.stream.raw();
        let launches = if g.per_tile {
            task..task + 1
        } else {
            0..s.launches
        };
        if !g.per_tile {
            for &event in &g.waits {
                // SAFETY: the producer's fence in this slot, and this stage's stream.
                unsafe { g.gpu.wait(stream, event) }?;
            }
        }
        if let Some((c, after)) = &carry {
            if let Some(event) = after {
                // SAFETY: the stage's fence in the slot of the frame before, which records it
                // again only after this frame's turn (its turnstile's order).
                unsafe { g.gpu.wait(stream, *event) }?;
            }
            if let Some(upload) = c.upload {
                // SAFETY: a pinned block of the carry's size (zeros or staging) and the
                // carry's device block, both the lane's for the run; the turnstile admits one
                // launch of the stage at a time.
                unsafe {
                    g.gpu.copy_to_device(
                        c.args.carry.cast(),
                        upload.ptr,
                        c.args.bytes as usize,
                        stream,
                    )
                }?;
            }
        }
        for launch in launches {
            let timing = g.timing.get(launch as usize);
            if let Some((start, _)) = timing {
                // SAFETY: the slot's timing event and the stage's stream.
                unsafe { g.gpu.record(start.raw(), stream) }?;
            }
            // SAFETY: the slot's blocks, or the frame's staged bytes, which the run keeps until
            // its streams have drained.
            unsafe { g.upload_before(launch, stream, source) }?;
            // SAFETY: the slot outlives the stream's work (drained before it is dropped), and a
            // reused slot's next frame is queued behind this one on this stream (checked).
            let request = unsafe { self.request(stage, launch, carry.map(|(c, _)| c.args)) };
            // SAFETY: as above.
            unsafe { g.gpu.enqueue_launch(stream, request) }?;
            if let Some((_, end)) = timing {
                // SAFETY: the slot's timing event and the stage's stream.
                unsafe { g.gpu.record(end.raw(), stream) }?;
            }
        }
        // Where another lane takes the carry from, once this has executed.
        if let Some((
            GpuCarry {
                keep: Some(keep),
                args,
                ..
            },
            _,
        )) = &carry
        {
            // SAFETY: the carry's device block and its pinned staging block, the lane's for
            // the run; another lane reads the staging block only once this has executed.
            unsafe {
                g.gpu
                    .copy_to_host(keep.ptr, args.carry.cast(), args.bytes as usize, stream)
            }?;
        }
        Ok(())
    }

    /// A task of `stage` on the chain: a tile of the tiled stage, or the graph's launch.
    fn enqueue_chained(
        &self,
        chain: &SlotChain,
        stage: StageId,
        task: u32,
        source: SourceBytes,
    ) -> Result<(), LaunchFailure> {
        let g = self.slot_gpu(stage)?;
        match &chain.graph {
            Some((lead, graph)) if *lead == stage => {
                if let (Some(reader), SourceBytes::Staged(frame)) = (chain.staged_reader, source) {
                    let r = self.slot_gpu(reader)?;
                    // SAFETY: the staged frame's bytes, which the run keeps until its streams
                    // have drained, into the reader's mirror, the slot's.
                    unsafe { r.upload_staged(frame, chain.stream) }?;
                }
                // SAFETY: the slot's graph, whose work touches only the slot's blocks, its
                // kernel states and workspaces and its callbacks, all alive until the slot's
                // streams have drained; a reused slot's next frame is queued behind this one
                // on the chain's stream (checked).
                unsafe { g.gpu.launch_graph(graph.raw(), chain.stream) }?;
            }
            _ if chain.tiles == Some(stage) => {
                // SAFETY: the slot's blocks (a tiled stage is never staged).
                unsafe { g.upload_before(task, chain.stream, SourceBytes::Slot) }?;
                // SAFETY: as for the graph; a tile's launch touches its slot's blocks only.
                let request = unsafe { self.request(stage, task, None) };
                // SAFETY: as above.
                unsafe { g.gpu.enqueue_launch(chain.stream, request) }?;
            }
            _ => {
                return Err(GpuError::new(
                    g.gpu.name(),
                    format!("enqueue of stage {}", stage.0),
                    "a graph stage's task is its graph's first stage's (an executor bug)",
                )
                .into());
            }
        }
        Ok(())
    }

    /// After the last task of GPU stage `stage`: what must follow its work on its stream, with
    /// `func` the host callback's function. Without a graph: its downloads, its event (the
    /// fence its GPU readers wait on), then its callback. On the chain: the tiled stage's
    /// downloads and, when it has one, its own callback; nothing after the graph's launch,
    /// which holds its own. Returns when the stage's last task ends.
    pub(crate) fn fence_gpu(&self, stage: StageId, func: HostFn) -> Result<TaskEnd, GpuError> {
        let g = self.slot_gpu(stage)?;
        let stream = match &self.chain {
            Some(chain) if chain.graph.as_ref().is_some_and(|(lead, _)| *lead == stage) => {
                return Ok(TaskEnd::AtCallback);
            }
            Some(chain) => chain.stream,
            None => g.stream.raw(),
        };
        let timing = if g.downloads.is_empty() {
            None
        } else {
            g.timing.last()
        };
        if let Some((start, _)) = timing {
            // SAFETY: the slot's timing event and the stage's stream.
            unsafe { g.gpu.record(start.raw(), stream) }?;
        }
        // SAFETY: the slot's blocks, valid until the stream's work has run.
        unsafe { g.download(stream) }?;
        if let Some((_, end)) = timing {
            // SAFETY: the slot's timing event and the stage's stream.
            unsafe { g.gpu.record(end.raw(), stream) }?;
        }
        if self.chain.is_none() {
            // SAFETY: the slot's fence and the stage's stream.
            unsafe { g.gpu.record(g.event.raw(), stream) }?;
        }
        let Some(callback) = g.callback.map(|i| &self.callbacks[i]) else {
            return Ok(TaskEnd::Now);
        };
        // SAFETY: the callback's data is the slot's, alive until the run has drained every
        // stream, and `func` never calls the driver.
        unsafe { g.gpu.call_host(stream, func, callback.data()) }?;
        Ok(TaskEnd::AtCallback)
    }

    /// Captures the chain's graph on `stream`: each graph stage's uploads (but a staged frame's,
    /// which goes ahead of the graph), launches and downloads in order, and its callbacks, with
    /// `func` their function. Called once, when the slot is built.
    pub(super) fn capture(
        &self,
        plan: &Plan,
        chain: &Chain,
        gpu: &Arc<dyn Gpu>,
        stream: Stream,
        func: HostFn,
    ) -> Result<OwnedGraph, SlotError> {
        let failed = |stage: Option<StageId>, cause: String| SlotError::Graph {
            stage: stage.map(|s| plan.graph.stage(s).name.clone()),
            cause,
        };
        // SAFETY: the slot's stream, idle (nothing was enqueued on it yet), captured by this
        // thread alone until the capture ends here.
        let capture =
            unsafe { Capture::begin(gpu, stream) }.map_err(|e| failed(None, e.to_string()))?;
        let source = if self.staged {
            SourceBytes::Ahead
        } else {
            SourceBytes::Slot
        };
        let mut callbacks = chain.callbacks.iter().zip(&self.graph_callbacks);
        let mut next = callbacks.next();
        for (i, &stage) in chain.graph.iter().enumerate() {
            let g = self
                .slot_gpu(stage)
                .map_err(|e| failed(Some(stage), e.to_string()))?;
            let captured = (0..self.stages[stage.0].launches).try_for_each(|launch| {
                // SAFETY: the slot's blocks, valid for every launch of the graph (the slot
                // outlives its streams' work).
                unsafe { g.upload_before(launch, stream, source) }?;
                // SAFETY: the request points at the slot's state, tensors and workspace, as
                // valid as the blocks.
                let request = unsafe { self.request(stage, launch, None) };
                // SAFETY: as above.
                unsafe { g.gpu.enqueue_launch(stream, request) }.map_err(|e| match e {
                    LaunchFailure::Device(e) => e,
                    LaunchFailure::Kernel(e) => {
                        GpuError::new(g.gpu.name(), "launch", e.to_string())
                    }
                })
            });
            captured.map_err(|e| failed(Some(stage), e.to_string()))?;
            // SAFETY: as for the uploads.
            unsafe { g.download(stream) }.map_err(|e| failed(Some(stage), e.to_string()))?;
            while let Some(((after, _), &index)) = next
                && *after == i
            {
                let data = self.callbacks[index].data();
                // SAFETY: the callback's data is the slot's, at an address that stays put
                // until the slot is dropped, after its streams have drained; `func` never
                // calls the driver.
                unsafe { g.gpu.call_host(stream, func, data) }
                    .map_err(|e| failed(Some(stage), e.to_string()))?;
                next = callbacks.next();
            }
        }
        capture.end().map_err(|e| failed(None, e.to_string()))
    }

    /// GPU time of `stage` in the frame just completed, when profiling: the sum of its timing
    /// pairs (each launch with its uploads, and its downloads). `None` for a CPU stage or
    /// without profiling. Call only once the frame has completed, so every record has.
    pub(crate) fn gpu_time(&self, stage: StageId) -> Option<Result<std::time::Duration, GpuError>> {
        let g = self.stages[stage.0].gpu.as_ref()?;
        if g.timing.is_empty() {
            return None;
        }
        let mut total_ms = 0.0f64;
        for (start, end) in &g.timing {
            // SAFETY: timing events of this slot, recorded for the completed frame.
            match unsafe { g.gpu.elapsed_ms(start.raw(), end.raw()) } {
                Ok(ms) => total_ms += f64::from(ms),
                Err(e) => return Some(Err(e)),
            }
        }
        Some(Ok(std::time::Duration::from_secs_f64(
            total_ms.max(0.0) * 1e-3,
        )))
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
    ///
    /// [`SpanKind::GpuLaunch`]: crate::measure::trace::SpanKind::GpuLaunch
    /// [`SpanKind::Download`]: crate::measure::trace::SpanKind::Download
    pub(crate) fn gpu_spans(
        &self,
        stage: StageId,
        slot: u32,
        frame: u64,
        out: &mut crate::measure::trace::SpanBuffer,
    ) -> Result<(), GpuError> {
        use crate::measure::trace::{Span, SpanKind, Track};
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
            // SAFETY: timing events of this slot, all recorded for the completed frame.
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

    /// Synchronizes the slot's GPU streams, one per item, as the iterator is consumed: each
    /// item blocks until its stream has drained. Only at the end of a run; the caller
    /// consumes every item, failed or not, so that nothing is left running that could still
    /// call back into the run's state.
    pub(crate) fn drain(&self) -> impl Iterator<Item = Result<(), GpuError>> + '_ {
        self.stages.iter().filter_map(|s| s.gpu.as_ref()).map(|g| {
            g.gpu.bind_thread()?;
            // SAFETY: the stream belongs to this slot.
            unsafe { g.gpu.synchronize(g.stream.raw()) }
        })
    }

    /// The slot's host callbacks, for the lane to point them at itself.
    pub(crate) fn callbacks(&self) -> &[Callback] {
        &self.callbacks
    }

    /// Uploads frame-by-frame from the slot's own source buffer (the default for a frame).
    pub(crate) fn use_own_source(&self, home: *mut u8) {
        self.source_from.store(home, Ordering::Relaxed);
    }

    /// Takes the frame's source tensor from `staged`, a frame the source staged in pinned
    /// memory, instead of the slot's own buffer.
    pub(crate) fn use_staged_source(&self, staged: *mut u8) {
        self.source_from.store(staged, Ordering::Relaxed);
    }
}

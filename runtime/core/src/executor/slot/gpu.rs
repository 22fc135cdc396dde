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

/// What a stateful GPU stage's enqueue takes besides its task.
#[derive(Clone, Copy)]
pub(crate) struct CarryEnqueue {
    /// What the carry adds around the launch.
    pub(crate) carry: GpuCarry,
    /// The stage's fence in the slot whose frame ran it before in this lane, if one did: the
    /// stream waits for it first, so that the launches use the carry in turn on the device.
    pub(crate) after: Option<Event>,
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

    /// Makes the stage's stream wait for the fences of the GPU stages whose outputs it reads,
    /// in this slot: their writes come before its reads, and the host never waits.
    fn wait_for_producers(&self) -> Result<(), GpuError> {
        let stream = self.stream.raw();
        for &event in &self.waits {
            // SAFETY: `event` is a producer's fence in this slot and `stream` this stage's
            // stream, both made on this stage's GPU (the planner keeps a tensor's GPU writer
            // and readers on one device) and alive as long as the slot.
            unsafe { self.gpu.wait(stream, event) }?;
        }
        Ok(())
    }

    /// What a stateful stage's stream does before its launches: waits for the stage in the
    /// frame before, when this lane ran it, then copies over the carry what the launch starts
    /// from (zeros, or the carry another lane left), when it must.
    ///
    /// # Safety
    /// `c`'s blocks are the stage's carry in this lane and its pinned blocks, all of the
    /// carry's size and valid until every stream of the run has drained; its turnstile
    /// admitted this launch, and admits no other until it has been enqueued.
    unsafe fn carry_before(&self, c: &CarryEnqueue) -> Result<(), GpuError> {
        let stream = self.stream.raw();
        if let Some(event) = c.after {
            // SAFETY: `event` is this stage's fence in the slot of the frame before, made on
            // this stage's GPU as `stream` was, and alive as long as that slot (the run's).
            unsafe { self.gpu.wait(stream, event) }?;
        }
        if let Some(upload) = c.carry.upload {
            // SAFETY: `upload` is pinned (zeros, or the staging block the carry was taken
            // into) and the carry's device block is the destination, both the carry's size and
            // valid until the copy has executed (this function's contract); the launch before
            // read the carry earlier on this stream, or, in another lane, had executed before
            // its turnstile admitted this one.
            unsafe {
                self.gpu.copy_to_device(
                    c.carry.args.carry.cast(),
                    upload.ptr,
                    c.carry.args.bytes as usize,
                    stream,
                )
            }?;
        }
        Ok(())
    }

    /// After a stateful stage's launches, in a run of several lanes: copies the carry to its
    /// pinned staging block, where another lane takes it once this has executed.
    ///
    /// # Safety
    /// `carry`'s device block and its staging block are the stage's carry in this lane and its
    /// pinned staging block, both of the carry's size and valid until every stream of the run
    /// has drained; no lane reads the staging block before this copy has executed.
    unsafe fn keep_carry(&self, carry: &GpuCarry) -> Result<(), GpuError> {
        let Some(keep) = carry.keep else {
            return Ok(());
        };
        // SAFETY: the carry's device block and its pinned staging block, each the carry's
        // size and valid until the copy has executed (this function's contract); another
        // lane reads the staging block only once this has executed (its turnstile waits for
        // the stage's callback), and this lane writes it again only for a later launch.
        unsafe {
            self.gpu.copy_to_host(
                keep.ptr,
                carry.args.carry.cast(),
                carry.args.bytes as usize,
                self.stream.raw(),
            )
        }?;
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
    /// the uploads and every launch; a stateful stage's stream also waits for the stage in the
    /// frame before, copies over the carry what it must start from (zeros, or the carry
    /// another lane left), gives the launch its carry, and keeps a copy in host memory when
    /// another lane may take it ([`CarryEnqueue`]). On the chain: the tiled stage's tile, or
    /// for the graph's first stage the staged frame's upload and the graph's launch.
    pub(crate) fn enqueue_gpu(
        &self,
        stage: StageId,
        task: u32,
        carry: Option<CarryEnqueue>,
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
        let launches = if g.per_tile {
            task..task + 1
        } else {
            g.wait_for_producers()?;
            0..self.stages[stage.0].launches
        };
        if let Some(c) = &carry {
            // SAFETY: the carry's blocks are its lane's for the whole run (a `LaneCarry`'s),
            // and its turnstile admitted this launch alone.
            unsafe { g.carry_before(c) }?;
        }
        for launch in launches {
            // SAFETY: a staged frame in `source` is kept by the run until its streams have
            // drained; the carry's block is its lane's for the run, used by this launch alone.
            unsafe { self.enqueue_launch(g, stage, launch, source, carry.map(|c| c.carry.args)) }?;
        }
        if let Some(c) = &carry {
            // SAFETY: the carry's blocks are its lane's for the whole run (a `LaneCarry`'s);
            // its turnstile lets another lane read the staging block only once this copy has
            // executed.
            unsafe { g.keep_carry(&c.carry) }?;
        }
        Ok(())
    }

    /// Enqueues launch `launch` of GPU stage `g` (`stage`) on its own stream: the uploads due
    /// before it, the launch with `carry`, and when profiling the launch's timing events
    /// around both.
    ///
    /// # Safety
    /// A staged frame in `source` holds the source tensor's bytes until every stream of the
    /// run has drained; `carry`, if any, points at the stage's carry, valid for the run and
    /// used by no other launch until this one has executed.
    unsafe fn enqueue_launch(
        &self,
        g: &SlotGpu,
        stage: StageId,
        launch: u32,
        source: SourceBytes,
        carry: Option<CarryArgs>,
    ) -> Result<(), LaunchFailure> {
        let stream = g.stream.raw();
        let timing = g.timing.get(launch as usize);
        if let Some((start, _)) = timing {
            // SAFETY: `start` is this slot's timing event and `stream` the stage's stream, both
            // made on the stage's GPU and alive as long as the slot.
            unsafe { g.gpu.record(start.raw(), stream) }?;
        }
        // SAFETY: the copies' blocks are this slot's, from pools that outlive every stream of
        // the run; a staged frame lives as long (this function's contract); `stream` is the
        // stage's, on its GPU.
        unsafe { g.upload_before(launch, stream, source) }?;
        // SAFETY: the request points at this slot's kernel state, tensors and workspace of
        // `launch`, alive until the run has drained its streams, and at `carry` (this
        // function's contract). Nothing else writes what the launch writes while it runs: the
        // slot's next frame is queued behind it on this stream (`in_order` checked it), and
        // each launch of a frame has its own tile and workspace.
        let request = unsafe { self.request(stage, launch, carry) };
        // SAFETY: everything `request` points at stays valid until the stream has executed it,
        // as just said; `stream` is the stage's, on the GPU its kernel was loaded for.
        unsafe { g.gpu.enqueue_launch(stream, request) }?;
        if let Some((_, end)) = timing {
            // SAFETY: `end` is this slot's timing event and `stream` the stage's stream, both
            // made on the stage's GPU and alive as long as the slot.
            unsafe { g.gpu.record(end.raw(), stream) }?;
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
                    // SAFETY: `frame` is a staged frame of the source tensor's size, which the
                    // run keeps until its streams have drained; the reader's mirror is this
                    // slot's; the chain's stream is the reader's GPU's.
                    unsafe { r.upload_staged(frame, chain.stream) }?;
                }
                // SAFETY: the slot's graph, captured on this GPU and destroyed only with the
                // slot, whose work touches only the slot's blocks, its kernel states and
                // workspaces and its callbacks, all alive until the slot's streams have
                // drained; a reused slot's next frame is queued behind this one on the chain's
                // stream (`in_order` checked it), so nothing else writes what it writes.
                unsafe { g.gpu.launch_graph(graph.raw(), chain.stream) }?;
            }
            _ if chain.tiles == Some(stage) => {
                // SAFETY: the copies' blocks are this slot's, from pools that outlive every
                // stream of the run (a tiled stage's source is never staged); the chain's
                // stream is the stage's GPU's.
                unsafe { g.upload_before(task, chain.stream, SourceBytes::Slot) }?;
                // SAFETY: the request points at this slot's kernel state, tensors and the
                // tile's workspace, alive until the slot's streams have drained; nothing else
                // writes the tile while it runs: each tile has its own part and workspace, and
                // the slot's next frame is queued behind it on the chain's stream (checked).
                let request = unsafe { self.request(stage, task, None) };
                // SAFETY: everything `request` points at stays valid until the stream has
                // executed it, as just said.
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
            // SAFETY: `start` is this slot's timing event and `stream` the stage's stream (or
            // the chain's), both made on the stage's GPU and alive as long as the slot.
            unsafe { g.gpu.record(start.raw(), stream) }?;
        }
        // SAFETY: the copies' blocks are this slot's device homes and pinned mirrors, from
        // pools that outlive every stream of the run; `stream` is the stage's GPU's.
        unsafe { g.download(stream) }?;
        if let Some((_, end)) = timing {
            // SAFETY: `end` is this slot's timing event and `stream` the stage's stream (or
            // the chain's), both made on the stage's GPU and alive as long as the slot.
            unsafe { g.gpu.record(end.raw(), stream) }?;
        }
        if self.chain.is_none() {
            // SAFETY: the stage's fence in this slot and its stream, both made on its GPU and
            // alive as long as the slot.
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
                // SAFETY: the copies' blocks are this slot's, valid for every launch of the
                // graph (the slot outlives its streams' work); a staged frame's upload is not
                // captured (`SourceBytes::Ahead`); `stream` is the stage's GPU's.
                unsafe { g.upload_before(launch, stream, source) }?;
                // SAFETY: the request points at this slot's kernel state, tensors and the
                // launch's workspace, valid for every launch of the graph as the blocks are;
                // launches of one graph never overlap, and each launch of a stage has its own
                // tile and workspace.
                let request = unsafe { self.request(stage, launch, None) };
                // SAFETY: everything `request` points at stays valid until every launch of the
                // graph has executed, as just said.
                unsafe { g.gpu.enqueue_launch(stream, request) }.map_err(|e| match e {
                    LaunchFailure::Device(e) => e,
                    LaunchFailure::Kernel(e) => {
                        GpuError::new(g.gpu.name(), "launch", e.to_string())
                    }
                })
            });
            captured.map_err(|e| failed(Some(stage), e.to_string()))?;
            // SAFETY: the copies' blocks are this slot's device homes and pinned mirrors,
            // valid for every launch of the graph; `stream` is the stage's GPU's.
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

//! Frame slots: everything one frame in flight owns.
//!
//! A slot holds a buffer (and a mirror where it crosses the bus) for each tensor that lives as
//! long as the frame's slot ([`Lifetime::Slot`]: the source tensor, the sinks, anything a GPU
//! touches), one kernel state per stage, and the launch arguments built from them; for each
//! GPU stage, a workspace per launch, a stream, an event (its fence), the events of the GPU
//! stages it waits on, and the copies it enqueues. Tensors that live only while the frame's
//! stages run come from a set the frame binds at its first launch ([`FrameSets::bind`]), and
//! CPU stages' workspaces from the worker that runs the launch (see [`super::scratch`]). All
//! are made once before the run, so running or enqueueing a launch touches no allocator. The
//! counters that order a frame's stages live here too; [`Slot::reset`] rearms them before the
//! slot is reused.
//!
//! [`Lifetime::Slot`]: crate::plan::Lifetime::Slot

use std::cell::UnsafeCell;
use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use kplace_abi::{Tensor, Tile};

use crate::cuda::owned::{OwnedEvent, OwnedStream};
use crate::cuda::{Event, Gpu, GpuError, HostFn, LaunchFailure, LaunchRequest};
use crate::executor::pool::{Block, Pool};
use crate::model::graph::{Producer, StageId, TensorId};
use crate::model::placement::Device;
use crate::plan::{Lifetime, Plan, PoolPurpose, tensor_desc};
use crate::plugin::{CarryArgs, KernelState};

use super::RunError;
use super::carry::GpuCarry;
use super::schedule::Schedule;
use super::scratch::{FrameSets, UNBOUND, WorkerScratch, take};
use super::slot_error::SlotError;

mod build;

/// The flag in [`Slot`]'s pending count of a frame ended with packets missing.
const ABANDONED: u32 = 1 << 31;

/// One frame in flight.
pub(crate) struct Slot {
    /// Per graph tensor, where its writer writes it: the slot's buffer, or `None` for a tensor
    /// that lives only while the stages run (its buffer is in the frame's set).
    buffers: Vec<Option<Block>>,
    /// Per graph tensor, the buffer the host reads (the home or the mirror); `None` as above.
    host_views: Vec<Option<Block>>,
    /// The set of buffers the frame bound at its first launch that needed one
    /// ([`FrameSets::bind`]), or [`UNBOUND`].
    set: AtomicU32,
    stages: Vec<SlotStage>,
    /// Per stage: predecessor stages (and the source's frame end) still to finish.
    waiting: Vec<AtomicU32>,
    /// Per stage: launches still to finish.
    launches_left: Vec<AtomicU32>,
    /// Stages still to finish.
    stages_left: AtomicU32,
    /// Launches sent and not yet finished, with [`ABANDONED`] set once the frame is partial.
    pending: AtomicU32,
    /// The frame's id as the source numbered it.
    pub(crate) frame_id: AtomicU64,
    /// Order in which frames began, for in-order delivery.
    pub(crate) sequence: AtomicU64,
    /// Nanoseconds since the run started: first and last packet.
    pub(crate) first_packet_ns: AtomicU64,
    pub(crate) last_packet_ns: AtomicU64,
}

struct SlotStage {
    /// Replaced only while nothing of the slot runs or is queued ([`Slot::replace_state`]).
    state: UnsafeCell<KernelState>,
    /// The launch's tensors; those in `from_set` are placeholders, filled in per launch.
    inputs: Vec<Tensor>,
    outputs: Vec<Tensor>,
    /// The ports whose tensor lives only while the stages run: its buffer is the frame's set's.
    from_set: Vec<SetPort>,
    /// A GPU stage's workspaces, one per launch of a frame (a CPU stage uses its worker's).
    workspaces: Vec<Block>,
    /// Launches per frame.
    launches: u32,
    split_axis_tile: Option<u64>,
    axis_extent: u64,
    /// What a GPU stage enqueues on; `None` on the CPU.
    gpu: Option<SlotGpu>,
}

/// A GPU stage's stream, fence and copies in one slot.
struct SlotGpu {
    gpu: Arc<dyn Gpu>,
    stream: OwnedStream,
    /// Recorded after the stage's launches and downloads: its writes are complete.
    event: OwnedEvent,
    /// Events of the GPU stages whose outputs it reads, in this slot.
    waits: Vec<Event>,
    uploads: Vec<MirrorCopy>,
    downloads: Vec<MirrorCopy>,
    /// Whether each task enqueues one tile (the source streams it), or all launches at once.
    per_tile: bool,
    /// When profiling: timing events around each launch (with its uploads), then one pair
    /// around the downloads; empty otherwise.
    timing: Vec<(OwnedEvent, OwnedEvent)>,
    /// One more than the sequence number of the latest frame with work enqueued on `stream`
    /// (0 before the first): see [`Slot::enqueue_gpu`].
    enqueued_through: AtomicU64,
    /// When tracing: the run's clock when the stage's host callback ran for the current frame
    /// ([`Slot::gpu_callback_at`]), which places its timing events on the run's timeline.
    callback_ns: AtomicU64,
}

/// A launch argument whose buffer comes from the frame's set.
#[derive(Clone, Copy)]
struct SetPort {
    /// An output port, else an input.
    output: bool,
    /// Its index among the stage's inputs or outputs.
    index: usize,
    tensor: TensorId,
}

/// One copy between a tensor's home and mirror: whole, or in `pieces` equal parts.
#[derive(Clone, Copy)]
struct MirrorCopy {
    dst: *mut u8,
    src: *const u8,
    bytes: usize,
    pieces: u64,
}

impl MirrorCopy {
    /// Bytes and offset of piece `index` (the whole copy when it has one piece).
    fn piece(&self, index: u64) -> (usize, usize) {
        let len = self.bytes / self.pieces as usize;
        (index as usize * len, len)
    }
}

// SAFETY: tensors and blocks are raw addresses into pools that outlive the slot; which thread
// may touch which bytes is decided by the schedule's counters.
unsafe impl Send for Slot {}
// SAFETY: as for Send: shared access to the bytes is ordered by the schedule's counters.
unsafe impl Sync for Slot {}

/// What became of a stage's launch.
pub(crate) enum Completion {
    /// More launches of the stage are outstanding.
    Pending,
    /// That was the stage's last launch.
    StageDone,
}

impl SlotStage {
    fn state(&self) -> &KernelState {
        // SAFETY: the state is replaced only while nothing of the slot runs or is queued
        // (`Slot::replace_state`'s contract), so no borrow from here is alive then.
        unsafe { &*self.state.get() }
    }
}

impl Slot {
    /// Replaces `stage`'s kernel state with `state` (new parameters), returning the old one.
    ///
    /// # Safety
    /// Nothing of the slot runs or is queued: the slot has just been taken for a new frame,
    /// and `stage` runs on the CPU (a GPU stream may still hold launches of a partial frame).
    pub(crate) unsafe fn replace_state(&self, stage: StageId, state: KernelState) -> KernelState {
        // SAFETY: per the contract, no reference to the state is alive.
        unsafe { std::mem::replace(&mut *self.stages[stage.0].state.get(), state) }
    }

    /// Rearms the counters for a new frame. Only called while no launch of the slot runs.
    pub(crate) fn reset(&self, schedule: &Schedule) {
        for (w, &initial) in self.waiting.iter().zip(&schedule.initial_waiting) {
            w.store(initial, Ordering::Relaxed);
        }
        for (l, &initial) in self.launches_left.iter().zip(&schedule.tasks) {
            l.store(initial, Ordering::Relaxed);
        }
        self.stages_left
            .store(self.stages.len() as u32, Ordering::Relaxed);
        self.pending.store(0, Ordering::Relaxed);
    }

    /// The slot's buffer of tensor `index`; `None` for a tensor that lives only while the
    /// stages run.
    pub(crate) fn buffer(&self, index: usize) -> Option<Block> {
        self.buffers[index]
    }

    /// The host-readable buffer of tensor `index`: its home, or its mirror when the home is
    /// device memory; `None` as for [`Slot::buffer`].
    pub(crate) fn host_buffer(&self, index: usize) -> Option<Block> {
        self.host_views[index]
    }

    /// Returns the frame's set, if it bound one, for the next frame to take. Only once nothing
    /// of the frame runs or is queued: all its stages have ended, or it is partial and its
    /// last launch has.
    pub(crate) fn release_set(&self, sets: &FrameSets) {
        sets.release(&self.set);
    }

    /// Whether `stage` runs on a GPU.
    pub(crate) fn is_gpu(&self, stage: StageId) -> bool {
        self.stages[stage.0].gpu.is_some()
    }

    /// The event GPU stage `stage` records after its work in this slot; `None` on the CPU.
    pub(crate) fn gpu_event(&self, stage: StageId) -> Option<Event> {
        self.stages[stage.0].gpu.as_ref().map(|g| g.event.raw())
    }

    fn tile(s: &SlotStage, launch: u32) -> Tile {
        match s.split_axis_tile {
            Some(tile) => Tile {
                begin: u64::from(launch) * tile,
                count: tile,
            },
            None => Tile {
                begin: 0,
                count: s.axis_extent,
            },
        }
    }

    /// Runs launch `launch` of CPU stage `stage` on the calling thread, a worker, with the
    /// worker's workspace and, for tensors that live only while the stages run, the frame's
    /// set (bound now if this is the frame's first launch that needs one).
    pub(crate) fn launch(
        &self,
        stage: StageId,
        launch: u32,
        sets: &FrameSets,
        scratch: &mut WorkerScratch,
        carry: Option<&CarryArgs>,
    ) -> Result<(), RunError> {
        let s = &self.stages[stage.0];
        let ws = scratch.workspace(stage.0).ok_or(SlotError::PoolMissing)?;
        let (inputs, outputs) = if s.from_set.is_empty() {
            (s.inputs.as_slice(), s.outputs.as_slice())
        } else {
            let set = sets.bind(&self.set).ok_or(SlotError::NoFreeSet)?;
            // Within their capacity, the widest stage's: no allocation.
            scratch.inputs.clear();
            scratch.inputs.extend_from_slice(&s.inputs);
            scratch.outputs.clear();
            scratch.outputs.extend_from_slice(&s.outputs);
            for port in &s.from_set {
                let block = sets.block(set, port.tensor).ok_or(SlotError::PoolMissing)?;
                let side = if port.output {
                    &mut scratch.outputs
                } else {
                    &mut scratch.inputs
                };
                side[port.index].data = block.ptr.cast();
            }
            (scratch.inputs.as_slice(), scratch.outputs.as_slice())
        };
        // SAFETY: the buffers and workspace come from pools sized by the plan; the schedule
        // runs a launch only once its inputs are complete, and runs concurrent launches of one
        // stage only on disjoint tiles; the frame's set is bound to this frame alone until its
        // stages end; the workspace is this worker's, which runs one launch at a time; a
        // carry is its stage's, which its turnstile admits one launch at a time.
        unsafe {
            s.state().launch_with(
                inputs,
                outputs,
                (ws.ptr.cast(), ws.bytes),
                std::ptr::null_mut(),
                Self::tile(s, launch),
                carry,
            )
        }?;
        Ok(())
    }

    /// Enqueues task `task` of GPU stage `stage` on its stream, without waiting for the GPU:
    /// one tile with its piece of the upload when the stage is fed tile by tile, else the
    /// stream waits on its producers' events, the whole uploads, and every launch. A stateful
    /// stage's stream also waits for `carry`'s event (the stage's in the frame before), copies
    /// over the carry what it must start from (zeros, or the carry another lane left), gives
    /// the launch its carry, and keeps a copy in host memory when another lane may take it.
    pub(crate) fn enqueue_gpu(
        &self,
        stage: StageId,
        task: u32,
        carry: Option<(GpuCarry, Option<Event>)>,
    ) -> Result<(), LaunchFailure> {
        let s = &self.stages[stage.0];
        let g = s
            .gpu
            .as_ref()
            .expect("enqueue_gpu is called for GPU stages only");
        g.gpu.bind_thread()?;
        // A complete frame's slot is reused only after the stage's event has completed; a
        // partial frame's, once its tasks are enqueued, while its uploads and launches may
        // still be queued. They touch only this slot's buffers, and run before the slot's next
        // frame's work only because both go on this one stream, in order: check it, so that
        // no change of streams or schedule can silently break it.
        let frame = self.sequence.load(Ordering::Relaxed) + 1;
        let latest = g.enqueued_through.fetch_max(frame, Ordering::AcqRel);
        if latest > frame {
            return Err(GpuError::new(
                g.gpu.name(),
                format!("enqueue of stage {} in a reused slot", stage.0),
                format!(
                    "frame {} would be queued behind frame {} on the same stream",
                    frame - 1,
                    latest - 1
                ),
            )
            .into());
        }
        let launches = if g.per_tile {
            task..task + 1
        } else {
            0..s.launches
        };
        // SAFETY: every address comes from this slot's pools, sized by the plan; the pools
        // outlive every stream (drained before they are freed), and work of a frame whose
        // slot is reused is ordered before the next frame's on this stream (checked above);
        // events and the stream belong to this slot, but for the carry's event, the stage's
        // in the frame before, whose slot records it again only after this frame's turn.
        unsafe {
            if !g.per_tile {
                for &event in &g.waits {
                    g.gpu.wait(g.stream.raw(), event)?;
                }
            }
            if let Some((c, after)) = &carry {
                if let Some(event) = after {
                    g.gpu.wait(g.stream.raw(), *event)?;
                }
                if let Some(upload) = c.upload {
                    g.gpu.copy_to_device(
                        c.args.carry.cast(),
                        upload.ptr,
                        c.args.bytes as usize,
                        g.stream.raw(),
                    )?;
                }
            }
            for launch in launches {
                let timing = g.timing.get(launch as usize);
                if let Some((start, _)) = timing {
                    g.gpu.record(start.raw(), g.stream.raw())?;
                }
                // A split upload goes piece by piece, each before its tile's launch; a whole
                // one before the first launch.
                for copy in &g.uploads {
                    if copy.pieces > 1 || launch == 0 {
                        let piece = if copy.pieces > 1 {
                            u64::from(launch)
                        } else {
                            0
                        };
                        let (offset, len) = copy.piece(piece);
                        g.gpu.copy_to_device(
                            copy.dst.add(offset),
                            copy.src.add(offset),
                            len,
                            g.stream.raw(),
                        )?;
                    }
                }
                let ws = s.workspaces[launch as usize];
                let tile = Self::tile(s, launch);
                let request = LaunchRequest::new(
                    s.state(),
                    &s.inputs,
                    &s.outputs,
                    (ws.ptr.cast(), ws.bytes),
                    tile,
                )
                .with_carry(carry.map(|(c, _)| c.args));
                g.gpu.enqueue_launch(g.stream.raw(), request)?;
                if let Some((_, end)) = timing {
                    g.gpu.record(end.raw(), g.stream.raw())?;
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
                g.gpu.copy_to_host(
                    keep.ptr,
                    args.carry.cast(),
                    args.bytes as usize,
                    g.stream.raw(),
                )?;
            }
        }
        Ok(())
    }

    /// After the last task of GPU stage `stage`: enqueues its downloads, records its event
    /// (the fence its GPU readers wait on), then `func(data)` to run once all of it has
    /// executed (the host side of the fence, which releases its CPU readers).
    pub(crate) fn fence_gpu(
        &self,
        stage: StageId,
        func: HostFn,
        data: *mut c_void,
    ) -> Result<(), GpuError> {
        let g = self.stages[stage.0]
            .gpu
            .as_ref()
            .expect("fence_gpu is called for GPU stages only");
        // SAFETY: as in `enqueue_gpu`; `data` outlives the run (the executor drains every
        // stream before releasing it).
        unsafe {
            let timing = if g.downloads.is_empty() {
                None
            } else {
                g.timing.last()
            };
            if let Some((start, _)) = timing {
                g.gpu.record(start.raw(), g.stream.raw())?;
            }
            for copy in &g.downloads {
                g.gpu
                    .copy_to_host(copy.dst, copy.src, copy.bytes, g.stream.raw())?;
            }
            if let Some((_, end)) = timing {
                g.gpu.record(end.raw(), g.stream.raw())?;
            }
            g.gpu.record(g.event.raw(), g.stream.raw())?;
            g.gpu.call_host(g.stream.raw(), func, data)
        }
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
    pub(crate) fn gpu_spans(
        &self,
        stage: StageId,
        slot: u32,
        frame: u64,
        out: &mut crate::report::trace::SpanBuffer,
    ) -> Result<(), GpuError> {
        use crate::report::trace::{Span, SpanKind, Track};
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

    /// Records one finished launch of `stage`.
    pub(crate) fn finish_launch(&self, stage: StageId) -> Completion {
        if self.launches_left[stage.0].fetch_sub(1, Ordering::AcqRel) == 1 {
            Completion::StageDone
        } else {
            Completion::Pending
        }
    }

    /// Records that one thing `stage` waits for is done; true when it is now ready.
    pub(crate) fn satisfy(&self, stage: StageId) -> bool {
        self.waiting[stage.0].fetch_sub(1, Ordering::AcqRel) == 1
    }

    /// Counts `n` launches about to be sent.
    pub(crate) fn add_launches(&self, n: u32) {
        self.pending.fetch_add(n, Ordering::AcqRel);
    }

    /// Counts one launch finished; true when it was the last of a frame already abandoned,
    /// which is then complete as partial.
    pub(crate) fn launch_finished(&self) -> bool {
        self.pending.fetch_sub(1, Ordering::AcqRel) == ABANDONED | 1
    }

    /// Marks the frame partial; true when no launch is running, so it is complete now.
    pub(crate) fn abandon(&self) -> bool {
        self.pending.fetch_or(ABANDONED, Ordering::AcqRel) == 0
    }

    /// Records a finished stage; true when it was the frame's last.
    pub(crate) fn finish_stage(&self) -> bool {
        self.stages_left.fetch_sub(1, Ordering::AcqRel) == 1
    }
}

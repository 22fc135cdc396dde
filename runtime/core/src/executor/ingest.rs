//! The source's side of the executor: opening frames in free slots, writing packets straight
//! into place, and ending frames complete or partial.
//!
//! An [`Ingest`] belongs to the source thread. Any number of frames may be open at once (a
//! packet receiver assembles several when packets of consecutive frames interleave), each
//! named by the [`OpenFrame`] token that [`Ingest::begin_frame`] or
//! [`Ingest::try_begin_frame`] returns and [`Ingest::finish`] consumes. Guarantees: a packet's
//! place can be written only while the packet is absent, so a duplicate never overwrites bytes
//! a launch may be reading; each streamed tile is launched exactly once, when its last packet
//! arrives; a frame finished with packets missing completes as *partial*: no further stage
//! starts, and its slot returns once the launches already running end. In a run that adapts,
//! a frame opens in the lane the switching rule chose last and stays there; an open-loop
//! source's frame that finds that lane's slots full opens in another lane rather than being
//! dropped.
//!
//! A source of whole frames prepared in memory ([`crate::executor::Delivery::Frames`]) may,
//! when a GPU stage alone reads them ([`Ingest::takes_whole_frames`]), stage them once in
//! pinned memory ([`Ingest::stage`]) and hand each frame over as a staged one
//! ([`Ingest::deliver_staged`]): the GPU's copy engine then reads the staged frame, and no
//! thread copies its bytes. The staged memory is the run's until every stream has drained.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam::channel::{Receiver, RecvTimeoutError, TryRecvError};

use super::Shared;
use crate::cuda::GpuError;
use crate::cuda::owned::{GpuMemory, MemoryKind};
use crate::measure::overhead::SourceTally;
use crate::measure::trace::{Span, SpanBuffer, SpanKind, Track};

/// The source thread's handle for writing frames into slots.
pub struct Ingest<'r> {
    lanes: Vec<IngestLane<'r>>,
    pub(super) begun: u64,
    /// The source thread's spans, when the run is traced.
    pub(super) spans: SpanBuffer,
    /// The source thread's time waiting for a free slot (its busy time and the count of its
    /// waits are filled in when it ends).
    pub(super) tally: SourceTally,
}

/// Why frames could not be staged ([`Ingest::stage`]): the source then writes them into the
/// slots packet by packet, as for a packet receiver.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    /// The run does not take whole frames ([`Ingest::takes_whole_frames`]).
    #[error(
        "this run takes frames packet by packet (a CPU stage or the sink reads them, or the run switches placements)"
    )]
    NotTaken,
    /// A frame is not the size of the graph's source tensor.
    #[error(
        "prepared frame {index} has {bytes} bytes, but the graph's source tensor needs {expected}"
    )]
    Size {
        /// Its index among the frames given.
        index: usize,
        /// Its size.
        bytes: usize,
        /// The source tensor's.
        expected: usize,
    },
    /// Pinned memory could not be allocated (the run's pinned pools and the staged frames
    /// together exceed what the machine gives).
    #[error("staging {frames} frames of {bytes} bytes each in pinned memory: {error}")]
    Pinned {
        /// Frames asked for.
        frames: usize,
        /// Bytes each.
        bytes: usize,
        /// The driver's error.
        error: GpuError,
    },
}

/// The source's side of one lane: its free slots, and which packets each slot holds.
struct IngestLane<'r> {
    shared: &'r Shared<'r>,
    free: Receiver<usize>,
    /// Per slot: which packets are present.
    present: Vec<Vec<bool>>,
    /// Per slot: packets present.
    received: Vec<u64>,
    /// Per slot, per streamed stage, per tile: packets present.
    tile_counts: Vec<Vec<Vec<u32>>>,
    /// The frames staged in pinned memory, by index ([`Ingest::stage`]).
    staged: Vec<*mut u8>,
}

impl<'r> IngestLane<'r> {
    fn new(shared: &'r Shared<'r>, free: Receiver<usize>) -> Self {
        let s = &shared.schedule;
        let slots = shared.slots.len();
        IngestLane {
            shared,
            free,
            present: vec![vec![false; s.packets as usize]; slots],
            received: vec![0; slots],
            tile_counts: vec![
                s.streamed
                    .iter()
                    .map(|&(_, tile)| vec![0; (s.packets / tile) as usize])
                    .collect();
                slots
            ],
            staged: Vec::new(),
        }
    }
}

/// A frame open in a slot: the token for writing its packets and ending it. Not `Clone`: the
/// frame has one writer and is ended once.
#[derive(Debug, PartialEq, Eq)]
pub struct OpenFrame {
    lane: usize,
    slot: usize,
    frame_id: u64,
}

impl OpenFrame {
    /// The frame's id, as the source gave it.
    pub fn frame_id(&self) -> u64 {
        self.frame_id
    }
}

/// What became of one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketStatus {
    /// Stored in its place.
    Accepted,
    /// Its index was already present: ignored.
    Duplicate,
    /// Its index is outside the frame: ignored.
    OutOfRange,
}

/// Why no frame could be opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BeginError {
    /// Every slot holds a frame in flight: the pipeline is behind.
    NoFreeSlot,
    /// The run is stopping.
    Stopping,
}

impl<'r> Ingest<'r> {
    /// The source's handle on `lanes`, each with its free slots.
    pub(super) fn new(lanes: &'r [Shared<'r>], free: Vec<Receiver<usize>>) -> Self {
        Ingest {
            lanes: lanes
                .iter()
                .zip(free)
                .map(|(s, f)| IngestLane::new(s, f))
                .collect(),
            begun: 0,
            spans: SpanBuffer::new(lanes[0].span_limit),
            tally: SourceTally::default(),
        }
    }

    /// The lane new frames begin in.
    fn active(&self) -> usize {
        let common = self.lanes[0].shared.common;
        common
            .active
            .load(Ordering::Acquire)
            .min(self.lanes.len() - 1)
    }

    /// Any lane's state: the run's clock, stop and losses are every lane's.
    fn shared(&self) -> &'r Shared<'r> {
        self.lanes[0].shared
    }

    /// Whether the run takes whole frames staged in pinned memory ([`Ingest::stage`]): it asked
    /// the source for whole frames, runs one placement, and only a GPU stage reads the source
    /// tensor, so the GPU's copy engine can read each frame where it was staged.
    pub fn takes_whole_frames(&self) -> bool {
        !self.shared().common.several && self.shared().path.staged
    }

    /// Copies `frames` once into pinned memory of the GPU that reads them, for
    /// [`Ingest::deliver_staged`]; a run stages at most once (a second call replaces nothing
    /// and stages again). Its time is counted apart from the source's per-frame work
    /// ([`SourceTally::staging`]). On an error nothing is staged and the source goes on
    /// packet by packet.
    pub fn stage(&mut self, frames: &[Vec<u8>]) -> Result<(), StageError> {
        if !self.takes_whole_frames() {
            return Err(StageError::NotTaken);
        }
        let started = Instant::now();
        let shared = self.shared();
        let expected = self.packet_bytes() * self.packets_per_frame() as usize;
        if let Some((index, f)) = frames.iter().enumerate().find(|(_, f)| f.len() != expected) {
            return Err(StageError::Size {
                index,
                bytes: f.len(),
                expected,
            });
        }
        let pinned = |error| StageError::Pinned {
            frames: frames.len(),
            bytes: expected,
            error,
        };
        let source = &shared.plan.edges[shared.plan.graph.source.tensor.0];
        let gpu = source
            .space
            .gpu()
            .and_then(|n| shared.plan.gpus.get(&n))
            .ok_or(StageError::NotTaken)?;
        let mut blocks = Vec::with_capacity(frames.len());
        for frame in frames {
            let block = GpuMemory::new(gpu, MemoryKind::Pinned, expected).map_err(pinned)?;
            // SAFETY: a fresh pinned block of `expected` bytes, which `frame` holds; nothing
            // else knows the block yet.
            unsafe { std::ptr::copy_nonoverlapping(frame.as_ptr(), block.ptr(), expected) };
            blocks.push(block);
        }
        self.lanes[0].staged = blocks.iter().map(GpuMemory::ptr).collect();
        // The run keeps the blocks until its streams have drained; frames staged before (a
        // second call) are kept as well, since uploads of them may still be queued.
        shared
            .staged_frames
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(blocks);
        self.tally.staging += started.elapsed();
        Ok(())
    }

    /// Hands over `frame` whole, its bytes those of staged frame `index` ([`Ingest::stage`]):
    /// every packet is present at once, none copied, and the frame ends as
    /// [`Ingest::finish`] ends a complete one, returning what it returns. When no frame
    /// `index` was staged, the frame comes back still open, for the caller to fill and finish.
    pub fn deliver_staged(&mut self, frame: OpenFrame, index: usize) -> Result<bool, OpenFrame> {
        let lane = &mut self.lanes[frame.lane];
        let Some(&bytes) = lane.staged.get(index) else {
            return Err(frame);
        };
        let shared = lane.shared;
        let slot = &shared.slots[frame.slot];
        slot.use_staged_source(bytes);
        let now = shared.now_ns();
        slot.first_packet_ns.store(now, Ordering::Relaxed);
        slot.last_packet_ns.store(now, Ordering::Relaxed);
        lane.present[frame.slot].fill(true);
        lane.received[frame.slot] = shared.schedule.packets;
        Ok(self.finish(frame))
    }

    /// Packets per frame.
    pub fn packets_per_frame(&self) -> u64 {
        self.shared().schedule.packets
    }

    /// Bytes of one packet's payload.
    pub fn packet_bytes(&self) -> usize {
        self.shared().schedule.packet_bytes as usize
    }

    /// Frame slots of the run: frames in flight at most (of the placement new frames begin
    /// on, when the run adapts).
    pub fn slots(&self) -> usize {
        self.lanes[self.active()].shared.slots.len()
    }

    /// Whether the run is stopping, or an interrupt asked intake to stop
    /// ([`crate::interrupt`]); a source should return soon.
    pub fn stopping(&self) -> bool {
        self.shared().common.stopping.load(Ordering::Acquire) || crate::interrupt::requested()
    }

    /// Waits for a free slot and opens frame `frame_id` in it; `None` when the run is
    /// stopping. For closed-loop sources (replay, files); a wait is counted as backpressure.
    pub fn begin_frame(&mut self, frame_id: u64) -> Option<OpenFrame> {
        if self.stopping() {
            return None;
        }
        let lane = self.active();
        let slot = match self.lanes[lane].free.try_recv() {
            Ok(slot) => slot,
            Err(TryRecvError::Disconnected) => return None,
            Err(TryRecvError::Empty) => self.wait_for_slot(lane, frame_id, |free, spin| {
                // A slot freed while the source spins costs the collector no wake-up.
                super::wait::spin_recv(spin, free).unwrap_or_else(|| free.recv().ok())
            })?,
        };
        // A slot taken while the run stops is never returned: nothing will use it again.
        if self.stopping() {
            return None;
        }
        Some(self.open(lane, slot, frame_id))
    }

    /// Opens frame `frame_id` in a free slot without waiting. For open-loop sources (packet
    /// receivers): with no free slot the frame is dropped, and counted as such.
    pub fn try_begin_frame(&mut self, frame_id: u64) -> Result<OpenFrame, BeginError> {
        if self.stopping() {
            return Err(BeginError::Stopping);
        }
        match self.try_slot() {
            Ok((lane, slot)) => Ok(self.open(lane, slot, frame_id)),
            Err(TryRecvError::Empty) => {
                self.shared().common.dropped.fetch_add(1, Ordering::Relaxed);
                Err(BeginError::NoFreeSlot)
            }
            Err(TryRecvError::Disconnected) => Err(BeginError::Stopping),
        }
    }

    /// Opens frame `frame_id` in a free slot, waiting at most `wait` for one. For an open-loop
    /// source that has just ended a frame which held slots back (frames are delivered in the
    /// order they began), so a slot is on its way; with none by then the frame is dropped, and
    /// counted as such.
    pub fn begin_frame_within(
        &mut self,
        frame_id: u64,
        wait: Duration,
    ) -> Result<OpenFrame, BeginError> {
        if self.stopping() {
            return Err(BeginError::Stopping);
        }
        let lane = self.active();
        let (lane, slot) = match self.try_slot() {
            Ok(free) => free,
            Err(TryRecvError::Disconnected) => return Err(BeginError::Stopping),
            Err(TryRecvError::Empty) => {
                match self.wait_for_slot(lane, frame_id, |free, _| free.recv_timeout(wait)) {
                    Ok(slot) => (lane, slot),
                    Err(RecvTimeoutError::Timeout) => {
                        self.shared().common.dropped.fetch_add(1, Ordering::Relaxed);
                        return Err(BeginError::NoFreeSlot);
                    }
                    Err(RecvTimeoutError::Disconnected) => return Err(BeginError::Stopping),
                }
            }
        };
        if self.stopping() {
            return Err(BeginError::Stopping);
        }
        Ok(self.open(lane, slot, frame_id))
    }

    /// A free slot of the active lane, or, when the run adapts and that lane has none, of
    /// another (the later ones first): an open-loop source's frame then runs on another
    /// placement rather than being dropped. Each such frame is counted as a slot miss, which
    /// the switching rule reads as pressure.
    fn try_slot(&mut self) -> Result<(usize, usize), TryRecvError> {
        let active = self.active();
        let empty = match self.lanes[active].free.try_recv() {
            Ok(slot) => return Ok((active, slot)),
            Err(e) => e,
        };
        if empty == TryRecvError::Disconnected || !self.shared().common.several {
            return Err(empty);
        }
        let common = self.shared().common;
        common.slot_misses.fetch_add(1, Ordering::Relaxed);
        let others = (active + 1..self.lanes.len()).chain((0..active).rev());
        for lane in others {
            if let Ok(slot) = self.lanes[lane].free.try_recv() {
                common.spilled.fetch_add(1, Ordering::Relaxed);
                return Ok((lane, slot));
            }
        }
        Err(TryRecvError::Empty)
    }

    /// Waits for a slot of `lane` with `receive` (given the free slots and the run's spin
    /// time), counted as backpressure: a wait, its time, and a span on the source's track when
    /// tracing.
    fn wait_for_slot<T>(
        &mut self,
        lane: usize,
        frame_id: u64,
        receive: impl FnOnce(&Receiver<usize>, Duration) -> T,
    ) -> T {
        let shared = self.lanes[lane].shared;
        shared.common.slot_waits.fetch_add(1, Ordering::Relaxed);
        let waited_from = shared.now_ns();
        let got = receive(&self.lanes[lane].free, shared.spin);
        let now = shared.now_ns();
        self.tally.slot_waited += Duration::from_nanos(now.saturating_sub(waited_from));
        if shared.trace {
            let span = Span::new(
                SpanKind::SlotWait,
                Track::Source,
                frame_id,
                waited_from,
                now,
            );
            self.spans.push(span);
        }
        got
    }

    fn open(&mut self, lane: usize, slot: usize, frame_id: u64) -> OpenFrame {
        let l = &mut self.lanes[lane];
        let s = &l.shared.slots[slot];
        s.frame_id.store(frame_id, Ordering::Relaxed);
        s.sequence.store(self.begun, Ordering::Relaxed);
        // Parameters changed while the run goes on take effect here, between frames.
        l.shared.swap_changed(slot, self.begun);
        // Its source bytes are the slot's own unless it is handed over staged.
        if let Some(home) = s.buffer(l.shared.plan.graph.source.tensor.0) {
            s.use_own_source(home.ptr);
        }
        // No packet yet: a frame that ends without one has no packet times.
        s.first_packet_ns.store(0, Ordering::Relaxed);
        s.last_packet_ns.store(0, Ordering::Relaxed);
        self.begun += 1;
        l.shared.common.begun[lane].fetch_add(1, Ordering::Release);
        l.present[slot].fill(false);
        l.received[slot] = 0;
        for counts in &mut l.tile_counts[slot] {
            counts.fill(0);
        }
        OpenFrame {
            lane,
            slot,
            frame_id,
        }
    }

    /// Whether packet `index` of `frame` is present.
    pub fn is_present(&self, frame: &OpenFrame, index: u64) -> bool {
        self.lanes[frame.lane].present[frame.slot]
            .get(index as usize)
            .copied()
            .unwrap_or(false)
    }

    /// The address of packet `index`'s place in `frame`'s source buffer, for a receiver that
    /// lets the kernel write payloads in place (`recvmmsg` into an iovec); `None` if the index
    /// is outside the frame or already present. The place holds [`Ingest::packet_bytes`]
    /// bytes and may be written until [`Ingest::packet_done`] or the frame's end.
    pub fn packet_place(&self, frame: &OpenFrame, index: u64) -> Option<*mut u8> {
        let lane = &self.lanes[frame.lane];
        if *lane.present[frame.slot].get(index as usize)? {
            return None;
        }
        let shared = lane.shared;
        let bytes = shared.schedule.packet_bytes as usize;
        // The source tensor lives as long as its slot, so the slot has its buffer.
        let block = shared.slots[frame.slot].buffer(shared.plan.graph.source.tensor.0)?;
        // SAFETY: index < packets, so the offset is inside the source buffer.
        Some(unsafe { block.ptr.add(index as usize * bytes) })
    }

    /// Packet `index`'s place in `frame`'s source buffer, to be written before
    /// [`Ingest::packet_done`]; `None` if the index is outside the frame or already present.
    pub fn packet_mut(&mut self, frame: &OpenFrame, index: u64) -> Option<&mut [u8]> {
        let place = self.packet_place(frame, index)?;
        // SAFETY: the place is inside the source buffer and holds packet_bytes bytes; the
        // packet is absent, so no launch reads it; only this thread writes the source buffer,
        // and the borrow of `self` keeps the slice unique.
        Some(unsafe { std::slice::from_raw_parts_mut(place, self.packet_bytes()) })
    }

    /// Marks packet `index` of `frame` as written, launching every streamed tile it completes.
    pub fn packet_done(&mut self, frame: &OpenFrame, index: u64) -> PacketStatus {
        let slot_index = frame.slot;
        let lane = &mut self.lanes[frame.lane];
        let Some(present) = lane.present[slot_index].get_mut(index as usize) else {
            return PacketStatus::OutOfRange;
        };
        if *present {
            return PacketStatus::Duplicate;
        }
        *present = true;
        let shared = lane.shared;
        let now = shared.now_ns();
        let slot = &shared.slots[slot_index];
        if lane.received[slot_index] == 0 {
            slot.first_packet_ns.store(now, Ordering::Relaxed);
        }
        slot.last_packet_ns.store(now, Ordering::Relaxed);
        lane.received[slot_index] += 1;
        for (k, &(stage, tile)) in shared.schedule.streamed.iter().enumerate() {
            let t = (index / tile) as usize;
            let count = &mut lane.tile_counts[slot_index][k][t];
            *count += 1;
            if u64::from(*count) == tile {
                slot.add_launches(1);
                shared.send_launch(slot_index, stage, t as u32, &shared.streamed);
            }
        }
        PacketStatus::Accepted
    }

    /// Packets of `frame` present so far.
    pub fn received(&self, frame: &OpenFrame) -> u64 {
        self.lanes[frame.lane].received[frame.slot]
    }

    /// Writes a whole frame's `bytes` into `frame`'s slot packet by packet, as a receiver
    /// would, then ends it: what a source of frames in memory (a replay, a caller's batch)
    /// does with each. `bytes` holds whole packets of [`Ingest::packet_bytes`] each.
    pub fn write_frame(
        &mut self,
        frame: OpenFrame,
        bytes: &[u8],
    ) -> Result<(), super::SourceError> {
        let id = frame.frame_id();
        for (p, payload) in bytes.chunks_exact(self.packet_bytes()).enumerate() {
            let p = p as u64;
            let dest = self
                .packet_mut(&frame, p)
                .ok_or(super::SourceError::NoPlace {
                    frame: id,
                    packet: p,
                })?;
            dest.copy_from_slice(payload);
            if self.packet_done(&frame, p) != PacketStatus::Accepted {
                return Err(super::SourceError::Refused {
                    frame: id,
                    packet: p,
                });
            }
        }
        self.finish(frame);
        Ok(())
    }

    /// Ends `frame`. With every packet present, the stages that need the whole frame may start;
    /// otherwise the frame completes as partial (see the module docs). Returns whether the
    /// frame was complete.
    pub fn finish(&mut self, frame: OpenFrame) -> bool {
        let lane = &self.lanes[frame.lane];
        let shared = lane.shared;
        let slot = &shared.slots[frame.slot];
        if lane.received[frame.slot] < shared.schedule.packets {
            // No stage that waits for the whole frame will run, so no stateful one (they are
            // never split, so never streamed): let later frames' take their turns.
            shared.skip_stateful(frame.slot);
            if let Some(partial) = slot.abandon() {
                shared.frame_ended(frame.slot, partial);
            }
            return false;
        }
        for &stage in &shared.schedule.after_frame {
            if slot.satisfy(stage) {
                shared.stage_ready(frame.slot, stage);
            }
        }
        true
    }
}

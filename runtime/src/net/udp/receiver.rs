//! The receive loop: batches of datagrams judged, placed into frames, and frames ended.
//!
//! Each message's payload is received straight into the place predicted for it (the next
//! absent chirp of the frame the last packet went to), so in-order chirps cost no copy; a
//! mispredicted payload is copied once into its real place. A batch is handled in three
//! passes so that no payload is overwritten before it is moved: judge every packet and find
//! its target, move every mispredicted payload out to scratch, then copy into place and mark
//! present. What may build a frame is [`StreamState`]'s and [`Stash`]'s to decide; this loop
//! owns the open frames and every counter.
//!
//! Long (542 lines of code, 402 of tests): the packet classifier and frame assembly; the
//! socket, stash and buffers are already their own modules.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use super::socket::{Datagrams, Message};
use super::stash::{Held, Offer, Stash};
use super::stream::{Admit, StreamState};
use super::{Assembly, IngestCounters, UdpConfig};
use crate::executor::{BeginError, PacketStatus, SourceError};
use crate::net::wire::{self, ChirpHeader, HEADER_BYTES, Malformed};

/// Frames assembled at once: a frame ends (as partial, if it still misses chirps) once the
/// stream has opened this many newer ones. Two allow packets of consecutive frames to
/// interleave, while a lossy frame gives its slot back as soon as the stream has moved two
/// frames on, whether or not those frames are still open.
pub(super) const MAX_OPEN: usize = 2;
/// The longest a new frame waits for the slot of an older one ended to make room.
const SLOT_WAIT_MAX: Duration = Duration::from_millis(50);
/// Frame ids remembered as dropped, so that their later packets are counted as such.
const DROPPED_MEMORY: usize = 64;
/// In-order packets that make a jump of the stream (or a new allowed source) believed: a
/// frame's worth, at least two, at most this many.
const MAX_CORROBORATION: u64 = 64;
/// The source recorded for a datagram whose sender the kernel did not say.
const UNKNOWN_SOURCE: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);

/// Frames a stream may open ahead of its newest, for a store holding `capacity` frames.
pub(super) fn window(capacity: usize) -> u64 {
    (2 * capacity.max(1) + MAX_OPEN) as u64
}

/// Where one message's payload landed and where it belongs.
#[derive(Clone, Copy)]
struct Landing {
    /// The predicted place the payload was received into; null for scratch.
    predicted: *mut u8,
    /// Open-frame index and packet index it belongs to, once judged.
    target: Option<(usize, u64)>,
}

/// A packet held in the stash whose frame opened in this batch: copy it into place.
struct Replay {
    entry: usize,
    open: usize,
    index: u64,
}

/// One frame being assembled, with when its last packet came.
struct Open<F> {
    frame: F,
    last_packet: Instant,
    /// The stream moved on (a restart or a new source): ended after this batch, and no
    /// longer found by later packets.
    doomed: bool,
}

/// The receive loop's state, borrowed for one run.
pub(super) struct Receiver<'c, F> {
    config: &'c UdpConfig,
    counters: &'c mut IngestCounters,
    stream: StreamState,
    stash: Stash,
    open: Vec<Open<F>>,
    dropped: [u64; DROPPED_MEMORY],
    dropped_len: usize,
    /// The frame and packet of the last accepted packet, for predicting the next.
    cursor: Option<(u64, u64)>,
    headers: Vec<[u8; HEADER_BYTES]>,
    scratch: Vec<u8>,
    landings: Vec<Landing>,
    messages: Vec<Message>,
    taken: Vec<(usize, u32, Held)>,
    replays: Vec<Replay>,
    /// Told once, when the stream first locks.
    pub(super) on_lock: Option<super::OnLock>,
}

impl<'c, F> Receiver<'c, F> {
    /// A receiver for a store of `capacity` frames.
    pub(super) fn new(
        config: &'c UdpConfig,
        counters: &'c mut IngestCounters,
        capacity: usize,
    ) -> Self {
        let batch = config.batch.max(1);
        let payload = config.shape.payload_bytes();
        let corroboration = u64::from(config.shape.chirps).clamp(2, MAX_CORROBORATION);
        Self {
            config,
            counters,
            stream: StreamState::new(config.allow_from.clone(), window(capacity), corroboration),
            stash: Stash::new(payload),
            open: Vec::with_capacity(MAX_OPEN + batch),
            dropped: [u64::MAX; DROPPED_MEMORY],
            dropped_len: 0,
            cursor: None,
            headers: vec![[0; HEADER_BYTES]; batch],
            scratch: vec![0; batch * payload],
            landings: vec![
                Landing {
                    predicted: std::ptr::null_mut(),
                    target: None
                };
                batch
            ],
            messages: vec![Message::empty(); batch],
            taken: Vec::with_capacity(super::stash::STASH_CAPACITY),
            replays: Vec::with_capacity(super::stash::STASH_CAPACITY),
            on_lock: None,
        }
    }

    /// Receives from `datagrams` into `store` until a stop condition (see the module docs of
    /// [`super`]), then ends every open frame.
    pub(super) fn run<D: Datagrams, A: Assembly<Frame = F>>(
        &mut self,
        datagrams: &mut D,
        store: &mut A,
    ) -> Result<(), SourceError> {
        let batch = self.headers.len();
        let payload = self.config.shape.payload_bytes();
        let mut first_packet: Option<Instant> = None;
        // The clock starts now, not at the first packet: a receiver nobody sends to ends.
        let mut last_packet = Instant::now();
        let start_timeout = self
            .config
            .start_timeout
            .unwrap_or(self.config.idle_timeout);
        let result = loop {
            if store.stopping() || self.all_accounted() {
                break Ok(());
            }
            self.predict(store, batch);
            for i in 0..batch {
                let place = if self.landings[i].predicted.is_null() {
                    self.scratch[i * payload..].as_mut_ptr()
                } else {
                    self.landings[i].predicted
                };
                self.messages[i] = Message {
                    header: self.headers[i].as_mut_ptr(),
                    header_len: HEADER_BYTES,
                    payload: place,
                    payload_len: payload,
                    ..Message::empty()
                };
            }
            // SAFETY: every message points at its own header buffer and at either its own
            // scratch or a distinct absent packet's place in an open frame, each of the size
            // stated; nothing else touches them until the call returns.
            let got = unsafe { datagrams.recv_batch(&mut self.messages) };
            let n = match got {
                Ok(0) => break Ok(()),
                Ok(n) => n.min(batch),
                Err(e) => match e.kind() {
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
                        // Nothing waits in the socket: what is missing has not arrived.
                        let now = Instant::now();
                        self.expire(store, now);
                        let timeout = if first_packet.is_some() {
                            self.config.idle_timeout
                        } else {
                            start_timeout
                        };
                        if now.duration_since(last_packet) >= timeout {
                            break Ok(());
                        }
                        continue;
                    }
                    io::ErrorKind::Interrupted => continue,
                    _ => break Err(SourceError(format!("recvmmsg: {e}"))),
                },
            };
            let now = Instant::now();
            let taken = self.stream_packets();
            self.absorb(store, n, now);
            // Only packets the stream took count as activity: junk, foreign or stray packets
            // never keep a receiver alive that no valid sender feeds.
            if self.stream_packets() > taken {
                let first = *first_packet.get_or_insert(now);
                last_packet = now;
                self.counters.receiving = now.duration_since(first);
            }
            // Timeouts are judged only on a drained socket (a short batch): packets that
            // arrived while this thread was held up (descheduled, or slow in a store) wait in
            // the socket, and their frame must not end as partial before they are read.
            if n < batch {
                self.expire(store, now);
            }
        };
        // Whatever is still open ends now, partial unless complete; held packets are strays.
        for open in std::mem::take(&mut self.open) {
            self.end(store, open.frame);
        }
        self.counters.stray += self.stash.clear();
        self.publish();
        result
    }

    /// Copies the stream's own counts into the counters.
    fn publish(&mut self) {
        self.counters.missed_frames = self.stream.missed_frames;
        self.counters.restarts = self.stream.restarts;
        self.counters.locked_source = self.stream.lock();
        self.counters.lock_confirmed = self.stream.confirmed();
        self.counters.lock_evidence = self.stream.evidence();
        self.counters.lock_replaced = self.stream.replaced;
        self.counters.foreign_sources = self.stream.foreign_sources.clone();
    }

    /// Packets the stream took as its own so far: stored, dropped with their frame for want
    /// of a slot, late for a frame already ended, or duplicates of a stored chirp.
    fn stream_packets(&self) -> u64 {
        let c = &self.counters;
        c.accepted + c.dropped_packets + c.late + c.duplicates
    }

    fn all_accounted(&self) -> bool {
        self.config
            .frames
            .is_some_and(|frames| self.stream.head() >= frames && self.open.is_empty())
    }

    fn predict<A: Assembly<Frame = F>>(&mut self, store: &A, batch: usize) {
        for l in &mut self.landings {
            *l = Landing {
                predicted: std::ptr::null_mut(),
                target: None,
            };
        }
        let Some((frame_id, last)) = self.cursor else {
            return;
        };
        let Some(open) = self
            .open
            .iter()
            .find(|o| !o.doomed && A::id(&o.frame) == frame_id)
        else {
            return;
        };
        let packets = u64::from(self.config.shape.chirps);
        let mut next = last + 1;
        let mut i = 0;
        while i < batch && next < packets {
            if let Some(place) = store.place(&open.frame, next) {
                self.landings[i].predicted = place;
                i += 1;
            }
            next += 1;
        }
    }

    fn find_open<A: Assembly<Frame = F>>(&self, run_id: u64) -> Option<usize> {
        self.open
            .iter()
            .position(|o| !o.doomed && A::id(&o.frame) == run_id)
    }

    /// Whether `(open, index)` is already claimed by an earlier message or replay of this
    /// batch, or present.
    fn claimed<A: Assembly<Frame = F>>(
        &self,
        store: &A,
        i: usize,
        open: usize,
        index: u64,
    ) -> bool {
        self.landings[..i]
            .iter()
            .any(|l| l.target == Some((open, index)))
            || self
                .replays
                .iter()
                .any(|r| r.open == open && r.index == index)
            || store.place(&self.open[open].frame, index).is_none()
    }

    /// Judges, places and counts one batch of `n` messages.
    fn absorb<A: Assembly<Frame = F>>(&mut self, store: &mut A, n: usize, now: Instant) {
        let payload = self.config.shape.payload_bytes();
        self.replays.clear();
        // Pass 1: judge each packet and find its target.
        for i in 0..n {
            let m = self.messages[i];
            self.counters.packets += 1;
            self.counters.bytes += m.len as u64;
            let header = ChirpHeader::read_from(&self.headers[i][..m.len.min(HEADER_BYTES)]);
            let header = match wire::classify(header, m.len, m.truncated, self.config.shape) {
                Ok(h) => h,
                Err(class) => {
                    self.counters.malformed[malformed_index(class)] += 1;
                    continue;
                }
            };
            let source = m.source.unwrap_or(UNKNOWN_SOURCE);
            let run_id = u64::from(header.frame_id.wrapping_sub(self.config.first_frame_id));
            let chirp = header.chirp_id;
            let index = u64::from(chirp);
            if !self.stream.is_stream_source(source) {
                match self.stream.admit(source, run_id, chirp) {
                    Some(_) => {
                        self.counters.foreign += 1;
                        continue;
                    }
                    // An allowed source took the stream over: the packet that proved it is
                    // counted as the run before it was, and the old source's frames end.
                    None => {
                        self.counters.foreign += 1;
                        self.doom_open();
                        continue;
                    }
                }
            }
            if let Some(k) = self.find_open::<A>(run_id) {
                if self.claimed(store, i, k, index) {
                    self.counters.duplicates += 1;
                } else {
                    self.landings[i].target = Some((k, index));
                    self.open[k].last_packet = now;
                    self.stream.delivered();
                }
                continue;
            }
            if self.config.frames.is_some_and(|frames| run_id >= frames) {
                self.counters.unexpected += 1;
                continue;
            }
            let admit = match self.stream.admit(source, run_id, chirp) {
                Some(admit) => admit,
                None => {
                    // The stream jumped: the packet that proved it is counted as the run of
                    // packets before it were, and the old frames end.
                    self.counters.out_of_window += 1;
                    self.doom_open();
                    continue;
                }
            };
            match admit {
                Admit::Foreign => self.counters.foreign += 1,
                Admit::OutOfWindow => self.counters.out_of_window += 1,
                Admit::Late => {
                    if self.dropped.contains(&run_id) {
                        self.counters.dropped_packets += 1;
                    } else {
                        self.counters.late += 1;
                    }
                }
                Admit::Open => self.open_or_hold(store, i, source, run_id, chirp, now),
            }
        }
        // Pass 2: move every mispredicted payload that landed in a frame, and every held one,
        // out to scratch.
        for i in 0..n {
            let l = self.landings[i];
            if l.predicted.is_null() {
                continue;
            }
            let moves = match l.target {
                Some((open, index)) => {
                    store.place(&self.open[open].frame, index) != Some(l.predicted)
                }
                None => self.stash.holds_message(i),
            };
            if moves {
                // SAFETY: the predicted place is an absent packet's place of payload bytes,
                // scratch has payload bytes per message; they do not overlap.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        l.predicted,
                        self.scratch[i * payload..].as_mut_ptr(),
                        payload,
                    )
                };
                self.landings[i].predicted = std::ptr::null_mut();
            }
        }
        // Pass 3: copy from scratch or the stash where needed, and mark present.
        for i in 0..n {
            let l = self.landings[i];
            let Some((open, index)) = l.target else {
                continue;
            };
            let frame = &self.open[open].frame;
            if l.predicted.is_null() {
                let Some(place) = store.place(frame, index) else {
                    continue;
                };
                // SAFETY: the place of an absent packet holds payload bytes.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        self.scratch[i * payload..].as_ptr(),
                        place,
                        payload,
                    )
                };
            } else {
                self.counters.in_place += 1;
            }
            self.mark(store, open, index);
        }
        let replays = std::mem::take(&mut self.replays);
        for r in &replays {
            match store.place(&self.open[r.open].frame, r.index) {
                Some(place) => {
                    let held = self.stash.payload(r.entry);
                    // SAFETY: the place of an absent packet holds payload bytes; the stash
                    // entry holds as many.
                    unsafe { std::ptr::copy_nonoverlapping(held.as_ptr(), place, payload) };
                    self.mark(store, r.open, r.index);
                }
                None => self.counters.duplicates += 1,
            }
        }
        self.replays = replays;
        let scratch = &self.scratch;
        self.stash
            .settle(|i| &scratch[i * payload..(i + 1) * payload]);
        // Frames with every chirp end now, and frames of a stream that moved on; a frame the
        // stream has opened MAX_OPEN newer frames past is given up on. Frames are delivered
        // in the order they began, so a lossy frame kept open would hold back every slot
        // after it.
        let packets = u64::from(self.config.shape.chirps);
        let head = self.stream.head();
        let mut k = 0;
        while k < self.open.len() {
            let o = &self.open[k];
            let passed = A::id(&o.frame) + (MAX_OPEN as u64) < head;
            if o.doomed || passed || store.received(&o.frame) == packets {
                let open = self.open.remove(k);
                self.end(store, open.frame);
            } else {
                k += 1;
            }
        }
        if self.stream.confirmed()
            && let (Some(lock), Some(tell)) = (self.stream.lock(), self.on_lock.take())
        {
            tell(lock);
        }
    }

    /// Ends every open frame older than `run_id` that no packet of this batch up to message
    /// `i` is placed in and none is predicted into: for a new frame that found no free slot.
    /// Returns whether any ended.
    fn release_older<A: Assembly<Frame = F>>(
        &mut self,
        store: &mut A,
        run_id: u64,
        i: usize,
    ) -> bool {
        let mut released = false;
        let mut k = 0;
        while k < self.open.len() {
            let o = &self.open[k];
            let id = A::id(&o.frame);
            let busy = o.doomed
                || id >= run_id
                || self.cursor.is_some_and(|(frame, _)| frame == id)
                || self.landings[..i]
                    .iter()
                    .any(|l| l.target.is_some_and(|(open, _)| open == k))
                || self.replays.iter().any(|r| r.open == k);
            if busy {
                k += 1;
                continue;
            }
            let open = self.open.remove(k);
            self.end(store, open.frame);
            // Later open frames moved down one place.
            for l in &mut self.landings[..i] {
                if let Some((open, _)) = &mut l.target
                    && *open > k
                {
                    *open -= 1;
                }
            }
            for r in &mut self.replays {
                if r.open > k {
                    r.open -= 1;
                }
            }
            released = true;
        }
        released
    }

    fn mark<A: Assembly<Frame = F>>(&mut self, store: &mut A, open: usize, index: u64) {
        let frame = &self.open[open].frame;
        if store.done(frame, index) == PacketStatus::Accepted {
            self.counters.accepted += 1;
            self.cursor = Some((A::id(frame), index));
        } else {
            self.counters.duplicates += 1;
        }
    }

    /// A packet that may open its frame: held as the frame's first, or, with a held packet of
    /// another chirp beside it, the frame opens and both are placed. Frames of one chirp open
    /// at once.
    fn open_or_hold<A: Assembly<Frame = F>>(
        &mut self,
        store: &mut A,
        i: usize,
        source: SocketAddr,
        run_id: u64,
        chirp: u32,
        now: Instant,
    ) {
        if self.config.shape.chirps > 1 {
            match self.stash.offer(source, run_id, chirp, i, now) {
                Offer::Held { evicted, .. } => {
                    self.counters.stray += u64::from(evicted);
                    return;
                }
                Offer::Duplicate => {
                    self.counters.duplicates += 1;
                    return;
                }
                Offer::Confirms => {}
            }
        }
        self.taken.clear();
        self.stash.take(source, run_id, &mut self.taken);
        self.stream
            .opened(source, run_id, 1 + self.taken.len() as u64);
        // Frames are delivered in the order they began: an older frame still missing packets
        // holds back the slot of every frame after it. With no slot free, such a frame ends
        // now, as partial, and this newer one waits (bounded) for the slots it gives back,
        // rather than be dropped. Only frames no packet of this batch is placed in may end
        // mid-batch; `absorb` ends the rest afterwards.
        let begun = match store.try_begin(run_id) {
            Err(BeginError::NoFreeSlot) if self.release_older(store, run_id, i) => {
                let wait = self.config.frame_timeout.min(SLOT_WAIT_MAX);
                store.begin_within(run_id, wait)
            }
            begun => begun,
        };
        match begun {
            Ok(frame) => {
                self.open.push(Open {
                    frame,
                    last_packet: now,
                    doomed: false,
                });
                let k = self.open.len() - 1;
                for &(entry, held_chirp, held) in &self.taken {
                    match held {
                        Held::InBatch(j) => {
                            self.landings[j].target = Some((k, u64::from(held_chirp)))
                        }
                        Held::Copied => self.replays.push(Replay {
                            entry,
                            open: k,
                            index: u64::from(held_chirp),
                        }),
                    }
                }
                self.landings[i].target = Some((k, u64::from(chirp)));
            }
            Err(_) => {
                self.counters.dropped_frames += 1;
                self.counters.dropped_packets += 1 + self.taken.len() as u64;
                self.dropped[self.dropped_len % DROPPED_MEMORY] = run_id;
                self.dropped_len += 1;
            }
        }
    }

    /// Marks every open frame to end after this batch: the stream moved on.
    fn doom_open(&mut self) {
        for o in &mut self.open {
            o.doomed = true;
        }
        self.cursor = None;
    }

    /// Ends frames whose last packet is older than the frame timeout, and lets go of held
    /// packets as old, or whose frames can no longer open.
    fn expire<A: Assembly<Frame = F>>(&mut self, store: &mut A, now: Instant) {
        let mut k = 0;
        while k < self.open.len() {
            if now.duration_since(self.open[k].last_packet) >= self.config.frame_timeout {
                let open = self.open.remove(k);
                self.end(store, open.frame);
            } else {
                k += 1;
            }
        }
        self.counters.stray +=
            self.stash
                .expire(now, self.config.frame_timeout, self.stream.head());
    }

    fn end<A: Assembly<Frame = F>>(&mut self, store: &mut A, frame: F) {
        if self.cursor.is_some_and(|(id, _)| id == A::id(&frame)) {
            self.cursor = None;
        }
        if store.finish(frame) {
            self.counters.complete_frames += 1;
        } else {
            self.counters.partial_frames += 1;
        }
    }
}

fn malformed_index(class: Malformed) -> usize {
    Malformed::ALL.iter().position(|c| *c == class).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, VecDeque};
    use std::time::Duration;

    use proptest::prelude::*;

    use super::*;
    use crate::executor::BeginError;
    use crate::net::udp::AllowFrom;
    use crate::net::wire::WireShape;

    const SHAPE: WireShape = WireShape::ci16(4, 8);
    const PAYLOAD: usize = 16;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    /// A chirp's payload that names its sender, frame and chirp.
    fn payload(tag: u8, frame: u32, chirp: u32) -> [u8; PAYLOAD] {
        let mut p = [0u8; PAYLOAD];
        p[0] = tag;
        p[1..5].copy_from_slice(&frame.to_le_bytes());
        p[5..9].copy_from_slice(&chirp.to_le_bytes());
        p
    }

    fn packet(tag: u8, frame: u32, chirp: u32) -> Vec<u8> {
        let header = ChirpHeader {
            frame_id: frame,
            chirp_id: chirp,
            channel_id: 0,
            n_samples: SHAPE.samples,
        };
        let mut out = vec![0; SHAPE.packet_bytes()];
        wire::encode(&header, &payload(tag, frame, chirp), &mut out);
        out
    }

    /// Datagrams from memory, `per_call` at most a batch; `Ok(0)` once all are read.
    struct Script {
        queue: VecDeque<(SocketAddr, Vec<u8>)>,
        per_call: usize,
    }

    impl Datagrams for Script {
        unsafe fn recv_batch(&mut self, messages: &mut [Message]) -> io::Result<usize> {
            let mut n = 0;
            while n < messages.len().min(self.per_call) {
                let Some((source, bytes)) = self.queue.pop_front() else {
                    break;
                };
                let m = &mut messages[n];
                let head = bytes.len().min(m.header_len);
                let body = (bytes.len() - head).min(m.payload_len);
                // SAFETY: per the trait's contract, the buffers hold these many bytes.
                unsafe {
                    std::ptr::copy_nonoverlapping(bytes.as_ptr(), m.header, head);
                    std::ptr::copy_nonoverlapping(bytes[head..].as_ptr(), m.payload, body);
                }
                m.len = head + body;
                m.truncated = bytes.len() > head + body;
                m.source = Some(source);
                n += 1;
            }
            Ok(n)
        }
    }

    /// Frames in plain memory; every ended frame is recorded with its present chirps. Slots
    /// return in the order frames began, as the executor delivers them: a frame that ended
    /// keeps its slot until every frame begun before it has ended.
    struct Recorder {
        slots: Vec<(Vec<u8>, Vec<bool>)>,
        free: Vec<usize>,
        /// Slots in the order their frames began, with whether the frame has ended.
        begun: VecDeque<(usize, bool)>,
        ended: Vec<(u64, bool, BTreeMap<u64, Vec<u8>>)>,
    }

    impl Recorder {
        fn new(capacity: usize) -> Self {
            let chirps = SHAPE.chirps as usize;
            Self {
                slots: vec![(vec![0; chirps * PAYLOAD], vec![false; chirps]); capacity],
                free: (0..capacity).rev().collect(),
                begun: VecDeque::new(),
                ended: Vec::new(),
            }
        }
    }

    impl Assembly for Recorder {
        type Frame = (usize, u64);
        fn capacity(&self) -> usize {
            self.slots.len()
        }
        fn try_begin(&mut self, frame_id: u64) -> Result<(usize, u64), BeginError> {
            let slot = self.free.pop().ok_or(BeginError::NoFreeSlot)?;
            self.slots[slot].1.fill(false);
            self.begun.push_back((slot, false));
            Ok((slot, frame_id))
        }
        fn id(frame: &(usize, u64)) -> u64 {
            frame.1
        }
        fn place(&self, frame: &(usize, u64), index: u64) -> Option<*mut u8> {
            let (data, present) = &self.slots[frame.0];
            if *present.get(index as usize)? {
                return None;
            }
            Some(data[index as usize * PAYLOAD..].as_ptr().cast_mut())
        }
        fn done(&mut self, frame: &(usize, u64), index: u64) -> PacketStatus {
            match self.slots[frame.0].1.get_mut(index as usize) {
                None => PacketStatus::OutOfRange,
                Some(true) => PacketStatus::Duplicate,
                Some(p) => {
                    *p = true;
                    PacketStatus::Accepted
                }
            }
        }
        fn received(&self, frame: &(usize, u64)) -> u64 {
            self.slots[frame.0].1.iter().filter(|p| **p).count() as u64
        }
        fn finish(&mut self, frame: (usize, u64)) -> bool {
            let (data, present) = &self.slots[frame.0];
            let chirps: BTreeMap<u64, Vec<u8>> = present
                .iter()
                .enumerate()
                .filter(|(_, p)| **p)
                .map(|(i, _)| (i as u64, data[i * PAYLOAD..(i + 1) * PAYLOAD].to_vec()))
                .collect();
            let complete = chirps.len() == SHAPE.chirps as usize;
            self.ended.push((frame.1, complete, chirps));
            if let Some(b) = self.begun.iter_mut().find(|b| b.0 == frame.0) {
                b.1 = true;
            }
            while let Some(&(slot, true)) = self.begun.front() {
                self.begun.pop_front();
                self.free.push(slot);
            }
            complete
        }
        fn stopping(&self) -> bool {
            false
        }
    }

    fn config(frames: Option<u64>, allow: &str) -> UdpConfig {
        let mut c = UdpConfig::new(addr(0), SHAPE);
        c.frames = frames;
        c.batch = 5;
        // No clock in these tests: nothing times out.
        c.frame_timeout = Duration::from_secs(3600);
        c.idle_timeout = Duration::from_secs(3600);
        if !allow.is_empty() {
            c.allow_from = AllowFrom::parse(allow).unwrap();
        }
        c
    }

    fn receive(
        config: &UdpConfig,
        packets: Vec<(SocketAddr, Vec<u8>)>,
        per_call: usize,
    ) -> (Recorder, IngestCounters) {
        receive_in(config, packets, per_call, 4)
    }

    /// As [`receive`], into a store of `slots` frames.
    fn receive_in(
        config: &UdpConfig,
        packets: Vec<(SocketAddr, Vec<u8>)>,
        per_call: usize,
        slots: usize,
    ) -> (Recorder, IngestCounters) {
        let mut counters = IngestCounters::default();
        let mut store = Recorder::new(slots);
        let mut script = Script {
            queue: packets.into(),
            per_call,
        };
        Receiver::new(config, &mut counters, store.capacity())
            .run(&mut script, &mut store)
            .unwrap();
        (store, counters)
    }

    fn stream(
        tag: u8,
        source: SocketAddr,
        frames: std::ops::Range<u32>,
    ) -> Vec<(SocketAddr, Vec<u8>)> {
        frames
            .flat_map(|f| (0..SHAPE.chirps).map(move |c| (source, packet(tag, f, c))))
            .collect()
    }

    fn complete_ids(store: &Recorder) -> Vec<u64> {
        store.ended.iter().filter(|e| e.1).map(|e| e.0).collect()
    }

    #[test]
    fn a_lost_packet_costs_only_its_own_frame() {
        // The case: with frames delivered in order, frame 3 kept open for its lost
        // chirp held back the slots of every frame after it, and those were dropped. Any
        // chirp may be the lost one, the batch any size, the store as small as two slots.
        for slots in [2, 4, 16] {
            for lost in 0..SHAPE.chirps {
                for per_call in [1, 3, 5] {
                    let packets: Vec<_> = stream(1, addr(1), 0..20)
                        .into_iter()
                        .filter(|(_, p)| p != &packet(1, 3, lost))
                        .collect();
                    let (store, c) = receive_in(&config(Some(20), ""), packets, per_call, slots);
                    let want: Vec<u64> = (0..20).filter(|&f| f != 3).collect();
                    let case = format!("slots {slots}, lost chirp {lost}, batch {per_call}: {c:?}");
                    assert_eq!(complete_ids(&store), want, "{case}");
                    assert_eq!(
                        (c.partial_frames, c.dropped_frames, c.dropped_packets),
                        (1, 0, 0),
                        "{case}"
                    );
                    assert_eq!(c.classified(), c.packets, "{case}");
                }
            }
        }
    }

    #[test]
    fn two_early_packets_of_another_socket_never_take_the_stream() {
        // The case: two packets from another local socket before the real sender
        // locked the stream to that socket, and no frame was received.
        for allow in ["", "127.0.0.1"] {
            let mut packets = vec![(addr(7), packet(7, 0, 0)), (addr(7), packet(7, 0, 1))];
            packets.extend(stream(1, addr(1), 0..20));
            let (store, c) = receive(&config(Some(20), allow), packets, 5);
            // Frame 0's packets proved the real stream; every later frame is received.
            assert_eq!(complete_ids(&store), (1..20).collect::<Vec<_>>(), "{c:?}");
            assert!(
                store
                    .ended
                    .iter()
                    .all(|e| e.2.values().all(|p| p[0] == 1 || !e.1))
            );
            assert_eq!(
                (c.locked_source, c.lock_replaced, c.lock_confirmed),
                (Some(addr(1)), Some(addr(7)), true),
                "{c:?}"
            );
            // The stray's frame ended partial; the real frame 0 was missed, not the stray's.
            assert_eq!((c.partial_frames, c.missed_frames, c.restarts), (1, 1, 1));
            assert_eq!(c.classified(), c.packets);
        }
    }

    #[test]
    fn a_second_sender_on_an_allowed_host_never_takes_a_live_stream() {
        // Address-only allow list: another port of that host sends the same frames, packet
        // for packet beside the stream, and in a burst of a frame's worth between two frames.
        let a = stream(1, addr(1), 0..10);
        let b = stream(2, addr(2), 0..10);
        let mut packets: Vec<_> = a.into_iter().zip(b).flat_map(|(x, y)| [x, y]).collect();
        let (store, c) = receive(&config(Some(10), "127.0.0.1"), packets.clone(), 5);
        assert_eq!(complete_ids(&store), (0..10).collect::<Vec<_>>(), "{c:?}");
        assert!(store.ended.iter().all(|e| e.2.values().all(|p| p[0] == 1)));
        assert_eq!((c.locked_source, c.restarts), (Some(addr(1)), 0));
        // A burst of fewer packets than a frame's worth, mid-stream, is foreign too.
        packets = stream(1, addr(1), 0..10);
        let burst: Vec<_> = (0..SHAPE.chirps - 1)
            .map(|c| (addr(2), packet(2, 5, c)))
            .collect();
        packets.splice(40..40, burst);
        let (store, c) = receive(&config(Some(10), "127.0.0.1"), packets, 5);
        assert_eq!(complete_ids(&store), (0..10).collect::<Vec<_>>(), "{c:?}");
        assert_eq!((c.locked_source, c.foreign), (Some(addr(1)), 7));
    }

    #[test]
    fn a_stray_far_ahead_before_the_stream_costs_no_frame() {
        // The reproduction: frame 19 of 20, sent before the sender starts.
        let mut packets = vec![(addr(7), packet(9, 19, 0))];
        packets.extend(stream(1, addr(1), 0..20));
        let (store, c) = receive(&config(Some(20), ""), packets, 5);
        assert_eq!(complete_ids(&store), (0..20).collect::<Vec<_>>(), "{c:?}");
        assert_eq!(
            (c.out_of_window, c.accepted, c.classified()),
            (1, 160, c.packets),
            "{c:?}"
        );
        assert_eq!(c.locked_source, Some(addr(1)));
    }

    #[test]
    fn a_stray_mid_run_from_the_streams_own_address_costs_no_frame() {
        let mut packets = stream(1, addr(1), 0..20);
        // Out of the window, then a frame behind (from the stream's own address), then inside
        // the window from another: none moves the stream or enters a frame.
        packets.insert(30, (addr(1), packet(9, 19, 3)));
        packets.insert(60, (addr(1), packet(9, 2, 5)));
        packets.insert(90, (addr(9), packet(9, 13, 0)));
        let (store, c) = receive(&config(Some(20), ""), packets, 5);
        assert_eq!(complete_ids(&store), (0..20).collect::<Vec<_>>(), "{c:?}");
        assert_eq!((c.out_of_window, c.late, c.foreign), (1, 1, 1), "{c:?}");
        assert!(store.ended.iter().all(|e| e.2.values().all(|p| p[0] == 1)));
        assert_eq!(c.classified(), c.packets);
    }

    #[test]
    fn two_senders_at_once_never_splice_and_the_second_is_foreign() {
        let a = stream(1, addr(1), 0..6);
        let b = stream(2, addr(2), 0..6);
        let packets: Vec<_> = a.into_iter().zip(b).flat_map(|(x, y)| [x, y]).collect();
        let (store, c) = receive(&config(None, ""), packets, 5);
        assert_eq!(complete_ids(&store), (0..6).collect::<Vec<_>>());
        for (_, _, chirps) in &store.ended {
            assert!(
                chirps.values().all(|p| p[0] == 1),
                "only the first sender's chirps"
            );
        }
        // The second sender's first packet came before the lock: held, then a stray.
        assert_eq!((c.foreign, c.stray), (47, 1), "{c:?}");
        assert_eq!(c.foreign_sources, vec![(addr(2), 47)]);
    }

    #[test]
    fn an_allow_list_refuses_the_first_sender_if_it_is_not_on_it() {
        let mut packets = stream(2, addr(2), 0..3);
        packets.extend(stream(1, addr(1), 0..3));
        let (store, c) = receive(&config(Some(3), "127.0.0.1:1"), packets, 5);
        assert_eq!(complete_ids(&store), vec![0, 1, 2]);
        assert!(store.ended.iter().all(|e| e.2.values().all(|p| p[0] == 1)));
        assert_eq!(c.foreign, 24);
    }

    #[test]
    fn a_sender_restarted_far_ahead_is_followed_after_a_frame_of_packets() {
        let mut packets = stream(1, addr(1), 0..5);
        packets.extend(stream(1, addr(1), 1000..1005));
        let (store, c) = receive(&config(None, ""), packets, 5);
        // Frame 1000's packets prove the jump; 1001.. are received.
        assert_eq!(
            complete_ids(&store),
            vec![0, 1, 2, 3, 4, 1001, 1002, 1003, 1004]
        );
        // Frames 5..1000 and 1000 itself (whose packets proved the jump) stored nothing.
        assert_eq!(
            (c.out_of_window, c.restarts, c.missed_frames),
            (8, 1, 996),
            "{c:?}"
        );
        assert_eq!(c.classified(), c.packets);
    }

    #[test]
    fn a_sender_restarted_on_a_new_port_takes_over_when_allowed() {
        let mut packets = stream(1, addr(1), 0..3);
        packets.extend(stream(2, addr(2), 3..6));
        let (store, c) = receive(&config(Some(6), "127.0.0.1"), packets, 5);
        assert_eq!(complete_ids(&store), vec![0, 1, 2, 4, 5], "{c:?}");
        assert_eq!(
            (c.foreign, c.restarts, c.locked_source),
            (8, 1, Some(addr(2)))
        );
        // Without the allow list it stays locked.
        let mut packets = stream(1, addr(1), 0..3);
        packets.extend(stream(2, addr(2), 3..6));
        let (store, c) = receive(&config(Some(6), ""), packets, 5);
        assert_eq!(complete_ids(&store), vec![0, 1, 2]);
        assert_eq!(c.foreign, 24);
    }

    #[derive(Clone, Debug)]
    enum Extra {
        /// A packet of another source, any frame.
        Foreign(u32, u32),
        /// A packet of the stream's address far ahead of it.
        StrayFar(u32, u32),
        /// A packet of another source naming a frame in the window.
        StrayNear(u32, u32),
        /// A datagram of the wrong size.
        Junk(usize),
    }

    fn extra() -> impl Strategy<Value = Extra> {
        prop_oneof![
            (0..40u32, 0..8u32).prop_map(|(f, c)| Extra::Foreign(f, c)),
            (500..5000u32, 0..8u32).prop_map(|(f, c)| Extra::StrayFar(f, c)),
            (0..40u32, 0..8u32).prop_map(|(f, c)| Extra::StrayNear(f, c)),
            (0..100usize).prop_map(Extra::Junk),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// A locked sender's frames (reordered within frames, with duplicates, lost packets,
        /// and one restart far ahead) interleaved with a foreign sender, strays in and out of
        /// the window and junk, into a store that returns slots in the order frames began:
        /// every complete frame is the locked sender's exactly, nothing of another source
        /// enters any frame, a lost packet costs only its own frame (no frame is dropped),
        /// every packet is counted once under one name.
        #[test]
        fn frames_assemble_exactly_whatever_else_arrives(
            frames in 3..10u32,
            restart_after in proptest::option::of(1..3u32),
            shuffles in proptest::collection::vec(proptest::collection::vec(0..8usize, 8), 20),
            duplicates in proptest::collection::vec((0..20u32, 0..8u32), 0..6),
            lost in proptest::collection::vec((1..10u32, 0..8u32), 0..4),
            extras in proptest::collection::vec((0..400usize, extra()), 0..60),
            per_call in 1..7usize,
        ) {
            const LOCKED: u16 = 1;
            const JUMP: u32 = 10_000;
            // The locked sender: frame ids, with a restart JUMP ahead after `restart_after`.
            let ids: Vec<u32> = (0..frames)
                .map(|f| match restart_after {
                    Some(r) if f >= r => f + JUMP,
                    _ => f,
                })
                .collect();
            let mut locked = Vec::new();
            for (k, &f) in ids.iter().enumerate() {
                let mut order: Vec<u32> = (0..SHAPE.chirps).collect();
                for (i, &j) in shuffles[k % shuffles.len()].iter().enumerate() {
                    order.swap(i, j);
                }
                // The first frame starts in order, so the sender is the first to lock.
                if k == 0 {
                    order.sort_unstable();
                }
                // Lost packets: in frames after the first (whose packets confirm the lock) and
                // before the restart (whose first frame's packets prove it).
                let before_restart = restart_after.is_none_or(|r| (k as u32) < r);
                for c in order {
                    if before_restart && lost.contains(&(k as u32, c)) {
                        continue;
                    }
                    locked.push((addr(LOCKED), packet(1, f, c)));
                    // Not in the first frame: its first two packets lock the stream.
                    if k > 0 && duplicates.contains(&(k as u32, c)) {
                        locked.push((addr(LOCKED), packet(1, f, c)));
                    }
                }
            }
            // Extras go anywhere after the first two packets, but strays of the stream's
            // own address not among the restart's first packets (they would only delay it).
            let restart_at = |packets: &[(SocketAddr, Vec<u8>)]| {
                packets.iter().position(|(a, p)| {
                    *a == addr(LOCKED) && ChirpHeader::read_from(p).is_some_and(|h| (JUMP..2 * JUMP).contains(&h.frame_id))
                })
            };
            let mut packets = locked.clone();
            let mut foreign = 0u64;
            let mut sorted = extras.clone();
            sorted.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
            for (at, e) in sorted {
                let at = 2 + at % (packets.len() - 1);
                let item = match e {
                    Extra::Foreign(f, c) => { foreign += 1; (addr(2), packet(2, f, c)) }
                    Extra::StrayNear(f, c) => { foreign += 1; (addr(3), packet(3, f, c)) }
                    Extra::StrayFar(f, c) => {
                        if let Some(r) = restart_at(&packets) && at >= r.saturating_sub(1) && at <= r + 3 * SHAPE.chirps as usize {
                            continue;
                        }
                        (addr(LOCKED), packet(4, f + 2 * JUMP, c))
                    }
                    Extra::Junk(len) => (addr(5), vec![0xEE; len]),
                };
                packets.insert(at, item);
            }
            let total = packets.len() as u64;
            let (store, c) = receive(&config(None, ""), packets, per_call);

            prop_assert_eq!(c.packets, total);
            prop_assert_eq!(c.classified(), c.packets, "{:?}", c);
            prop_assert_eq!(c.foreign, foreign, "{:?}", c);
            prop_assert_eq!(c.locked_source, Some(addr(LOCKED)));
            let stored: u64 = store.ended.iter().map(|e| e.2.len() as u64).sum();
            prop_assert_eq!(stored, c.accepted);
            for (frame, _, chirps) in &store.ended {
                for (&chirp, bytes) in chirps {
                    prop_assert_eq!(
                        bytes.as_slice(),
                        &payload(1, *frame as u32, chirp as u32)[..],
                        "frame {} chirp {}: only the locked sender's own chirp", frame, chirp
                    );
                }
            }
            // Every frame before the restart, and every one after the frame that proved it,
            // completes, but those that lost a packet; none is dropped.
            prop_assert_eq!(c.dropped_frames, 0, "{:?}", c);
            let complete = complete_ids(&store);
            for (k, &f) in ids.iter().enumerate() {
                let proving = restart_after == Some(k as u32);
                let lossy = restart_after.is_none_or(|r| (k as u32) < r)
                    && lost.iter().any(|&(frame, _)| frame == k as u32);
                if !proving && !lossy {
                    prop_assert!(complete.contains(&u64::from(f)), "frame {} missing: {:?} {:?}", f, complete, c);
                }
            }
        }
    }
}

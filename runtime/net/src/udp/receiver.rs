//! The receive loop: batches of datagrams judged, placed into frames, and frames ended.
//!
//! Each message's payload is received straight into the place predicted for it (the next
//! absent packet of the frame the last packet went to), so in-order packets cost no copy; a
//! mispredicted payload is copied once into its real place. A batch is handled in three
//! passes so that no payload is overwritten before it is moved: judge every packet and find
//! its target, move every mispredicted payload out to scratch, then copy into place and mark
//! present. What may build a frame is [`StreamState`]'s and [`Stash`]'s to decide; this loop
//! owns the open frames and every counter.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use super::socket::{Datagrams, Message};
use super::stash::{Held, MAX_CORROBORATION, Offer, Stash};
use super::stream::{Admit, StreamState};
use super::{Assembly, IngestCounters, UdpConfig};
use crate::wire::{self, HEADER_BYTES, PacketHeader};
use kplace_core::executor::{BeginError, PacketStatus, SourceError};

/// Frames assembled at once: a frame ends (as partial, if it still misses packets) once the
/// stream has opened this many newer ones. Two allow packets of consecutive frames to
/// interleave, while a lossy frame gives its slot back as soon as the stream has moved two
/// frames on, whether or not those frames are still open.
pub(super) const MAX_OPEN: usize = 2;
/// The longest a new frame waits for the slot of an older one ended to make room.
const SLOT_WAIT_MAX: Duration = Duration::from_millis(50);
/// Frame ids remembered as dropped, so that their later packets are counted as such.
const DROPPED_MEMORY: usize = 64;
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
    /// Told the counters every so often, and at the end.
    pub(super) on_counters: Option<(std::time::Duration, super::OnCounters)>,
    /// When to tell them next.
    next_tell: Option<Instant>,
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
        let corroboration = u64::from(config.shape.packets).clamp(2, MAX_CORROBORATION);
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
            on_counters: None,
            next_tell: None,
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
                        self.tell(now, false);
                        continue;
                    }
                    io::ErrorKind::Interrupted => continue,
                    _ => break Err(SourceError::Receive("recvmmsg", e)),
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
            self.tell(now, false);
        };
        // Whatever is still open ends now, partial unless complete; held packets are strays.
        for open in std::mem::take(&mut self.open) {
            self.end(store, open.frame);
        }
        self.counters.stray += self.stash.clear();
        self.publish();
        self.tell(Instant::now(), true);
        result
    }

    /// Tells [`Receiver::on_counters`] the counters if its interval has passed, or `last`.
    fn tell(&mut self, now: Instant, last: bool) {
        let Some((every, mut tell)) = self.on_counters.take() else {
            return;
        };
        if last || self.next_tell.is_none_or(|at| now >= at) {
            self.next_tell = Some(now + every);
            self.publish();
            tell(self.counters);
        }
        self.on_counters = Some((every, tell));
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
    /// of a slot, late for a frame already ended, or duplicates of a stored packet.
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
        let packets = u64::from(self.config.shape.packets);
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

    /// Judges, places and counts one batch of `n` messages: each packet is judged and finds
    /// its target, then every mispredicted or held payload moves out to scratch, then every
    /// payload not already in place is copied in, and last the frames that are done end.
    fn absorb<A: Assembly<Frame = F>>(&mut self, store: &mut A, n: usize, now: Instant) {
        self.replays.clear();
        for i in 0..n {
            self.judge(store, i, now);
        }
        self.move_mispredicted(store, n);
        self.copy_in(store, n);
        self.end_done(store);
    }

    /// Pass 1 of [`Self::absorb`]: judges message `i`, counts it, and finds its target.
    fn judge<A: Assembly<Frame = F>>(&mut self, store: &mut A, i: usize, now: Instant) {
        let m = self.messages[i];
        self.counters.packets += 1;
        self.counters.bytes += m.len as u64;
        let header = PacketHeader::read_from(&self.headers[i][..m.len.min(HEADER_BYTES)]);
        let header = match wire::classify(header, m.len, m.truncated, self.config.shape) {
            Ok(h) => h,
            Err(class) => {
                self.counters.malformed[class.index()] += 1;
                return;
            }
        };
        let source = m.source.unwrap_or(UNKNOWN_SOURCE);
        let run_id = u64::from(header.frame_id.wrapping_sub(self.config.first_frame_id));
        let packet = header.packet_id;
        let index = u64::from(packet);
        if !self.stream.is_stream_source(source) {
            match self.stream.admit(source, run_id, packet) {
                Some(_) => {
                    self.counters.foreign += 1;
                    return;
                }
                // An allowed source took the stream over: the packet that proved it is
                // counted as the run before it was, and the old source's frames end.
                None => {
                    self.counters.foreign += 1;
                    self.doom_open();
                    return;
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
            return;
        }
        if self.config.frames.is_some_and(|frames| run_id >= frames) {
            self.counters.unexpected += 1;
            return;
        }
        let admit = match self.stream.admit(source, run_id, packet) {
            Some(admit) => admit,
            None => {
                // The stream jumped: the packet that proved it is counted as the run of
                // packets before it were, and the old frames end.
                self.counters.out_of_window += 1;
                self.doom_open();
                return;
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
            Admit::Open => self.open_or_hold(store, i, source, run_id, packet, now),
        }
    }

    /// Pass 2 of [`Self::absorb`]: moves every mispredicted payload of the batch's `n` that
    /// landed in a frame, and every held one, out to scratch.
    fn move_mispredicted<A: Assembly<Frame = F>>(&mut self, store: &mut A, n: usize) {
        let payload = self.config.shape.payload_bytes();
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
    }

    /// Pass 3 of [`Self::absorb`]: copies the batch's `n` payloads from scratch or the stash
    /// where needed, and marks them present.
    fn copy_in<A: Assembly<Frame = F>>(&mut self, store: &mut A, n: usize) {
        let payload = self.config.shape.payload_bytes();
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
    }

    /// The end of [`Self::absorb`]: ends the frames that are done.
    fn end_done<A: Assembly<Frame = F>>(&mut self, store: &mut A) {
        // Frames with every packet end now, and frames of a stream that moved on; a frame the
        // stream has opened MAX_OPEN newer frames past is given up on. Frames are delivered
        // in the order they began, so a lossy frame kept open would hold back every slot
        // after it.
        let packets = u64::from(self.config.shape.packets);
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

    /// A packet that may open its frame. Before the stream has a source, every packet is
    /// held until its source has sent a frame's worth (at most [`MAX_CORROBORATION`]) of one
    /// frame and the next: that source then takes the stream, and both frames open with what
    /// is held, so a few early packets of a stray socket open no frame and cost the real
    /// sender none of its own. Once the stream has its source, a packet is held as its
    /// frame's first, or, with a held packet of another packet beside it, the frame opens and
    /// both are placed. Frames of one packet open at once.
    fn open_or_hold<A: Assembly<Frame = F>>(
        &mut self,
        store: &mut A,
        i: usize,
        source: SocketAddr,
        run_id: u64,
        packet: u32,
        now: Instant,
    ) {
        if self.stream.lock().is_none() {
            match self.stash.hold(source, run_id, packet, i, now) {
                Offer::Held { evicted, .. } => self.counters.stray += u64::from(evicted),
                Offer::Duplicate | Offer::Confirms => {
                    self.counters.duplicates += 1;
                    return;
                }
            }
            let before = run_id.saturating_sub(1);
            let frames_worth = u64::from(self.config.shape.packets).min(MAX_CORROBORATION);
            if self.stash.count(source, before..=run_id) < frames_worth {
                return;
            }
            if before < run_id {
                self.open_held(store, i, source, before, None, now);
            }
            self.open_held(store, i, source, run_id, None, now);
            return;
        }
        if self.config.shape.packets > 1 {
            match self.stash.offer(source, run_id, packet, i, now) {
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
        self.open_held(store, i, source, run_id, Some(packet), now);
    }

    /// Opens frame `run_id` of `source` with the packets held for it, and message `i`'s
    /// packet `packet` when it is not held; nothing when there is no packet at all.
    fn open_held<A: Assembly<Frame = F>>(
        &mut self,
        store: &mut A,
        i: usize,
        source: SocketAddr,
        run_id: u64,
        packet: Option<u32>,
        now: Instant,
    ) {
        self.taken.clear();
        self.stash.take(source, run_id, &mut self.taken);
        let packets = self.taken.len() as u64 + u64::from(packet.is_some());
        if packets == 0 {
            return;
        }
        self.stream.opened(source, run_id, packets);
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
                for &(entry, held_packet, held) in &self.taken {
                    match held {
                        Held::InBatch(j) => {
                            self.landings[j].target = Some((k, u64::from(held_packet)))
                        }
                        Held::Copied => self.replays.push(Replay {
                            entry,
                            open: k,
                            index: u64::from(held_packet),
                        }),
                    }
                }
                if let Some(packet) = packet {
                    self.landings[i].target = Some((k, u64::from(packet)));
                }
            }
            Err(_) => {
                self.counters.dropped_frames += 1;
                self.counters.dropped_packets += packets;
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

#[cfg(test)]
mod tests;

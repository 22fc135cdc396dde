//! Packets of frames not yet open: the first packet of each, held until a second packet of
//! the same frame from the same source confirms it; and, before the stream has a source,
//! every packet, until one source has sent a frame's worth ([`Stash::hold`]).
//!
//! A frame of the stream opens on its second packet, so one stray packet, whatever frame it
//! names, never takes a slot, never ends another frame, and never moves the stream; and no
//! frame opens at all before a source has proved a stream, so a few early packets of a stray
//! socket open nothing. A held packet waits here until it is confirmed, expires, or is pushed
//! out by newer ones, and is then counted as a stray. Capacity and payload sizes are fixed at
//! construction: the stash never allocates after it.

use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::time::{Duration, Instant};

/// In-order packets that make a jump of the stream (or a new allowed source) believed: a
/// frame's worth, at least two, at most this many.
pub(super) const MAX_CORROBORATION: u64 = 64;

/// Packets held at most: the frame's worth that proves the first source (at most
/// [`MAX_CORROBORATION`]), and 16 more.
pub const STASH_CAPACITY: usize = MAX_CORROBORATION as usize + 16;

/// Where a held packet's payload is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Held {
    /// Still in the batch's receive buffers, at this message index.
    InBatch(usize),
    /// Copied into the entry's own buffer.
    Copied,
}

#[derive(Debug)]
struct Entry {
    /// `None`: free.
    key: Option<(SocketAddr, u64, u32)>,
    since: Instant,
    held: Held,
    payload: Box<[u8]>,
}

/// A bounded set of held first packets.
#[derive(Debug)]
pub struct Stash {
    entries: Vec<Entry>,
}

/// What [`Stash::offer`] did with a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offer {
    /// Held, in entry `index`; `evicted` says whether the oldest packet was pushed out for it
    /// (the caller counts it as a stray).
    Held {
        /// The entry.
        index: usize,
        /// Whether an older packet was pushed out.
        evicted: bool,
    },
    /// A packet of the same source, frame and packet is already held.
    Duplicate,
    /// A packet of another packet of the same frame and source is held: the frame is confirmed.
    Confirms,
}

impl Stash {
    /// An empty stash for payloads of `payload_bytes`.
    pub fn new(payload_bytes: usize) -> Self {
        let now = Instant::now();
        Self {
            entries: (0..STASH_CAPACITY)
                .map(|_| Entry {
                    key: None,
                    since: now,
                    held: Held::Copied,
                    payload: vec![0; payload_bytes].into_boxed_slice(),
                })
                .collect(),
        }
    }

    /// Offers a packet whose frame is not open; `message` is its index in the current batch.
    pub fn offer(
        &mut self,
        source: SocketAddr,
        frame: u64,
        packet: u32,
        message: usize,
        now: Instant,
    ) -> Offer {
        let mut confirms = false;
        for e in &self.entries {
            if let Some((s, f, c)) = e.key
                && s == source
                && f == frame
            {
                if c == packet {
                    return Offer::Duplicate;
                }
                confirms = true;
            }
        }
        if confirms {
            return Offer::Confirms;
        }
        self.put(source, frame, packet, message, now)
    }

    /// Holds a packet of a stream that no source feeds yet, whatever else of its frame is
    /// held: [`Offer::Held`], or [`Offer::Duplicate`] if this very packet is. The source's
    /// other held packets are as recent as it: a source that keeps sending is never the
    /// oldest, so a stray's packets are pushed out first. [`Stash::count`] then says whether
    /// it has sent a frame's worth.
    pub fn hold(
        &mut self,
        source: SocketAddr,
        frame: u64,
        packet: u32,
        message: usize,
        now: Instant,
    ) -> Offer {
        if self
            .entries
            .iter()
            .any(|e| e.key == Some((source, frame, packet)))
        {
            return Offer::Duplicate;
        }
        for e in &mut self.entries {
            if e.key.is_some_and(|(s, _, _)| s == source) {
                e.since = now;
            }
        }
        self.put(source, frame, packet, message, now)
    }

    /// Packets of `source` held for `frames`.
    pub fn count(&self, source: SocketAddr, frames: RangeInclusive<u64>) -> u64 {
        self.entries
            .iter()
            .filter(|e| {
                e.key
                    .is_some_and(|(s, f, _)| s == source && frames.contains(&f))
            })
            .count() as u64
    }

    /// Holds a packet in a free entry, or in the oldest one's place.
    fn put(
        &mut self,
        source: SocketAddr,
        frame: u64,
        packet: u32,
        message: usize,
        now: Instant,
    ) -> Offer {
        let (index, evicted) = match self.entries.iter().position(|e| e.key.is_none()) {
            Some(free) => (free, false),
            None => {
                let oldest = (0..self.entries.len())
                    .min_by_key(|&i| self.entries[i].since)
                    .unwrap_or(0);
                (oldest, true)
            }
        };
        let e = &mut self.entries[index];
        e.key = Some((source, frame, packet));
        e.since = now;
        e.held = Held::InBatch(message);
        Offer::Held { index, evicted }
    }

    /// Takes every packet held for `frame` of `source`: `(entry, packet, where its payload is)`.
    /// The entries are free for new packets at once; a [`Held::Copied`] payload stays readable
    /// through [`Stash::payload`] until [`Stash::settle`] copies the next batch's packets in.
    pub fn take(&mut self, source: SocketAddr, frame: u64, out: &mut Vec<(usize, u32, Held)>) {
        for (i, e) in self.entries.iter_mut().enumerate() {
            if let Some((s, f, c)) = e.key
                && s == source
                && f == frame
            {
                e.key = None;
                out.push((i, c, e.held));
            }
        }
    }

    /// The payload of a copied entry.
    pub fn payload(&self, index: usize) -> &[u8] {
        &self.entries[index].payload
    }

    /// Copies every packet still held in the batch's buffers into its entry: `payload(i)` is
    /// message `i`'s payload.
    pub fn settle<'p>(&mut self, payload: impl Fn(usize) -> &'p [u8]) {
        for e in &mut self.entries {
            if let (Some(_), Held::InBatch(i)) = (e.key, e.held) {
                e.payload.copy_from_slice(payload(i));
                e.held = Held::Copied;
            }
        }
    }

    /// Whether message `i` of the current batch is held.
    pub fn holds_message(&self, message: usize) -> bool {
        self.entries
            .iter()
            .any(|e| e.key.is_some() && e.held == Held::InBatch(message))
    }

    /// Lets go of packets held longer than `timeout`, or of frames below `head` (no longer
    /// openable); returns how many.
    pub fn expire(&mut self, now: Instant, timeout: Duration, head: u64) -> u64 {
        let mut gone = 0;
        for e in &mut self.entries {
            if let Some((_, frame, _)) = e.key
                && (now.duration_since(e.since) >= timeout || frame < head)
            {
                e.key = None;
                gone += 1;
            }
        }
        gone
    }

    /// Lets go of every packet; returns how many.
    pub fn clear(&mut self) -> u64 {
        let mut gone = 0;
        for e in &mut self.entries {
            if e.key.take().is_some() {
                gone += 1;
            }
        }
        gone
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    fn a_second_chirp_of_the_same_frame_and_source_confirms() {
        let now = Instant::now();
        let mut s = Stash::new(4);
        assert!(matches!(
            s.offer(addr(1), 5, 0, 0, now),
            Offer::Held { evicted: false, .. }
        ));
        assert_eq!(s.offer(addr(1), 5, 0, 1, now), Offer::Duplicate);
        assert!(
            matches!(s.offer(addr(2), 5, 1, 2, now), Offer::Held { .. }),
            "another source"
        );
        assert!(
            matches!(s.offer(addr(1), 6, 1, 3, now), Offer::Held { .. }),
            "another frame"
        );
        assert_eq!(s.offer(addr(1), 5, 7, 4, now), Offer::Confirms);
        let mut taken = Vec::new();
        s.take(addr(1), 5, &mut taken);
        assert_eq!(taken.len(), 1);
        assert_eq!((taken[0].1, taken[0].2), (0, Held::InBatch(0)));
        assert!(!s.holds_message(0) && s.holds_message(2));
    }

    #[test]
    fn before_the_stream_has_a_source_every_packet_is_held_and_counted_by_source() {
        let t0 = Instant::now();
        let mut s = Stash::new(4);
        for packet in 0..3 {
            assert!(matches!(
                s.hold(addr(1), 0, packet, packet as usize, t0),
                Offer::Held { evicted: false, .. }
            ));
        }
        assert_eq!(s.hold(addr(1), 0, 2, 3, t0), Offer::Duplicate);
        s.hold(addr(1), 1, 0, 4, t0);
        s.hold(addr(2), 0, 3, 5, t0);
        assert_eq!(s.count(addr(1), 0..=1), 4);
        assert_eq!(s.count(addr(1), 1..=1), 1);
        assert_eq!(s.count(addr(2), 0..=1), 1);
        // A source that keeps sending keeps its packets: the stray's are the oldest.
        for i in 0..STASH_CAPACITY as u32 - 5 {
            s.hold(
                addr(1),
                2 + u64::from(i),
                0,
                0,
                t0 + Duration::from_millis(1),
            );
        }
        let later = t0 + Duration::from_millis(2);
        assert!(matches!(
            s.hold(addr(1), 999, 0, 0, later),
            Offer::Held { evicted: true, .. }
        ));
        assert_eq!(s.count(addr(2), 0..=1), 0, "the stray's packet went first");
        assert_eq!(s.count(addr(1), 0..=1), 4);
        let mut taken = Vec::new();
        s.take(addr(1), 0, &mut taken);
        assert_eq!(taken.len(), 3);
    }

    #[test]
    fn it_is_bounded_and_pushes_out_the_oldest() {
        let t0 = Instant::now();
        let mut s = Stash::new(4);
        for i in 0..STASH_CAPACITY {
            let at = t0 + Duration::from_millis(i as u64);
            assert!(matches!(
                s.offer(addr(1), 100 + i as u64, 0, i, at),
                Offer::Held { evicted: false, .. }
            ));
        }
        let late = t0 + Duration::from_secs(1);
        assert!(matches!(
            s.offer(addr(1), 999, 0, 0, late),
            Offer::Held {
                index: 0,
                evicted: true
            }
        ));
        assert_eq!(s.clear(), STASH_CAPACITY as u64);
    }

    #[test]
    fn settled_payloads_are_copied_and_old_or_passed_ones_expire() {
        let t0 = Instant::now();
        let mut s = Stash::new(4);
        let Offer::Held { index, .. } = s.offer(addr(1), 3, 1, 0, t0) else {
            panic!()
        };
        s.offer(addr(1), 9, 1, 1, t0 + Duration::from_millis(50));
        let batch = [[1u8, 2, 3, 4], [5, 6, 7, 8]];
        s.settle(|i| &batch[i]);
        assert_eq!(s.payload(index), &[1, 2, 3, 4]);
        assert!(!s.holds_message(0));
        assert_eq!(
            s.expire(t0 + Duration::from_millis(60), Duration::from_millis(20), 0),
            1
        );
        assert_eq!(
            s.expire(t0 + Duration::from_millis(60), Duration::from_secs(9), 10),
            1,
            "below head"
        );
        assert_eq!(s.clear(), 0);
    }
}

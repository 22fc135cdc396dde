use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::udp::AllowFrom;
use crate::wire::WireShape;
use kplace_core::executor::BeginError;

const SHAPE: WireShape = WireShape::ci16(4, 8);
const PAYLOAD: usize = 16;

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// A packet's payload that names its sender, frame and packet.
fn payload(tag: u8, frame: u32, packet: u32) -> [u8; PAYLOAD] {
    let mut p = [0u8; PAYLOAD];
    p[0] = tag;
    p[1..5].copy_from_slice(&frame.to_le_bytes());
    p[5..9].copy_from_slice(&packet.to_le_bytes());
    p
}

fn packet(tag: u8, frame: u32, packet: u32) -> Vec<u8> {
    let header = PacketHeader {
        frame_id: frame,
        packet_id: packet,
        channel_id: 0,
        n_elements: SHAPE.elements,
    };
    let mut out = vec![0; SHAPE.packet_bytes()];
    wire::encode(&header, &payload(tag, frame, packet), &mut out);
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

/// Frames in plain memory; every ended frame is recorded with its present packets. Slots
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
        let packets = SHAPE.packets as usize;
        Self {
            slots: vec![(vec![0; packets * PAYLOAD], vec![false; packets]); capacity],
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
        let packets: BTreeMap<u64, Vec<u8>> = present
            .iter()
            .enumerate()
            .filter(|(_, p)| **p)
            .map(|(i, _)| (i as u64, data[i * PAYLOAD..(i + 1) * PAYLOAD].to_vec()))
            .collect();
        let complete = packets.len() == SHAPE.packets as usize;
        self.ended.push((frame.1, complete, packets));
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

fn stream(tag: u8, source: SocketAddr, frames: std::ops::Range<u32>) -> Vec<(SocketAddr, Vec<u8>)> {
    frames
        .flat_map(|f| (0..SHAPE.packets).map(move |c| (source, packet(tag, f, c))))
        .collect()
}

fn complete_ids(store: &Recorder) -> Vec<u64> {
    store.ended.iter().filter(|e| e.1).map(|e| e.0).collect()
}

#[test]
fn a_lost_packet_costs_only_its_own_frame() {
    // The case: with frames delivered in order, frame 3 kept open for its lost
    // packet held back the slots of every frame after it, and those were dropped. Any
    // packet may be the lost one, the batch any size, the store as small as two slots.
    for slots in [2, 4, 16] {
        for lost in 0..SHAPE.packets {
            for per_call in [1, 3, 5] {
                let packets: Vec<_> = stream(1, addr(1), 0..20)
                    .into_iter()
                    .filter(|(_, p)| p != &packet(1, 3, lost))
                    .collect();
                let (store, c) = receive_in(&config(Some(20), ""), packets, per_call, slots);
                let want: Vec<u64> = (0..20).filter(|&f| f != 3).collect();
                let case = format!("slots {slots}, lost packet {lost}, batch {per_call}: {c:?}");
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
        // The stray opened nothing: every frame of the real stream is received, its own.
        assert_eq!(complete_ids(&store), (0..20).collect::<Vec<_>>(), "{c:?}");
        assert!(store.ended.iter().all(|e| e.2.values().all(|p| p[0] == 1)));
        assert_eq!(
            (c.locked_source, c.lock_replaced, c.lock_confirmed),
            (Some(addr(1)), None, true),
            "{c:?}"
        );
        assert_eq!(
            (c.partial_frames, c.missed_frames, c.restarts, c.stray),
            (0, 0, 0, 2)
        );
        assert_eq!(c.classified(), c.packets);
    }
}

#[test]
fn an_early_stray_is_no_outcome_and_costs_the_real_sender_nothing() {
    // The case: a few packets of another socket before the real sender, which loses
    // one packet of frame 5. The stray's packets opened a frame that ended partial, the real
    // sender's first frame's packets were foreign until they proved its stream: one lost
    // packet counted `partial 2`, and the real sender listed among the foreign sources.
    let lost = packet(1, 5, 3);
    for strays in 1..SHAPE.packets {
        for per_call in [1, 2, 5] {
            let mut packets: Vec<_> = (0..strays).map(|c| (addr(7), packet(7, 0, c))).collect();
            packets.extend(
                stream(1, addr(1), 0..20)
                    .into_iter()
                    .filter(|(_, p)| *p != lost),
            );
            let (store, c) = receive(&config(Some(20), ""), packets, per_call);
            let case = format!("{strays} strays, batch {per_call}: {c:?}");
            let want: Vec<u64> = (0..20).filter(|&f| f != 5).collect();
            assert_eq!(complete_ids(&store), want, "{case}");
            // One outcome per frame: 19 complete, the lossy one partial, none missed.
            assert_eq!(
                (
                    c.complete_frames,
                    c.partial_frames,
                    c.dropped_frames,
                    c.missed_frames
                ),
                (19, 1, 0, 0),
                "{case}"
            );
            // Each frame ended once (the lossy one once the stream had passed it).
            let mut ended: Vec<u64> = store.ended.iter().map(|e| e.0).collect();
            ended.sort_unstable();
            assert_eq!(ended, (0..20).collect::<Vec<_>>(), "{case}");
            assert!(store.ended.iter().all(|e| e.2.values().all(|p| p[0] == 1)));
            // The real sender is the stream's, never foreign; the stray's packets are strays.
            assert_eq!(
                (c.locked_source, c.lock_replaced, c.restarts),
                (Some(addr(1)), None, 0),
                "{case}"
            );
            assert_eq!((c.foreign, c.stray), (0, u64::from(strays)), "{case}");
            assert!(c.foreign_sources.is_empty(), "{case}");
            assert_eq!(c.classified(), c.packets, "{case}");
        }
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
    let burst: Vec<_> = (0..SHAPE.packets - 1)
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
    for (_, _, packets) in &store.ended {
        assert!(
            packets.values().all(|p| p[0] == 1),
            "only the first sender's packets"
        );
    }
    // The second sender's packets before the lock (one fewer than the first's frame's worth
    // that took it) were held, then strays.
    assert_eq!((c.foreign, c.stray), (41, 7), "{c:?}");
    assert_eq!(c.foreign_sources, vec![(addr(2), 41)]);
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
            let mut order: Vec<u32> = (0..SHAPE.packets).collect();
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
                // Not in the first frame: its packets lock the stream.
                if k > 0 && duplicates.contains(&(k as u32, c)) {
                    locked.push((addr(LOCKED), packet(1, f, c)));
                }
            }
        }
        // Extras go anywhere after the first frame (whose packets lock the stream: before the
        // lock, another source's packets are held, not foreign), but strays of the stream's
        // own address not among the restart's first packets (they would only delay it): not
        // from just before its first packet to the packet that completes its corroboration
        // (a frame's worth of the restarted stream's packets, however many extras lie
        // between them), nor within three frames' worth of positions of its start.
        let restarted = |(a, p): &(SocketAddr, Vec<u8>)| {
            *a == addr(LOCKED) && PacketHeader::read_from(p).is_some_and(|h| (JUMP..2 * JUMP).contains(&h.frame_id))
        };
        let restart_at = |packets: &[(SocketAddr, Vec<u8>)]| packets.iter().position(restarted);
        // A duplicate of the packet before it neither extends the run nor breaks it.
        let corroborated_at = |packets: &[(SocketAddr, Vec<u8>)]| {
            let mut before: Option<&Vec<u8>> = None;
            packets
                .iter()
                .enumerate()
                .filter(|(_, p)| restarted(p))
                .filter(|(_, (_, bytes))| before.replace(bytes) != Some(bytes))
                .nth(SHAPE.packets as usize - 1)
                .map_or(packets.len(), |(i, _)| i)
        };
        let mut packets = locked.clone();
        let mut foreign = 0u64;
        let mut sorted = extras.clone();
        sorted.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
        for (at, e) in sorted {
            let first = SHAPE.packets as usize;
            let at = first + at % (packets.len() - first + 1);
            let item = match e {
                Extra::Foreign(f, c) => { foreign += 1; (addr(2), packet(2, f, c)) }
                Extra::StrayNear(f, c) => { foreign += 1; (addr(3), packet(3, f, c)) }
                Extra::StrayFar(f, c) => {
                    if let Some(r) = restart_at(&packets)
                        && at >= r.saturating_sub(1)
                        && at <= corroborated_at(&packets).max(r + 3 * SHAPE.packets as usize)
                    {
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
        for (frame, _, packets) in &store.ended {
            for (&packet, bytes) in packets {
                prop_assert_eq!(
                    bytes.as_slice(),
                    &payload(1, *frame as u32, packet as u32)[..],
                    "frame {} packet {}: only the locked sender's own packet", frame, packet
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

#[test]
fn the_counters_are_told_as_they_grow_and_whole_at_the_end() {
    let config = config(Some(4), "");
    let mut packets = stream(1, addr(9000), 0..4);
    // One junk datagram among them: told under a malformed class.
    packets.insert(3, (addr(9000), vec![0u8; 7]));
    let told = std::sync::Arc::new(std::sync::Mutex::new(Vec::<IngestCounters>::new()));
    let mut counters = IngestCounters::default();
    let mut store = Recorder::new(4);
    let mut script = Script {
        queue: packets.into(),
        per_call: 3,
    };
    let mut receiver = Receiver::new(&config, &mut counters, store.capacity());
    let sink = std::sync::Arc::clone(&told);
    receiver.on_counters = Some((
        Duration::ZERO,
        Box::new(move |c: &IngestCounters| sink.lock().unwrap().push(c.clone())),
    ));
    receiver.run(&mut script, &mut store).unwrap();
    drop(receiver);
    let told = told.lock().unwrap();
    assert!(
        told.len() >= 2,
        "told once per batch and at the end: {}",
        told.len()
    );
    assert!(told.windows(2).all(|w| w[0].packets <= w[1].packets));
    // The last telling is the receiver's final count, every datagram classed once.
    assert_eq!(told.last(), Some(&counters));
    let totals = counters.totals();
    let classed: u64 = totals.classes.iter().map(|(_, n)| n).sum();
    assert_eq!(classed, totals.packets);
    assert_eq!(totals.packets, u64::from(4 * SHAPE.packets) + 1);
    assert!(totals.classes.contains(&("wrong_size", 1)), "{totals:?}");
    assert!(totals.frames.contains(&("complete", 4)), "{totals:?}");
}

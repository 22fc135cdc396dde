//! The UDP packet receiver: a [`Source`] that assembles frames from packets of one row each, and
//! survives whatever else arrives.
//!
//! Packets arrive in batches ([`socket`]: `recvmmsg`, with each sender's address). Each
//! payload is received straight into the place predicted for it, so in-order packets cost no
//! copy (`receiver`). Every datagram is counted once, under exactly one name
//! ([`IngestCounters`]): malformed by class ([`wire::classify`]), `foreign` (another source
//! than the stream's), `unexpected` (outside the expected frame ids), `out_of_window` (too far
//! ahead), `late` (its frame ended), `duplicates`, `stray` (held before its frame opened,
//! never confirmed), `dropped_packets` (its frame found no slot) or `accepted`.
//!
//! What may build a frame (`stream`, `stash`):
//! - **One source.** The stream locks to the first sender (with
//!   [`UdpConfig::allow_from`], the first allowed one) to send a frame's worth of packets (at
//!   most 64) of one frame and the next; until one has, every packet is held and no frame
//!   opens, so a few early packets of a stray socket neither take the stream nor open a frame
//!   (they end as `stray`), and the real sender's first frame is received whole, counted once.
//!   Packets of two sources never share a frame. (A sender that never sends a frame's worth,
//!   a run of one frame that loses a packet, opens no frame: its packets end as `stray`.)
//! - **A frame window.** A frame opens only within [`window`] frames ahead of the newest, and
//!   only on its second packet from that source: one stray packet, whatever it names, never
//!   takes a slot, never ends a frame and never moves the stream. A sender that really jumped
//!   (restarted, or back after a long loss) is followed once a frame's worth of its packets
//!   (at most 64) arrive in order, the frames it skipped counted as `missed_frames`.
//!
//! Frames are opened without waiting for a slot: a frame that finds none is dropped whole
//! (counted, with its packets), so a sender faster than the pipeline shows as drops, never as a
//! wedge or unbounded memory. A frame is finished when its last packet arrives, or as partial
//! when no packet of it arrived for the frame timeout, or once the stream has opened two newer
//! frames. Frames are delivered in the order they began, so a frame missing packets would
//! hold back the slots of all after it: when a new frame finds no slot and an older one is
//! still open, the older ends as partial and the new one waits (at most 50 ms, and at most
//! the frame timeout) for the slots that gives back. A lost packet costs its own frame only. Timeouts are judged only when the socket is drained, so a receiver thread
//! held up longer than the frame timeout reads the packets that waited for it instead of
//! ending their frame as partial. The receiver stops after the expected number of frames,
//! after the idle timeout, when no packet came within the start timeout (so a receiver nobody
//! sends to ends too), or when the run stops (an interrupt included). Only packets the stream
//! takes count for those timeouts: malformed, foreign and stray packets never keep alive a
//! receiver that no valid sender feeds.

mod buffers;
mod receiver;
pub mod socket;
mod stash;
pub mod stream;

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

pub use buffers::{BufferFrame, FrameBuffers, IngestOnly};
pub use stream::{AllowFrom, AllowFromError};

use crate::wire::{self, MAX_DATAGRAM_BYTES, Malformed, WireShape};
use kplace_core::executor::{BeginError, Ingest, OpenFrame, PacketStatus, Source, SourceError};
use kplace_core::os::write::WriteError;
use receiver::Receiver;
use socket::SocketDatagrams;

/// Messages received per `recvmmsg` call.
pub const DEFAULT_BATCH: usize = 64;
/// How long one receive waits before the receiver checks its timeouts and stop conditions.
const POLL: Duration = Duration::from_millis(5);

/// Frames a stream may open ahead of its newest, for a store holding `capacity` frames:
/// twice the frames in flight plus those being assembled.
pub fn window(capacity: usize) -> u64 {
    receiver::window(capacity)
}

/// What the receiver listens for and when it stops.
#[derive(Clone, Debug)]
pub struct UdpConfig {
    /// The address to bind.
    pub bind: SocketAddr,
    /// The packets' shape: the configured wire shape.
    pub shape: WireShape,
    /// Frames expected: wire ids `first_frame_id .. first_frame_id + frames`; the receiver
    /// stops once each is complete, partial, dropped or passed over. `None`: until idle or
    /// stopped.
    pub frames: Option<u64>,
    /// The wire id of the first frame; run frame ids count from it.
    pub first_frame_id: u32,
    /// A frame that received no packet for this long ends as partial. Judged when the socket
    /// holds no more packets, so a receiver held up for longer than this loses nothing.
    pub frame_timeout: Duration,
    /// With no packet of the stream for this long after the last, the receiver stops;
    /// likewise judged on an empty socket. Junk does not count (see the module docs).
    pub idle_timeout: Duration,
    /// With no packet of the stream for this long from the start, the receiver stops: a
    /// receiver nobody sends to ends too, whatever junk reaches it. `None`: the idle timeout.
    pub start_timeout: Option<Duration>,
    /// Socket receive buffer to ask for, in bytes.
    pub recv_buffer: usize,
    /// Messages per `recvmmsg`.
    pub batch: usize,
    /// Sources that may feed the stream; empty: the first sender to open a frame, alone.
    pub allow_from: Vec<AllowFrom>,
}

impl UdpConfig {
    /// Defaults for `shape` on `bind`: 20 ms frame timeout, 2 s idle timeout, 64 MiB socket
    /// buffer, batches of 64, the first sender locked.
    pub fn new(bind: SocketAddr, shape: WireShape) -> Self {
        Self {
            bind,
            shape,
            frames: None,
            first_frame_id: 0,
            frame_timeout: Duration::from_millis(20),
            idle_timeout: Duration::from_secs(2),
            start_timeout: None,
            recv_buffer: 64 << 20,
            batch: DEFAULT_BATCH,
            allow_from: Vec::new(),
        }
    }
}

/// Everything the receiver counted. Every datagram is counted once: `packets` is the sum of
/// `accepted`, `malformed`, `foreign`, `unexpected`, `out_of_window`, `late`, `duplicates`,
/// `stray` and `dropped_packets`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IngestCounters {
    /// Datagrams received.
    pub packets: u64,
    /// Bytes received.
    pub bytes: u64,
    /// Packets stored in their frame.
    pub accepted: u64,
    /// Payloads that landed where predicted (no copy).
    pub in_place: u64,
    /// Malformed packets, per class, in [`Malformed::ALL`] order.
    pub malformed: [u64; 4],
    /// Packets from a source other than the stream's (or not allowed).
    pub foreign: u64,
    /// Packets of a row already stored.
    pub duplicates: u64,
    /// Packets of a frame already ended or passed over.
    pub late: u64,
    /// Packets of a frame further ahead than the window.
    pub out_of_window: u64,
    /// Packets held before their frame opened (a frame's first, or any before a sender
    /// proved the stream) that nothing confirmed.
    pub stray: u64,
    /// Packets of a frame dropped for want of a slot.
    pub dropped_packets: u64,
    /// Frames dropped whole for want of a free slot.
    pub dropped_frames: u64,
    /// Frames ended with every packet.
    pub complete_frames: u64,
    /// Frames ended with packets missing.
    pub partial_frames: u64,
    /// Frames the stream passed over with none of their packets stored.
    pub missed_frames: u64,
    /// Times the stream was followed to a new position or source (a sender restart).
    pub restarts: u64,
    /// Packets with a frame id outside the expected range.
    pub unexpected: u64,
    /// The source the stream locked to.
    pub locked_source: Option<SocketAddr>,
    /// Whether the lock was confirmed: its source sent a frame's worth of packets in order
    /// (at most 64) before its first frame opened, or proved a takeover with as many.
    pub lock_confirmed: bool,
    /// Packets of the locked source counted toward confirming the lock (up to the count that
    /// confirms it).
    pub lock_evidence: u64,
    /// The source the lock was taken from, if it moved: one that opened a frame but never
    /// confirmed its lock, or, with an allow list, the stream's previous sender.
    pub lock_replaced: Option<SocketAddr>,
    /// Foreign sources with their packets (the first 16 by address).
    pub foreign_sources: Vec<(SocketAddr, u64)>,
    /// The socket receive buffer the kernel granted, in bytes.
    pub recv_buffer: usize,
    /// From the first batch with a packet the stream took (stored, dropped with its frame,
    /// late or a duplicate) to the last: the time the receiver was receiving the stream.
    pub receiving: Duration,
}

impl IngestCounters {
    /// Malformed packets of one class.
    pub fn malformed(&self, class: Malformed) -> u64 {
        self.malformed[Malformed::ALL.iter().position(|c| *c == class).unwrap_or(0)]
    }

    /// The sum of every class a datagram is counted under: equals `packets` once the
    /// receiver has returned.
    pub fn classified(&self) -> u64 {
        self.accepted
            + self.malformed.iter().sum::<u64>()
            + self.foreign
            + self.unexpected
            + self.out_of_window
            + self.late
            + self.duplicates
            + self.stray
            + self.dropped_packets
    }
}

/// A receiver's counters as the metrics show them: what arrived, how each datagram was
/// classed, and what became of the frames.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IngestTotals {
    /// Datagrams received.
    pub packets: u64,
    /// Bytes received.
    pub bytes: u64,
    /// Datagrams per class, every datagram in exactly one, in a fixed order of names.
    pub classes: Vec<(&'static str, u64)>,
    /// Frames per outcome (complete, partial, dropped, missed), in a fixed order of names.
    pub frames: Vec<(&'static str, u64)>,
    /// Times the stream was followed to a new position or source.
    pub restarts: u64,
}

impl IngestCounters {
    /// The counters as the metrics show them (`kplace run --metrics`): every datagram under
    /// exactly one class, every frame under one outcome.
    pub fn totals(&self) -> IngestTotals {
        let mut classes = vec![("accepted", self.accepted)];
        classes.extend(
            Malformed::ALL
                .iter()
                .map(|&class| (class.name(), self.malformed(class))),
        );
        classes.extend([
            ("foreign", self.foreign),
            ("unexpected", self.unexpected),
            ("out_of_window", self.out_of_window),
            ("late", self.late),
            ("duplicate", self.duplicates),
            ("stray", self.stray),
            ("dropped", self.dropped_packets),
        ]);
        IngestTotals {
            packets: self.packets,
            bytes: self.bytes,
            classes,
            frames: vec![
                ("complete", self.complete_frames),
                ("partial", self.partial_frames),
                ("dropped", self.dropped_frames),
                ("missed", self.missed_frames),
            ],
            restarts: self.restarts,
        }
    }
}

/// The counters as the run prints them: what arrived and how each packet was classed, then
/// what became of the frames, then the stream's source and any foreign ones.
impl std::fmt::Display for IngestCounters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ingest: packets {} ({} in place), accepted {}, duplicates {}, late {}, unexpected {}, out of window {}, stray {}, foreign {}, malformed: ",
            self.packets,
            self.in_place,
            self.accepted,
            self.duplicates,
            self.late,
            self.unexpected,
            self.out_of_window,
            self.stray,
            self.foreign,
        )?;
        for (i, class) in Malformed::ALL.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            write!(f, "{sep}{} {}", class.name(), self.malformed(*class))?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "ingest: frames complete {}, partial {}, dropped {} ({} packets), missed {}; restarts {}; socket buffer {} KiB",
            self.complete_frames,
            self.partial_frames,
            self.dropped_frames,
            self.dropped_packets,
            self.missed_frames,
            self.restarts,
            self.recv_buffer / 1024
        )?;
        if self.packets == 0 {
            writeln!(
                f,
                "ingest: no packet arrived: nothing was sent to this receiver, or nothing \
                 reached it (check the sender's --dest, and any firewall between them)"
            )?;
        }
        if let Some(lock) = self.locked_source {
            write!(f, "ingest: stream from {lock}")?;
            if self.lock_confirmed {
                write!(f, " (locked on {} packets in order", self.lock_evidence)?;
            } else {
                write!(
                    f,
                    " (not confirmed: {} packets, fewer than a frame's worth",
                    self.lock_evidence
                )?;
            }
            match self.lock_replaced {
                Some(old) => write!(f, "; taken from {old})")?,
                None => write!(f, ")")?,
            }
            for (i, (addr, packets)) in self.foreign_sources.iter().enumerate() {
                let lead = if i == 0 { "; foreign sources: " } else { ", " };
                write!(f, "{lead}{addr} ({packets})")?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

/// Why the receiver could not start or failed.
#[derive(Debug, thiserror::Error)]
pub enum UdpError {
    /// The socket could not be bound or configured.
    #[error("cannot listen on udp://{addr}: {cause}")]
    Socket {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        cause: io::Error,
    },
    /// One packet does not fit in a UDP datagram.
    #[error(
        "a {elements}-element packet makes {bytes}-byte packets, more than a UDP datagram carries ({MAX_DATAGRAM_BYTES}); use at most {} elements per packet",
        (MAX_DATAGRAM_BYTES - wire::HEADER_BYTES) / 4
    )]
    TooLarge {
        /// Elements per packet.
        elements: u32,
        /// Bytes per packet.
        bytes: usize,
    },
}

/// A frame store the receiver assembles into: the executor's [`Ingest`], or plain buffers for
/// ingest-only runs.
pub trait Assembly {
    /// A frame being assembled.
    type Frame;
    /// Frames the store holds at once (slots): sizes the frame window.
    fn capacity(&self) -> usize;
    /// Opens frame `frame_id` without waiting.
    fn try_begin(&mut self, frame_id: u64) -> Result<Self::Frame, BeginError>;
    /// Opens frame `frame_id`, waiting at most `wait` for a slot that another thread is
    /// returning. The default suits a store whose slots return as its frames end.
    fn begin_within(&mut self, frame_id: u64, wait: Duration) -> Result<Self::Frame, BeginError> {
        let _ = wait;
        self.try_begin(frame_id)
    }
    /// The frame's id.
    fn id(frame: &Self::Frame) -> u64;
    /// The place of absent packet `index`, or `None` if present or out of range.
    fn place(&self, frame: &Self::Frame, index: u64) -> Option<*mut u8>;
    /// Marks packet `index` written.
    fn done(&mut self, frame: &Self::Frame, index: u64) -> PacketStatus;
    /// Packets present.
    fn received(&self, frame: &Self::Frame) -> u64;
    /// Ends the frame; true if it was complete.
    fn finish(&mut self, frame: Self::Frame) -> bool;
    /// Whether the receiver should stop.
    fn stopping(&self) -> bool;
}

impl Assembly for Ingest<'_> {
    type Frame = OpenFrame;

    fn capacity(&self) -> usize {
        self.slots()
    }
    fn try_begin(&mut self, frame_id: u64) -> Result<OpenFrame, BeginError> {
        self.try_begin_frame(frame_id)
    }
    fn begin_within(&mut self, frame_id: u64, wait: Duration) -> Result<OpenFrame, BeginError> {
        self.begin_frame_within(frame_id, wait)
    }
    fn id(frame: &OpenFrame) -> u64 {
        frame.frame_id()
    }
    fn place(&self, frame: &OpenFrame, index: u64) -> Option<*mut u8> {
        self.packet_place(frame, index)
    }
    fn done(&mut self, frame: &OpenFrame, index: u64) -> PacketStatus {
        self.packet_done(frame, index)
    }
    fn received(&self, frame: &OpenFrame) -> u64 {
        Ingest::received(self, frame)
    }
    fn finish(&mut self, frame: OpenFrame) -> bool {
        Ingest::finish(self, frame)
    }
    fn stopping(&self) -> bool {
        Ingest::stopping(self)
    }
}

/// Called once the receiver starts receiving, with the address it listens on: the moment a
/// sender may start without losing a packet. An error it returns ends the receiver (a ready file that cannot be written: no sender would
/// ever start).
pub type OnReady = Box<dyn FnOnce(SocketAddr) -> Result<(), WriteError> + Send>;

/// Called once when the stream first locks to a source, with that source.
pub type OnLock = Box<dyn FnOnce(SocketAddr) + Send>;

/// Told the receiver's counters as it goes ([`UdpSource::on_counters`]).
pub type OnCounters = Box<dyn FnMut(&IngestCounters) + Send>;

/// The UDP receiver.
pub struct UdpSource {
    socket: UdpSocket,
    config: UdpConfig,
    counters: IngestCounters,
    on_ready: Option<OnReady>,
    on_lock: Option<OnLock>,
    on_counters: Option<(Duration, OnCounters)>,
}

impl UdpSource {
    /// Checks that a packet fits a datagram, binds the socket and sizes its receive buffer.
    pub fn bind(config: UdpConfig) -> Result<Self, UdpError> {
        if config.shape.packet_bytes() > MAX_DATAGRAM_BYTES {
            return Err(UdpError::TooLarge {
                elements: config.shape.elements,
                bytes: config.shape.packet_bytes(),
            });
        }
        let socket_error = |cause| UdpError::Socket {
            addr: config.bind,
            cause,
        };
        let socket = UdpSocket::bind(config.bind).map_err(socket_error)?;
        socket.set_read_timeout(Some(POLL)).map_err(socket_error)?;
        let recv_buffer =
            socket::set_recv_buffer(&socket, config.recv_buffer).map_err(socket_error)?;
        Ok(Self {
            socket,
            config,
            counters: IngestCounters {
                recv_buffer,
                ..Default::default()
            },
            on_ready: None,
            on_lock: None,
            on_counters: None,
        })
    }

    /// Calls `ready` with the bound address once receiving starts (inside a run: after the
    /// executor has made its slots, pools and kernel states).
    pub fn on_ready(&mut self, ready: OnReady) {
        self.on_ready = Some(ready);
    }

    /// Calls `lock` with the source once the stream first locks to one.
    pub fn on_lock(&mut self, lock: OnLock) {
        self.on_lock = Some(lock);
    }

    /// Tells `tell` the counters at most every `every` while receiving (judged after each
    /// batch and each empty poll of the socket, 5 ms apart at the most), and once when
    /// receiving ends: for live metrics.
    pub fn on_counters(&mut self, every: Duration, tell: OnCounters) {
        self.on_counters = Some((every, tell));
    }

    /// The address bound (with the port the OS chose for port 0).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// What the receiver counted so far.
    pub fn counters(&self) -> &IngestCounters {
        &self.counters
    }

    /// Receives and assembles frames without processing them, into a ring of plain buffers,
    /// until a stop condition: the receiver's own ceiling (`kplace run --ingest-only`).
    pub fn receive_only(&mut self) -> Result<IngestOnly, SourceError> {
        let shape = self.config.shape;
        let payload = shape.payload_bytes();
        let mut buffers = FrameBuffers::new(4, u64::from(shape.packets), payload)
            .map_err(|e| SourceError::Buffers(Box::new(e)))?;
        let cpu_before = kplace_core::measure::metrics::process_cpu_time();
        self.receive(&mut buffers, payload)?;
        Ok(IngestOnly {
            cpu: kplace_core::measure::metrics::process_cpu_time().saturating_sub(cpu_before),
            counters: self.counters.clone(),
        })
    }

    /// Receives and assembles into `store` until a stop condition (see the module docs).
    pub fn receive<A: Assembly>(
        &mut self,
        store: &mut A,
        packet_place_bytes: usize,
    ) -> Result<(), SourceError> {
        let shape = self.config.shape;
        if packet_place_bytes != shape.payload_bytes() {
            return Err(SourceError::PacketBytes {
                got: packet_place_bytes,
                want: shape.payload_bytes(),
                elements: shape.elements,
            });
        }
        if let Some(ready) = self.on_ready.take() {
            ready(self.socket.local_addr().unwrap_or(self.config.bind))
                .map_err(|e| SourceError::Ready(Box::new(e)))?;
        }
        let mut datagrams = SocketDatagrams::new(&self.socket, self.config.batch.max(1));
        let capacity = store.capacity();
        let mut receiver = Receiver::new(&self.config, &mut self.counters, capacity);
        receiver.on_lock = self.on_lock.take();
        receiver.on_counters = self.on_counters.take();
        let result = receiver.run(&mut datagrams, store);
        self.on_counters = receiver.on_counters.take();
        result
    }
}

impl Source for UdpSource {
    fn run(&mut self, ingest: &mut Ingest<'_>) -> Result<(), SourceError> {
        let bytes = ingest.packet_bytes();
        self.receive(ingest, bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_receiver_that_got_nothing_says_so() {
        let text = IngestCounters::default().to_string();
        assert!(
            text.contains("ingest: no packet arrived: nothing was sent to this receiver"),
            "{text}"
        );
        let some = IngestCounters {
            packets: 1,
            ..Default::default()
        };
        assert!(!some.to_string().contains("no packet arrived"));
    }

    #[test]
    fn counters_print_every_class_and_the_sources() {
        let mut c = IngestCounters {
            packets: 10,
            accepted: 6,
            malformed: [1, 0, 2, 0],
            foreign: 1,
            complete_frames: 3,
            recv_buffer: 4096,
            ..Default::default()
        };
        let text = c.to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines[0].starts_with("ingest: packets 10 (0 in place), accepted 6,"),
            "{text}"
        );
        let malformed: Vec<String> = Malformed::ALL
            .iter()
            .map(|m| format!("{} {}", m.name(), c.malformed(*m)))
            .collect();
        assert!(
            lines[0].ends_with(&format!("malformed: {}", malformed.join(", "))),
            "{text}"
        );
        assert!(
            lines[1].contains("frames complete 3,") && lines[1].ends_with("socket buffer 4 KiB")
        );
        c.locked_source = Some("127.0.0.1:5000".parse().unwrap());
        c.lock_confirmed = true;
        c.lock_evidence = 64;
        c.lock_replaced = Some("127.0.0.1:4000".parse().unwrap());
        c.foreign_sources = vec![
            ("127.0.0.1:6000".parse().unwrap(), 1),
            ("127.0.0.1:7000".parse().unwrap(), 2),
        ];
        let text = c.to_string();
        assert_eq!(
            text.lines().nth(2),
            Some(
                "ingest: stream from 127.0.0.1:5000 (locked on 64 packets in order; taken from 127.0.0.1:4000); foreign sources: 127.0.0.1:6000 (1), 127.0.0.1:7000 (2)"
            )
        );
    }
}

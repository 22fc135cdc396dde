//! The UDP chirp receiver: a [`Source`] that assembles frames from one-chirp packets.
//!
//! Packets arrive in batches from `recvmmsg`. Each message's payload is received straight into
//! the place the receiver predicts for it, the next absent chirp of the frame being filled, so
//! in-order chirps cost no copy at all; a mispredicted payload is copied once into its real
//! place. Headers are checked with [`wire::classify`]: malformed packets and duplicates are
//! counted under their own names and dropped without touching any frame's present data.
//!
//! Frames are opened when their first packet arrives, several at a time, without waiting for
//! a slot: a frame that finds no free slot is dropped whole (counted, with its packets), so a
//! sender faster than the pipeline shows as drops, never as a wedge or unbounded memory. A
//! frame is finished when its last chirp arrives, or as partial when no packet of it arrived
//! for the frame timeout, or when more frames are open than the receiver keeps. Timeouts are
//! judged only when the socket is drained, so a receiver thread held up longer than the frame
//! timeout (descheduled on a busy machine) reads the packets that waited for it instead of
//! ending their frame as partial. The receiver stops after the expected number of frames,
//! after an idle timeout, or when the run stops.

use std::io;
use std::mem::MaybeUninit;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use crate::executor::{BeginError, Ingest, OpenFrame, PacketStatus, Source, SourceError};
use crate::pool::{Block, Pool, PoolError};
use crate::wire::{self, ChirpHeader, HEADER_BYTES, Malformed, WireShape};

/// Messages received per `recvmmsg` call.
pub const DEFAULT_BATCH: usize = 64;
/// Frames assembled at once; opening one more ends the oldest (as partial, if it still misses
/// chirps). Two allow packets of consecutive frames to interleave, while a lossy frame gives
/// its slot back as soon as the stream has moved two frames on.
const MAX_OPEN: usize = 2;
/// Frame ids remembered as dropped, so that their later packets are counted as such.
const DROPPED_MEMORY: usize = 64;
/// How long one receive waits before the receiver checks its timeouts.
const POLL: Duration = Duration::from_millis(5);

/// What the receiver listens for and when it stops.
#[derive(Clone, Debug)]
pub struct UdpConfig {
    /// The address to bind.
    pub bind: SocketAddr,
    /// The packets' shape: the configured CPI.
    pub shape: WireShape,
    /// Frames expected: wire ids `first_frame_id .. first_frame_id + frames`; the receiver
    /// stops once each is complete, partial or dropped. `None`: until idle or stopped.
    pub frames: Option<u64>,
    /// The wire id of the first frame; run frame ids count from it.
    pub first_frame_id: u32,
    /// A frame that received no packet for this long ends as partial. Judged when the socket
    /// holds no more packets, so a receiver held up for longer than this loses nothing.
    pub frame_timeout: Duration,
    /// With no packet for this long (after the first), the receiver stops; likewise judged on
    /// an empty socket.
    pub idle_timeout: Duration,
    /// Socket receive buffer to ask for, in bytes.
    pub recv_buffer: usize,
    /// Messages per `recvmmsg`.
    pub batch: usize,
}

impl UdpConfig {
    /// Defaults for `shape` on `bind`: 20 ms frame timeout, 2 s idle timeout, 64 MiB socket
    /// buffer, batches of 64.
    pub fn new(bind: SocketAddr, shape: WireShape) -> Self {
        Self {
            bind,
            shape,
            frames: None,
            first_frame_id: 0,
            frame_timeout: Duration::from_millis(20),
            idle_timeout: Duration::from_secs(2),
            recv_buffer: 64 << 20,
            batch: DEFAULT_BATCH,
        }
    }
}

/// Everything the receiver counted.
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
    /// Packets of a chirp already present.
    pub duplicates: u64,
    /// Packets of a frame already ended.
    pub late: u64,
    /// Packets of a frame dropped for want of a slot.
    pub dropped_packets: u64,
    /// Frames dropped whole for want of a free slot.
    pub dropped_frames: u64,
    /// Frames ended with every chirp.
    pub complete_frames: u64,
    /// Frames ended with chirps missing.
    pub partial_frames: u64,
    /// Packets with a frame id outside the expected range.
    pub unexpected: u64,
    /// The socket receive buffer the kernel granted, in bytes.
    pub recv_buffer: usize,
    /// From the first batch of packets to the last: the time the receiver was receiving.
    pub receiving: Duration,
}

impl IngestCounters {
    /// Malformed packets of one class.
    pub fn malformed(&self, class: Malformed) -> u64 {
        self.malformed[Malformed::ALL.iter().position(|c| *c == class).unwrap_or(0)]
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
    /// The graph's source buffer does not hold one chirp per packet of this shape.
    #[error(
        "the graph's source takes {got} bytes per packet, but a {samples}-sample chirp has {want}"
    )]
    Shape {
        /// Bytes per packet place in the source tensor.
        got: usize,
        /// Payload bytes of the configured chirp.
        want: usize,
        /// Samples per chirp.
        samples: u32,
    },
}

/// A frame store the receiver assembles into: the executor's [`Ingest`], or plain buffers for
/// ingest-only runs.
pub trait Assembly {
    /// A frame being assembled.
    type Frame;
    /// Opens frame `frame_id` without waiting.
    fn try_begin(&mut self, frame_id: u64) -> Result<Self::Frame, BeginError>;
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

    fn try_begin(&mut self, frame_id: u64) -> Result<OpenFrame, BeginError> {
        self.try_begin_frame(frame_id)
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

/// The UDP receiver.
pub struct UdpSource {
    socket: UdpSocket,
    config: UdpConfig,
    counters: IngestCounters,
}

impl UdpSource {
    /// Binds the socket and sizes its receive buffer.
    pub fn bind(config: UdpConfig) -> Result<Self, UdpError> {
        let socket_error = |cause| UdpError::Socket {
            addr: config.bind,
            cause,
        };
        let socket = UdpSocket::bind(config.bind).map_err(socket_error)?;
        socket.set_read_timeout(Some(POLL)).map_err(socket_error)?;
        let recv_buffer = set_recv_buffer(&socket, config.recv_buffer).map_err(socket_error)?;
        Ok(Self {
            socket,
            config,
            counters: IngestCounters {
                recv_buffer,
                ..Default::default()
            },
        })
    }

    /// The address bound (with the port the OS chose for port 0).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// What the receiver counted so far.
    pub fn counters(&self) -> &IngestCounters {
        &self.counters
    }

    /// Receives and assembles into `store` until a stop condition (see the module docs).
    pub fn receive<A: Assembly>(
        &mut self,
        store: &mut A,
        packet_place_bytes: usize,
    ) -> Result<(), SourceError> {
        let shape = self.config.shape;
        if packet_place_bytes != shape.payload_bytes() {
            return Err(SourceError(
                UdpError::Shape {
                    got: packet_place_bytes,
                    want: shape.payload_bytes(),
                    samples: shape.samples,
                }
                .to_string(),
            ));
        }
        let mut receiver = Receiver::new(&self.config, &mut self.counters);
        receiver.run(&self.socket, store)
    }
}

impl Source for UdpSource {
    fn run(&mut self, ingest: &mut Ingest<'_>) -> Result<(), SourceError> {
        let bytes = ingest.packet_bytes();
        self.receive(ingest, bytes)
    }
}

fn set_recv_buffer(socket: &UdpSocket, bytes: usize) -> io::Result<usize> {
    let fd = socket.as_raw_fd();
    let want = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    // SAFETY: setsockopt reads an int of the given size; the fd is a live socket.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&want as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut got: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `got`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&mut got as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(usize::try_from(got).unwrap_or(0))
}

/// Where one message's payload landed and where it belongs.
#[derive(Clone, Copy)]
struct Landing {
    /// The predicted place the payload was received into; null for scratch.
    predicted: *mut u8,
    /// Open-frame index and packet index it belongs to, once classified.
    target: Option<(usize, u64)>,
}

/// One frame being assembled, with when its last packet came.
struct Open<F> {
    frame: F,
    last_packet: Instant,
}

/// The receive loop's state, borrowed for one run.
struct Receiver<'c, F> {
    config: &'c UdpConfig,
    counters: &'c mut IngestCounters,
    open: Vec<Open<F>>,
    /// Frames seen so far end below this run id: a lower id not open is late or dropped.
    next_new: u64,
    dropped: [u64; DROPPED_MEMORY],
    dropped_len: usize,
    /// The frame and packet of the last accepted packet, for predicting the next.
    cursor: Option<(u64, u64)>,
    headers: Vec<[u8; HEADER_BYTES]>,
    scratch: Vec<u8>,
    landings: Vec<Landing>,
}

impl<'c, F> Receiver<'c, F> {
    fn new(config: &'c UdpConfig, counters: &'c mut IngestCounters) -> Self {
        let batch = config.batch.max(1);
        Self {
            config,
            counters,
            open: Vec::with_capacity(MAX_OPEN + batch),
            next_new: 0,
            dropped: [u64::MAX; DROPPED_MEMORY],
            dropped_len: 0,
            cursor: None,
            headers: vec![[0; HEADER_BYTES]; batch],
            scratch: vec![0; batch * config.shape.payload_bytes()],
            landings: vec![
                Landing {
                    predicted: std::ptr::null_mut(),
                    target: None
                };
                batch
            ],
        }
    }

    fn run<A: Assembly<Frame = F>>(
        &mut self,
        socket: &UdpSocket,
        store: &mut A,
    ) -> Result<(), SourceError> {
        let batch = self.headers.len();
        let payload = self.config.shape.payload_bytes();
        let mut iovecs: Vec<[libc::iovec; 2]> = vec![[empty_iovec(), empty_iovec()]; batch];
        // SAFETY: mmsghdr is plain data; zero is a valid (empty) value for every field.
        let mut messages: Vec<libc::mmsghdr> =
            vec![unsafe { MaybeUninit::zeroed().assume_init() }; batch];
        let mut first_packet: Option<Instant> = None;
        let mut last_packet: Option<Instant> = None;
        loop {
            if store.stopping() || self.all_accounted() {
                break;
            }
            // Predict: the next absent chirps of the frame the last packet went to.
            self.predict(store, batch);
            for i in 0..batch {
                let place = if self.landings[i].predicted.is_null() {
                    self.scratch[i * payload..].as_mut_ptr()
                } else {
                    self.landings[i].predicted
                };
                iovecs[i] = [
                    libc::iovec {
                        iov_base: self.headers[i].as_mut_ptr().cast(),
                        iov_len: HEADER_BYTES,
                    },
                    libc::iovec {
                        iov_base: place.cast(),
                        iov_len: payload,
                    },
                ];
                messages[i].msg_hdr.msg_iov = iovecs[i].as_mut_ptr();
                messages[i].msg_hdr.msg_iovlen = 2;
                messages[i].msg_hdr.msg_flags = 0;
                messages[i].msg_len = 0;
            }
            // SAFETY: every message points at two iovecs over live buffers of the stated sizes:
            // a header buffer and either scratch or an absent packet's place in an open frame.
            let n = unsafe {
                libc::recvmmsg(
                    socket.as_raw_fd(),
                    messages.as_mut_ptr(),
                    batch as libc::c_uint,
                    libc::MSG_WAITFORONE,
                    std::ptr::null_mut(),
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
                        // Nothing waits in the socket: what is missing has not arrived.
                        let now = Instant::now();
                        self.expire(store, now);
                        if last_packet.is_some_and(|t| now - t >= self.config.idle_timeout) {
                            break;
                        }
                        continue;
                    }
                    io::ErrorKind::Interrupted => continue,
                    _ => return Err(SourceError(format!("recvmmsg: {e}"))),
                }
            }
            let now = Instant::now();
            let first = *first_packet.get_or_insert(now);
            last_packet = Some(now);
            self.counters.receiving = now.duration_since(first);
            self.absorb(store, &messages[..n as usize], now);
            // Timeouts are judged only on a drained socket (a short batch): packets that
            // arrived while this thread was held up (descheduled, or slow in a store) wait in
            // the socket, and their frame must not end as partial before they are read.
            if (n as usize) < batch {
                self.expire(store, now);
            }
        }
        // Whatever is still open ends now, partial unless complete.
        for open in std::mem::take(&mut self.open) {
            self.end(store, open.frame);
        }
        Ok(())
    }

    fn all_accounted(&self) -> bool {
        self.config
            .frames
            .is_some_and(|frames| self.next_new >= frames && self.open.is_empty())
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
        let Some(open) = self.open.iter().find(|o| A::id(&o.frame) == frame_id) else {
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

    /// Classifies, places and counts one batch (three passes, so that a mispredicted payload
    /// is never overwritten before it is moved).
    fn absorb<A: Assembly<Frame = F>>(
        &mut self,
        store: &mut A,
        messages: &[libc::mmsghdr],
        now: Instant,
    ) {
        let payload = self.config.shape.payload_bytes();
        // Pass 1: classify and find each payload's target.
        for (i, m) in messages.iter().enumerate() {
            let len = m.msg_len as usize;
            self.counters.packets += 1;
            self.counters.bytes += len as u64;
            let truncated = m.msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
            let header = ChirpHeader::read_from(&self.headers[i][..len.min(HEADER_BYTES)]);
            let header = match wire::classify(header, len, truncated, self.config.shape) {
                Ok(h) => h,
                Err(class) => {
                    self.counters.malformed
                        [Malformed::ALL.iter().position(|c| *c == class).unwrap_or(0)] += 1;
                    continue;
                }
            };
            let run_id = u64::from(header.frame_id.wrapping_sub(self.config.first_frame_id));
            let Some(slot) = self.frame_for(store, run_id, now) else {
                continue;
            };
            let index = u64::from(header.chirp_id);
            let earlier = self.landings[..i]
                .iter()
                .any(|l| l.target == Some((slot, index)));
            if earlier || store.place(&self.open[slot].frame, index).is_none() {
                self.counters.duplicates += 1;
                continue;
            }
            self.landings[i].target = Some((slot, index));
            self.open[slot].last_packet = now;
        }
        // Pass 2: move every mispredicted payload that landed in a frame out to scratch.
        for i in 0..messages.len() {
            let l = self.landings[i];
            let Some((slot, index)) = l.target else {
                continue;
            };
            let target = store.place(&self.open[slot].frame, index);
            if !l.predicted.is_null() && target != Some(l.predicted) {
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
        // Pass 3: copy from scratch where needed, and mark present.
        for i in 0..messages.len() {
            let l = self.landings[i];
            let Some((slot, index)) = l.target else {
                continue;
            };
            let frame = &self.open[slot].frame;
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
            if store.done(frame, index) == PacketStatus::Accepted {
                self.counters.accepted += 1;
                self.cursor = Some((A::id(frame), index));
            }
        }
        // Frames with every chirp end now; beyond MAX_OPEN, the oldest are given up on, as
        // packets have moved that many frames on.
        let packets = u64::from(self.config.shape.chirps);
        let mut k = 0;
        while k < self.open.len() {
            if store.received(&self.open[k].frame) == packets {
                let open = self.open.remove(k);
                self.end(store, open.frame);
            } else {
                k += 1;
            }
        }
        while self.open.len() > MAX_OPEN {
            let oldest = self.open.remove(0);
            self.end(store, oldest.frame);
        }
    }

    /// The open-frame index for run frame `run_id`, opening it if it is new; `None` (counted)
    /// for packets of frames ended, dropped, or outside the expected range.
    fn frame_for<A: Assembly<Frame = F>>(
        &mut self,
        store: &mut A,
        run_id: u64,
        now: Instant,
    ) -> Option<usize> {
        if let Some(k) = self.open.iter().position(|o| A::id(&o.frame) == run_id) {
            return Some(k);
        }
        if self.config.frames.is_some_and(|frames| run_id >= frames) {
            self.counters.unexpected += 1;
            return None;
        }
        if run_id < self.next_new {
            if self.dropped.contains(&run_id) {
                self.counters.dropped_packets += 1;
            } else {
                self.counters.late += 1;
            }
            return None;
        }
        self.next_new = run_id + 1;
        // Frames are not ended while a batch is being placed (its payloads may sit in their
        // places); `absorb` trims the oldest past MAX_OPEN afterwards.
        match store.try_begin(run_id) {
            Ok(frame) => {
                self.open.push(Open {
                    frame,
                    last_packet: now,
                });
                Some(self.open.len() - 1)
            }
            Err(_) => {
                self.counters.dropped_frames += 1;
                self.counters.dropped_packets += 1;
                self.dropped[self.dropped_len % DROPPED_MEMORY] = run_id;
                self.dropped_len += 1;
                None
            }
        }
    }

    /// Ends frames whose last packet is older than the frame timeout.
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

fn empty_iovec() -> libc::iovec {
    libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }
}

/// Plain frame buffers to assemble into without processing: the receiver's own ceiling.
///
/// Frames are opened in a ring of `slots` buffers and released as soon as they end, so the
/// measurement is the receive path alone (parsing, placement, bookkeeping).
pub struct FrameBuffers {
    packet_bytes: usize,
    packets: u64,
    // Raw blocks: their bytes are written by the kernel through the places handed out.
    _pool: Pool,
    buffers: Vec<Block>,
    present: Vec<Vec<bool>>,
    received: Vec<u64>,
    free: Vec<usize>,
}

/// A frame open in [`FrameBuffers`].
#[derive(Debug)]
pub struct BufferFrame {
    slot: usize,
    frame_id: u64,
}

impl FrameBuffers {
    /// `slots` buffers of `packets` packets of `packet_bytes` bytes.
    pub fn new(slots: usize, packets: u64, packet_bytes: usize) -> Result<Self, PoolError> {
        let mut pool = Pool::host("ingest-only", packets * packet_bytes as u64, slots)?;
        let buffers = std::iter::from_fn(|| pool.take()).collect();
        Ok(Self {
            packet_bytes,
            packets,
            _pool: pool,
            buffers,
            present: vec![vec![false; packets as usize]; slots],
            received: vec![0; slots],
            free: (0..slots).rev().collect(),
        })
    }
}

impl Assembly for FrameBuffers {
    type Frame = BufferFrame;

    fn try_begin(&mut self, frame_id: u64) -> Result<BufferFrame, BeginError> {
        let slot = self.free.pop().ok_or(BeginError::NoFreeSlot)?;
        self.present[slot].fill(false);
        self.received[slot] = 0;
        Ok(BufferFrame { slot, frame_id })
    }
    fn id(frame: &BufferFrame) -> u64 {
        frame.frame_id
    }
    fn place(&self, frame: &BufferFrame, index: u64) -> Option<*mut u8> {
        if *self.present[frame.slot].get(index as usize)? {
            return None;
        }
        // SAFETY: index < packets, so the offset is inside the block.
        Some(unsafe {
            self.buffers[frame.slot]
                .ptr
                .add(index as usize * self.packet_bytes)
        })
    }
    fn done(&mut self, frame: &BufferFrame, index: u64) -> PacketStatus {
        match self.present[frame.slot].get_mut(index as usize) {
            None => PacketStatus::OutOfRange,
            Some(true) => PacketStatus::Duplicate,
            Some(p) => {
                *p = true;
                self.received[frame.slot] += 1;
                PacketStatus::Accepted
            }
        }
    }
    fn received(&self, frame: &BufferFrame) -> u64 {
        self.received[frame.slot]
    }
    fn finish(&mut self, frame: BufferFrame) -> bool {
        self.free.push(frame.slot);
        self.received[frame.slot] == self.packets
    }
    fn stopping(&self) -> bool {
        false
    }
}

//! An open-loop, paced UDP sender of frames as packets (docs/architecture.md).
//!
//! [`send`] turns prepared frames — each the bytes of one frame's row-major ci16 source
//! tensor — into one [`wire`](crate::wire) packet per row and sends them to a destination on
//! a schedule fixed in advance:
//!
//! - **Open loop.** The sender never waits for, or hears from, the receiver: the socket is
//!   unconnected, so even a closed port reports nothing back. A receiver that cannot keep up
//!   shows as loss or latency on its side, never as a slower sender.
//! - **Paced by deadlines.** Every packet has a deadline on `CLOCK_MONOTONIC` computed from its
//!   position in the run alone ([`Pacing`]). The sender sleeps until [`SPIN_BEFORE`] ahead of
//!   the next deadline, then spins to it; it never sends a packet before its deadline. A packet
//!   already late is sent at once, with every other packet that is due, and the worst lateness
//!   is reported ([`SendReport::max_lag`]); nothing is skipped to catch up.
//! - **Batched.** All due packets (up to [`BATCH_PACKETS`]) go out in one `sendmmsg`, so high
//!   rates do not cost a system call per packet. Headers are written into buffers allocated
//!   once; payloads are gathered straight from the prepared frames (no copy, no allocation per
//!   packet).
//! - **Fresh ids.** Frame `i` of the run carries wire id `first_frame_id + i` (wrapping) and the
//!   payload of prepared frame `i % frames.len()`, so a run longer than the prepared scene still
//!   has distinct, consecutive ids.
//! - **Faults on request.** [`Faults`] drops, duplicates, reverses or corrupts chosen packets,
//!   keyed by the frame's index in the run, so a receiver's accounting can be tested exactly.
//! - **Comparable times.** [`SendReport::frame_starts`] records when each frame's first and
//!   last packet went out on `CLOCK_MONOTONIC` ([`monotonic_ns`]), the clock a receiver on the
//!   same machine reads.
//!
//! The send loop is here; `cursor` walks the packets in send order with their faults,
//! `pacing` waits for each deadline, `batch` holds one `sendmmsg`'s buffers, and `faults`
//! says which packets to get wrong (read from the command line's `FRAME:PACKET` forms).

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

mod batch;
mod cursor;
mod faults;
mod pacing;

use crate::wire::{HEADER_BYTES, WireShape};
use batch::Batch;
use cursor::Cursor;
pub use faults::{FaultParseError, Faults, MalformedAt, MalformedTwice, PacketAt};
use pacing::{involuntary_switches, precise_sleeps, wait_until};

/// Most packets handed to one `sendmmsg`.
pub const BATCH_PACKETS: usize = 64;

/// How long before a deadline the sender stops sleeping and spins: more than the scheduler's
/// usual wake-up latency, so a sleep rarely overshoots a deadline.
pub const SPIN_BEFORE: Duration = Duration::from_micros(200);

/// The socket send buffer requested, in bytes. Linux grants `SO_SNDBUFFORCE` to a privileged
/// process; otherwise `SO_SNDBUF` is capped by `net.core.wmem_max`. The report gives what was
/// granted.
pub const SEND_BUFFER_BYTES: usize = 8 << 20;

/// The pacing tick unless a caller says otherwise, in microseconds: the sender sleeps between
/// wake-ups, and packets leave up to about 50 us late (the radar's packet slot at 1024 samples).
pub const DEFAULT_TICK_US: u64 = 50;

pub use crate::wire::MAX_DATAGRAM_BYTES;

/// The longest single sleep, so that the stop flag is seen within this much.
const MAX_SLEEP: Duration = Duration::from_millis(10);

/// Entries reserved up front in [`SendReport::frame_starts`] at most; longer runs grow it.
const MAX_RESERVED_FRAMES: u64 = 1 << 20;

/// What to send, where, how fast and how wrongly.
#[derive(Clone, Debug)]
pub struct SenderConfig {
    /// The receiver's address.
    pub dest: SocketAddr,
    /// The frame's wire shape: elements per packet and packets per frame.
    pub shape: WireShape,
    /// When each packet is due.
    pub pacing: Pacing,
    /// How long the run is.
    pub frames: FrameCount,
    /// The wire id of the run's first frame; later frames count up from it, wrapping.
    pub first_frame_id: u32,
    /// Packets to drop, duplicate, reorder or corrupt.
    pub faults: Faults,
    /// Zero: sleep, then spin to each deadline (packets go out on time, at the cost of a core
    /// when they are tens of microseconds apart). Otherwise: never spin; wake at most every
    /// `tick` and send what is due, so packets leave up to about `tick` late, never early, and
    /// the sender mostly sleeps.
    pub tick: Duration,
}

/// When each packet is due, relative to the start of the run. A frame's packets occupy `M`
/// consecutive time slots (a dropped packet leaves its slot empty; a duplicate shares its
/// original's slot).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pacing {
    /// Slot `k` of frame `f` is due at `(f * M + k) * interval`.
    PacketInterval(Duration),
    /// Frames per second: frame `f` starts at `f / rate` and its `M` slots are spread evenly
    /// over its period (the same as `PacketInterval(1 / (rate * M))`).
    FrameRate(f64),
    /// Every packet is due at once: as fast as the socket takes them.
    Burst,
}

/// How many frames a run sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameCount {
    /// Exactly this many.
    Frames(u64),
    /// Every frame that starts within this long: paced, every frame whose first slot is due
    /// before it (a deterministic count); in a burst, every frame begun before it has passed.
    Duration(Duration),
}

/// When one frame's packets went out, as `CLOCK_MONOTONIC` nanoseconds ([`monotonic_ns`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameTimes {
    /// The frame's wire id.
    pub frame_id: u32,
    /// Just before the system call that sent the frame's first packet.
    pub first_ns: u64,
    /// Just after the system call that sent the frame's last packet returned.
    pub last_ns: u64,
}

/// What a run sent and how well it kept its schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SendReport {
    /// Frames all of whose packets were sent (a frame cut short by the stop flag is not
    /// counted, though its packets are).
    pub frames: u64,
    /// Datagrams sent, duplicates and malformed ones included.
    pub packets: u64,
    /// Bytes of those datagrams (headers and payloads; not IP or UDP headers).
    pub bytes: u64,
    /// From the start of the schedule to the return of the last send.
    pub elapsed: Duration,
    /// The worst lateness of a packet against its deadline (zero for [`Pacing::Burst`]).
    pub max_lag: Duration,
    /// The longest a sleep of the pacing loop ran past what it asked for: how long the
    /// sender was kept from running (descheduled), whether or not a packet was due.
    pub max_oversleep: Duration,
    /// Involuntary context switches of the sending thread during the run (it was runnable
    /// and preempted), from `getrusage(RUSAGE_THREAD)`; 0 where that is unavailable.
    pub involuntary_switches: u64,
    /// Send times of every frame that sent at least one packet, in order.
    pub frame_starts: Vec<FrameTimes>,
    /// The start of the schedule (deadline 0), as `CLOCK_MONOTONIC` nanoseconds.
    pub start_ns: u64,
    /// The socket send buffer the kernel granted, in bytes.
    pub send_buffer: usize,
    /// `sendmmsg` calls made.
    pub syscalls: u64,
    /// True when the stop flag ended the run with packets still to send.
    pub stopped: bool,
}

impl SendReport {
    /// Frames per second achieved.
    pub fn frames_per_s(&self) -> f64 {
        self.frames as f64 / self.elapsed.as_secs_f64().max(f64::MIN_POSITIVE)
    }

    /// Gigabits per second of datagram bytes achieved.
    pub fn gbit_per_s(&self) -> f64 {
        self.bytes as f64 * 8.0 / 1e9 / self.elapsed.as_secs_f64().max(f64::MIN_POSITIVE)
    }
}

impl SendReport {
    /// One line saying what was sent to `dest` and how well the schedule was kept.
    pub fn summary(&self, dest: std::net::SocketAddr) -> String {
        format!(
            "sent {} frames, {} packets, {:.1} MB to {dest} in {:.3} s: {:.1} frames/s, {:.3} Gbit/s, \
             max lag {:.1} us, longest oversleep {:.1} us, {} involuntary switches, {} sendmmsg calls, \
             send buffer {} KiB{}",
            self.frames,
            self.packets,
            self.bytes as f64 / 1e6,
            self.elapsed.as_secs_f64(),
            self.frames_per_s(),
            self.gbit_per_s(),
            self.max_lag.as_secs_f64() * 1e6,
            self.max_oversleep.as_secs_f64() * 1e6,
            self.involuntary_switches,
            self.syscalls,
            self.send_buffer / 1024,
            if self.stopped { ", stopped early" } else { "" }
        )
    }

    /// Writes every frame's send times as CSV, `frame_id,first_ns,last_ns` after a header line:
    /// what `kplace send --times FILE` writes.
    pub fn write_times(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        writeln!(out, "frame_id,first_ns,last_ns")?;
        for t in &self.frame_starts {
            writeln!(out, "{},{},{}", t.frame_id, t.first_ns, t.last_ns)?;
        }
        Ok(())
    }
}

impl std::fmt::Display for Pacing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Pacing::PacketInterval(d) => {
                write!(f, "a packet every {:.3} us", d.as_secs_f64() * 1e6)
            }
            Pacing::FrameRate(rate) => write!(f, "{rate} frames/s"),
            Pacing::Burst => f.write_str("burst"),
        }
    }
}

impl std::fmt::Display for FrameCount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameCount::Frames(n) => write!(f, "{n} frames"),
            FrameCount::Duration(d) => write!(f, "for {:.3} s", d.as_secs_f64()),
        }
    }
}

/// Why a run could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// There are no prepared frames.
    #[error("the sender needs at least one prepared frame")]
    NoFrames,
    /// The shape has a zero dimension.
    #[error("invalid wire shape {elements}x{packets}: both dimensions must be at least 1")]
    Shape {
        /// Elements per packet.
        elements: u32,
        /// Packets per frame.
        packets: u32,
    },
    /// A packet would not fit in one UDP datagram.
    #[error(
        "a packet of {bytes} bytes exceeds the largest UDP datagram ({MAX_DATAGRAM_BYTES} bytes)"
    )]
    PacketTooLarge {
        /// Header and payload bytes.
        bytes: usize,
    },
    /// A prepared frame is not one frame of the shape.
    #[error("prepared frame {index} has {len} bytes, but a frame of the wire shape has {expected}")]
    FrameSize {
        /// Which prepared frame.
        index: usize,
        /// Its length.
        len: usize,
        /// `elements * packets * element_bytes`.
        expected: usize,
    },
    /// The frame rate is not a positive finite number.
    #[error("invalid frame rate {0}: must be finite and greater than 0")]
    Rate(f64),
    /// A fault names a packet the frames do not have.
    #[error("{fault} fault on frame {frame} packet {packet}: frames have packets 0..{packets}")]
    FaultOutOfRange {
        /// Which kind of fault.
        fault: &'static str,
        /// The frame index.
        frame: u64,
        /// The packet index.
        packet: u32,
        /// Packets per frame.
        packets: u32,
    },
    /// The destination's port is 0.
    #[error("destination {0} has port 0")]
    DestPort(SocketAddr),
    /// No UDP socket could be made.
    #[error("cannot bind a UDP socket on {addr}")]
    Bind {
        /// The local address tried.
        addr: SocketAddr,
        /// The system's reason.
        #[source]
        source: io::Error,
    },
    /// The send buffer could not be sized.
    #[error("cannot set the socket's send buffer")]
    SendBuffer(#[source] io::Error),
    /// A send failed.
    #[error("sending to {dest} failed after {packets} packets")]
    Send {
        /// The destination.
        dest: SocketAddr,
        /// Packets sent before the failure.
        packets: u64,
        /// The system's reason.
        #[source]
        source: io::Error,
    },
}

/// Now on `CLOCK_MONOTONIC`, in nanoseconds: the clock of [`FrameTimes`], which any process on
/// the same machine can read to compare.
pub fn monotonic_ns() -> u64 {
    // CLOCK_MONOTONIC always exists on Linux: the call can fail only for a bad clock id.
    let ts = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .unwrap_or_else(|_| nix::sys::time::TimeSpec::new(0, 0));
    u64::try_from(ts.tv_sec()).unwrap_or(0) * 1_000_000_000
        + u64::try_from(ts.tv_nsec()).unwrap_or(0)
}

/// Sends `frames` (each a prepared frame's row-major payload bytes) to `config.dest` on
/// `config`'s schedule until the run's frames are sent or `stop` is set (checked before every
/// batch and at least every 10 ms while waiting).
///
/// Returns the report of what was sent, also when stopped early; fails before sending
/// anything for an invalid configuration or socket, and mid-run only when the system refuses a
/// send.
pub fn send(
    frames: &[Vec<u8>],
    config: &SenderConfig,
    stop: &AtomicBool,
) -> Result<SendReport, SendError> {
    let clock = validate(frames, config)?;
    let (socket, send_buffer) = open_socket(config.dest)?;
    precise_sleeps();
    let dest = nix::sys::socket::SockaddrStorage::from(config.dest);
    let mut batch = Batch::new();
    let mut cursor = Cursor::new(frames, config, clock);
    let reserve = match (config.frames, clock) {
        (FrameCount::Frames(n), _) => n,
        (FrameCount::Duration(d), Clock::Interval { slot_ns }) => {
            let period_ns = slot_ns * f64::from(config.shape.packets);
            (d.as_nanos() as f64 / period_ns.max(1.0)) as u64 + 1
        }
        (FrameCount::Duration(_), Clock::Burst) => 1 << 16,
    };
    let mut report = SendReport {
        frames: 0,
        packets: 0,
        bytes: 0,
        elapsed: Duration::ZERO,
        max_lag: Duration::ZERO,
        max_oversleep: Duration::ZERO,
        involuntary_switches: 0,
        frame_starts: Vec::with_capacity(reserve.min(MAX_RESERVED_FRAMES) as usize),
        start_ns: 0,
        send_buffer,
        syscalls: 0,
        stopped: false,
    };
    let mut last_frame = None;
    let switches_before = involuntary_switches();
    let start = monotonic_ns();
    report.start_ns = start;
    let mut end = start;

    loop {
        if stop.load(Ordering::Relaxed) {
            report.stopped = true;
            break;
        }
        let Some(next) = cursor.peek(monotonic_ns().saturating_sub(start)) else {
            break;
        };
        if matches!(clock, Clock::Interval { .. })
            && !wait_until(
                start + next.offset_ns,
                config.tick,
                stop,
                &mut report.max_oversleep,
            )
        {
            report.stopped = true;
            break;
        }
        let due = monotonic_ns().saturating_sub(start);
        batch.clear();
        while !batch.is_full() {
            match cursor.peek(due) {
                Some(p) if p.offset_ns <= due => {
                    batch.push(&p);
                    cursor.advance();
                }
                _ => break,
            }
        }
        let sent = batch.send(socket.as_raw_fd(), &dest, |before, after, entries| {
            if let Some(first) = entries.first() {
                let lag = before.saturating_sub(start + first.offset_ns);
                report.max_lag = report.max_lag.max(Duration::from_nanos(lag));
            }
            report.syscalls += 1;
            for e in entries {
                report.packets += 1;
                report.bytes += (HEADER_BYTES + e.payload.len()) as u64;
                match report.frame_starts.last_mut() {
                    Some(t) if last_frame == Some(e.frame) => t.last_ns = after,
                    _ => {
                        last_frame = Some(e.frame);
                        report.frame_starts.push(FrameTimes {
                            frame_id: e.frame_id,
                            first_ns: before,
                            last_ns: after,
                        });
                    }
                }
            }
            end = after;
        });
        if let Err(source) = sent {
            return Err(SendError::Send {
                dest: config.dest,
                packets: report.packets,
                source,
            });
        }
    }
    if matches!(config.pacing, Pacing::Burst) {
        report.max_lag = Duration::ZERO;
    }
    // Bring the cursor to the next packet it would send, so that a frame whose remaining
    // packets were all dropped counts as sent.
    let more = cursor.peek(end.saturating_sub(start)).is_some();
    report.stopped &= more;
    report.frames = cursor.frames_done();
    report.elapsed = Duration::from_nanos(end.saturating_sub(start));
    report.involuntary_switches = involuntary_switches().saturating_sub(switches_before);
    Ok(report)
}

/// The schedule: a packet's deadline from its slot's index in the run.
#[derive(Clone, Copy, Debug)]
enum Clock {
    /// Everything due at once.
    Burst,
    /// Slot `i` due at `i * slot_ns` after the start.
    Interval { slot_ns: f64 },
}

impl Clock {
    fn offset_ns(self, slot: u64) -> u64 {
        match self {
            Clock::Burst => 0,
            // f64 holds the product exactly below 2^53 ns (104 days); `as` saturates.
            Clock::Interval { slot_ns } => (slot as f64 * slot_ns) as u64,
        }
    }
}

impl SenderConfig {
    /// Checks everything [`send`] checks except the prepared frames: a nonzero shape whose
    /// packets fit a UDP datagram, a destination port, a valid rate, and faults naming packets
    /// the frames have. Lets a caller refuse a bad configuration before preparing frames.
    pub fn check(&self) -> Result<(), SendError> {
        self.clock().map(drop)
    }

    /// Checks the configuration; returns the schedule.
    fn clock(&self) -> Result<Clock, SendError> {
        let shape = self.shape;
        if shape.elements == 0 || shape.packets == 0 || shape.element_bytes == 0 {
            return Err(SendError::Shape {
                elements: shape.elements,
                packets: shape.packets,
            });
        }
        if shape.packet_bytes() > MAX_DATAGRAM_BYTES {
            return Err(SendError::PacketTooLarge {
                bytes: shape.packet_bytes(),
            });
        }
        if self.dest.port() == 0 {
            return Err(SendError::DestPort(self.dest));
        }
        let faults = &self.faults;
        let packet_faults = faults
            .drop
            .iter()
            .map(|k| ("drop", *k))
            .chain(faults.duplicate.iter().map(|k| ("duplicate", *k)))
            .chain(faults.malformed.keys().map(|k| ("malformed", *k)));
        for (fault, (frame, packet)) in packet_faults {
            if packet >= shape.packets {
                return Err(SendError::FaultOutOfRange {
                    fault,
                    frame,
                    packet,
                    packets: shape.packets,
                });
            }
        }
        Ok(match self.pacing {
            Pacing::Burst => Clock::Burst,
            Pacing::PacketInterval(interval) => Clock::Interval {
                slot_ns: interval.as_nanos() as f64,
            },
            Pacing::FrameRate(rate) => {
                if !(rate.is_finite() && rate > 0.0) {
                    return Err(SendError::Rate(rate));
                }
                Clock::Interval {
                    slot_ns: 1e9 / rate / f64::from(shape.packets),
                }
            }
        })
    }
}

/// Checks the configuration and the frames against it; returns the schedule.
fn validate(frames: &[Vec<u8>], config: &SenderConfig) -> Result<Clock, SendError> {
    let clock = config.clock()?;
    if frames.is_empty() {
        return Err(SendError::NoFrames);
    }
    let expected = config.shape.frame_bytes();
    if let Some(index) = frames.iter().position(|f| f.len() != expected) {
        return Err(SendError::FrameSize {
            index,
            len: frames[index].len(),
            expected,
        });
    }
    Ok(clock)
}

/// Binds an unconnected UDP socket of the destination's family and sizes its send buffer;
/// returns it with the send buffer granted.
fn open_socket(dest: SocketAddr) -> Result<(UdpSocket, usize), SendError> {
    let local: SocketAddr = match dest {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let socket = UdpSocket::bind(local).map_err(|source| SendError::Bind {
        addr: local,
        source,
    })?;
    let granted = crate::udp::socket::set_send_buffer(&socket, SEND_BUFFER_BYTES)
        .map_err(SendError::SendBuffer)?;
    Ok((socket, granted))
}

#[cfg(test)]
mod tests;

//! An open-loop, paced UDP sender of chirp packets (docs/architecture.md).
//!
//! [`send`] turns prepared frames — each the bytes of one frame's chirp-major ci16 source
//! tensor — into one [`wire`](crate::net::wire) packet per chirp and sends them to a destination on
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
//! Long (908 lines of code, 177 of tests): the schedule, the batching with `sendmmsg`, the
//! fault injection and the report share the send loop's state.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::mem;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::net::wire::{ChirpHeader, HEADER_BYTES, Malformed, WireShape};

/// Most packets handed to one `sendmmsg`.
pub const BATCH_PACKETS: usize = 64;

/// How long before a deadline the sender stops sleeping and spins: more than the scheduler's
/// usual wake-up latency, so a sleep rarely overshoots a deadline.
pub const SPIN_BEFORE: Duration = Duration::from_micros(200);

/// The socket send buffer requested, in bytes. Linux grants `SO_SNDBUFFORCE` to a privileged
/// process; otherwise `SO_SNDBUF` is capped by `net.core.wmem_max`. The report gives what was
/// granted.
pub const SEND_BUFFER_BYTES: usize = 8 << 20;

pub use crate::net::wire::MAX_DATAGRAM_BYTES;

/// The longest single sleep, so that the stop flag is seen within this much.
const MAX_SLEEP: Duration = Duration::from_millis(10);

/// Entries reserved up front in [`SendReport::frame_starts`] at most; longer runs grow it.
const MAX_RESERVED_FRAMES: u64 = 1 << 20;

/// What to send, where, how fast and how wrongly.
#[derive(Clone, Debug)]
pub struct SenderConfig {
    /// The receiver's address.
    pub dest: SocketAddr,
    /// The CPI: payload size of each packet and chirps per frame.
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
/// consecutive time slots (a dropped chirp leaves its slot empty; a duplicate shares its
/// original's slot).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pacing {
    /// Slot `k` of frame `f` is due at `(f * M + k) * interval`.
    ChirpInterval(Duration),
    /// Frames per second: frame `f` starts at `f / rate` and its `M` slots are spread evenly
    /// over its period (the same as `ChirpInterval(1 / (rate * M))`).
    CpiRate(f64),
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

/// Faults to inject, keyed by the frame's index in the run (0-based, not its wire id) and the
/// chirp index. A dropped chirp is neither duplicated nor corrupted; a duplicated, corrupted
/// chirp is sent corrupted twice.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// Chirps not sent.
    pub drop: BTreeSet<(u64, u32)>,
    /// Chirps sent twice, back to back in their slot.
    pub duplicate: BTreeSet<(u64, u32)>,
    /// Frames whose chirps are sent in reverse order (chirp `M-1` in the first slot).
    pub reorder: BTreeSet<u64>,
    /// Chirps sent malformed in the given way instead of correctly (see
    /// [`Malformed::corrupt`]).
    pub malformed: BTreeMap<(u64, u32), Malformed>,
}

impl Faults {
    /// True when no fault is configured.
    pub fn is_empty(&self) -> bool {
        self.drop.is_empty()
            && self.duplicate.is_empty()
            && self.reorder.is_empty()
            && self.malformed.is_empty()
    }

    /// True when a chirp-level fault names frame `frame`.
    fn touch(&self, frame: u64) -> bool {
        let chirps = (frame, 0)..=(frame, u32::MAX);
        self.drop.range(chirps.clone()).next().is_some()
            || self.duplicate.range(chirps.clone()).next().is_some()
            || self.malformed.range(chirps).next().is_some()
    }
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
    pub fn cpi_per_s(&self) -> f64 {
        self.frames as f64 / self.elapsed.as_secs_f64().max(f64::MIN_POSITIVE)
    }

    /// Gigabits per second of datagram bytes achieved.
    pub fn gbit_per_s(&self) -> f64 {
        self.bytes as f64 * 8.0 / 1e9 / self.elapsed.as_secs_f64().max(f64::MIN_POSITIVE)
    }
}

/// Why a run could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// There are no prepared frames.
    #[error("the sender needs at least one prepared frame")]
    NoFrames,
    /// The shape has a zero dimension.
    #[error("invalid wire shape {samples}x{chirps}: both dimensions must be at least 1")]
    Shape {
        /// Samples per chirp.
        samples: u32,
        /// Chirps per frame.
        chirps: u32,
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
        /// `samples * chirps * 4`.
        expected: usize,
    },
    /// The CPI rate is not a positive finite number.
    #[error("invalid CPI rate {0}: must be finite and greater than 0")]
    Rate(f64),
    /// A fault names a chirp the frames do not have.
    #[error("{fault} fault on frame {frame} chirp {chirp}: frames have chirps 0..{chirps}")]
    FaultOutOfRange {
        /// Which kind of fault.
        fault: &'static str,
        /// The frame index.
        frame: u64,
        /// The chirp index.
        chirp: u32,
        /// Chirps per frame.
        chirps: u32,
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

/// Sends `frames` (each a prepared frame's chirp-major payload bytes) to `config.dest` on
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
    let dest = RawAddr::new(config.dest);
    let mut batch = Batch::new();
    let mut cursor = Cursor::new(frames, config, clock);
    let reserve = match (config.frames, clock) {
        (FrameCount::Frames(n), _) => n,
        (FrameCount::Duration(d), Clock::Interval { slot_ns }) => {
            let period_ns = slot_ns * f64::from(config.shape.chirps);
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
    // chirps were all dropped counts as sent.
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
    /// packets fit a UDP datagram, a destination port, a valid rate, and faults naming chirps
    /// the frames have. Lets a caller refuse a bad configuration before preparing frames.
    pub fn check(&self) -> Result<(), SendError> {
        self.clock().map(drop)
    }

    /// Checks the configuration; returns the schedule.
    fn clock(&self) -> Result<Clock, SendError> {
        let shape = self.shape;
        if shape.samples == 0 || shape.chirps == 0 {
            return Err(SendError::Shape {
                samples: shape.samples,
                chirps: shape.chirps,
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
        let chirp_faults = faults
            .drop
            .iter()
            .map(|k| ("drop", *k))
            .chain(faults.duplicate.iter().map(|k| ("duplicate", *k)))
            .chain(faults.malformed.keys().map(|k| ("malformed", *k)));
        for (fault, (frame, chirp)) in chirp_faults {
            if chirp >= shape.chirps {
                return Err(SendError::FaultOutOfRange {
                    fault,
                    frame,
                    chirp,
                    chirps: shape.chirps,
                });
            }
        }
        Ok(match self.pacing {
            Pacing::Burst => Clock::Burst,
            Pacing::ChirpInterval(interval) => Clock::Interval {
                slot_ns: interval.as_nanos() as f64,
            },
            Pacing::CpiRate(rate) => {
                if !(rate.is_finite() && rate > 0.0) {
                    return Err(SendError::Rate(rate));
                }
                Clock::Interval {
                    slot_ns: 1e9 / rate / f64::from(shape.chirps),
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
    let granted = crate::net::udp::socket::set_send_buffer(&socket, SEND_BUFFER_BYTES)
        .map_err(SendError::SendBuffer)?;
    Ok((socket, granted))
}

/// The timer slack the pacing thread asks for: Linux lets a sleep of a normal thread end up
/// to 50 us late by default, half a tick at the ticks bisect-rate uses.
const TIMER_SLACK: Duration = Duration::from_micros(1);

/// Asks Linux to end this thread's sleeps within [`TIMER_SLACK`] of their deadline. A refusal
/// costs only accuracy, so it is ignored.
fn precise_sleeps() {
    let _ = nix::sys::prctl::set_timerslack(TIMER_SLACK.as_nanos() as libc::c_ulong);
}

/// Involuntary context switches of the calling thread so far; 0 where unavailable.
fn involuntary_switches() -> u64 {
    use nix::sys::resource::{UsageWho, getrusage};
    getrusage(UsageWho::RUSAGE_THREAD).map_or(0, |usage| {
        u64::try_from(usage.involuntary_context_switches()).unwrap_or(0)
    })
}

/// Sleeps until [`SPIN_BEFORE`] ahead of `deadline_ns`, then spins to it; with a non-zero
/// `tick`, sleeps at least `tick` at a time and never spins. Raises `oversleep` to the longest
/// any sleep ran past its request. False when `stop` was set.
fn wait_until(
    deadline_ns: u64,
    tick: Duration,
    stop: &AtomicBool,
    oversleep: &mut Duration,
) -> bool {
    let spin_ns = if tick.is_zero() {
        SPIN_BEFORE.as_nanos() as u64
    } else {
        0
    };
    loop {
        let now = monotonic_ns();
        if now >= deadline_ns {
            return true;
        }
        let left = deadline_ns - now;
        if left > spin_ns {
            if stop.load(Ordering::Relaxed) {
                return false;
            }
            let nap = Duration::from_nanos(left - spin_ns)
                .max(tick)
                .min(MAX_SLEEP);
            std::thread::sleep(nap);
            let slept = Duration::from_nanos(monotonic_ns().saturating_sub(now));
            *oversleep = (*oversleep).max(slept.saturating_sub(nap));
        } else {
            std::hint::spin_loop();
        }
    }
}

/// The destination as a C socket address, for `msg_name`.
struct RawAddr {
    storage: libc::sockaddr_storage,
    len: libc::socklen_t,
}

impl RawAddr {
    fn new(addr: SocketAddr) -> RawAddr {
        // SAFETY: sockaddr_storage is plain old data; all zeroes is a valid value.
        let mut storage: libc::sockaddr_storage = unsafe { mem::zeroed() };
        let len = match addr {
            SocketAddr::V4(a) => {
                // SAFETY: plain old data, as above.
                let mut sin: libc::sockaddr_in = unsafe { mem::zeroed() };
                sin.sin_family = libc::AF_INET as libc::sa_family_t;
                sin.sin_port = a.port().to_be();
                sin.sin_addr.s_addr = u32::from_ne_bytes(a.ip().octets());
                // SAFETY: sockaddr_storage is large and aligned enough for any socket address;
                // the write stays within `storage`.
                unsafe { (&raw mut storage).cast::<libc::sockaddr_in>().write(sin) };
                mem::size_of::<libc::sockaddr_in>()
            }
            SocketAddr::V6(a) => {
                // SAFETY: plain old data, as above.
                let mut sin6: libc::sockaddr_in6 = unsafe { mem::zeroed() };
                sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
                sin6.sin6_port = a.port().to_be();
                sin6.sin6_flowinfo = a.flowinfo();
                sin6.sin6_addr.s6_addr = a.ip().octets();
                sin6.sin6_scope_id = a.scope_id();
                // SAFETY: as for the IPv4 address.
                unsafe { (&raw mut storage).cast::<libc::sockaddr_in6>().write(sin6) };
                mem::size_of::<libc::sockaddr_in6>()
            }
        };
        RawAddr {
            storage,
            len: len as libc::socklen_t,
        }
    }
}

/// One packet planned by the cursor.
#[derive(Clone, Copy, Debug)]
struct Planned<'a> {
    /// The frame's index in the run.
    frame: u64,
    /// Its deadline after the start.
    offset_ns: u64,
    header: ChirpHeader,
    /// The payload to send (shorter than a chirp for a wrong-size packet).
    payload: &'a [u8],
}

/// Walks the run's packets in send order: frames in order, slots in order, each slot's chirp
/// (reversed for a reordered frame), dropped ones skipped, duplicates twice.
struct Cursor<'a> {
    frames: &'a [Vec<u8>],
    config: &'a SenderConfig,
    clock: Clock,
    /// The frame of the next packet.
    frame: u64,
    /// Its slot within the frame; `chirps` once the frame's last slot was sent.
    slot: u32,
    /// The chirp in that slot (valid after `peek` returned a packet).
    chirp: u32,
    /// The next packet is the second copy of a duplicated chirp.
    copy: bool,
    /// `frame` passed its start check and its flags below are set.
    begun: bool,
    /// The run is over; stays over.
    ended: bool,
    /// A chirp-level fault names this frame (skip the lookups when not).
    faulty: bool,
    /// This frame is sent in reverse chirp order.
    reversed: bool,
}

impl<'a> Cursor<'a> {
    fn new(frames: &'a [Vec<u8>], config: &'a SenderConfig, clock: Clock) -> Self {
        Cursor {
            frames,
            config,
            clock,
            frame: 0,
            slot: 0,
            chirp: 0,
            copy: false,
            begun: false,
            ended: false,
            faulty: false,
            reversed: false,
        }
    }

    fn chirps(&self) -> u32 {
        self.config.shape.chirps
    }

    /// Whether the run ends before `self.frame`, `elapsed_ns` after its start.
    fn run_over(&self, elapsed_ns: u64) -> bool {
        match self.config.frames {
            FrameCount::Frames(n) => self.frame >= n,
            FrameCount::Duration(d) => {
                let limit = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
                match self.clock {
                    Clock::Burst => elapsed_ns >= limit,
                    Clock::Interval { .. } => self.first_slot_offset() >= limit,
                }
            }
        }
    }

    fn first_slot_offset(&self) -> u64 {
        self.clock
            .offset_ns(self.frame.saturating_mul(u64::from(self.chirps())))
    }

    /// The next packet, without consuming it (`elapsed_ns` decides a burst's duration); `None`
    /// once the run is over. Repeated calls return the same packet.
    fn peek(&mut self, elapsed_ns: u64) -> Option<Planned<'a>> {
        let chirps = self.chirps();
        let faults = &self.config.faults;
        loop {
            if self.ended {
                return None;
            }
            if self.slot == chirps {
                self.frame += 1;
                self.slot = 0;
                self.begun = false;
            }
            if !self.begun {
                if self.run_over(elapsed_ns) {
                    self.ended = true;
                    return None;
                }
                self.begun = true;
                self.faulty = faults.touch(self.frame);
                self.reversed = faults.reorder.contains(&self.frame);
            }
            self.chirp = if self.reversed {
                chirps - 1 - self.slot
            } else {
                self.slot
            };
            if self.faulty && faults.drop.contains(&(self.frame, self.chirp)) {
                self.slot += 1;
                continue;
            }
            return Some(self.plan());
        }
    }

    fn plan(&self) -> Planned<'a> {
        let shape = self.config.shape;
        let frames: &'a [Vec<u8>] = self.frames;
        let prepared = &frames[(self.frame % frames.len() as u64) as usize];
        let size = shape.payload_bytes();
        let at = self.chirp as usize * size;
        let mut payload = &prepared[at..at + size];
        let mut header = ChirpHeader {
            // Wire ids wrap: the frame index modulo 2^32 is exactly what `as` keeps.
            frame_id: self.config.first_frame_id.wrapping_add(self.frame as u32),
            chirp_id: self.chirp,
            channel_id: 0,
            n_samples: shape.samples,
        };
        if self.faulty
            && let Some(kind) = self.config.faults.malformed.get(&(self.frame, self.chirp))
        {
            let (bad, len) = kind.corrupt(header, shape);
            header = bad;
            payload = &payload[..len.min(size)];
        }
        let slot = self
            .frame
            .saturating_mul(u64::from(shape.chirps))
            .saturating_add(u64::from(self.slot));
        Planned {
            frame: self.frame,
            offset_ns: self.clock.offset_ns(slot),
            header,
            payload,
        }
    }

    /// Consumes the packet `peek` returned.
    fn advance(&mut self) {
        let faults = &self.config.faults;
        if !self.copy && self.faulty && faults.duplicate.contains(&(self.frame, self.chirp)) {
            self.copy = true;
        } else {
            self.copy = false;
            self.slot += 1;
        }
    }

    /// Frames all of whose packets were consumed, once `peek` has brought the cursor to the
    /// next packet.
    fn frames_done(&self) -> u64 {
        if self.slot == self.chirps() {
            self.frame + 1
        } else {
            self.frame
        }
    }
}

/// What the report needs of a sent packet.
#[derive(Clone, Copy, Debug)]
struct Entry<'a> {
    frame: u64,
    frame_id: u32,
    offset_ns: u64,
    payload: &'a [u8],
}

/// Up to [`BATCH_PACKETS`] packets and the `sendmmsg` arguments describing them, all allocated
/// once: each message gathers its header from `headers` and its payload from the prepared
/// frame.
struct Batch<'a> {
    headers: Box<[[u8; HEADER_BYTES]]>,
    iovecs: Box<[[libc::iovec; 2]]>,
    messages: Box<[libc::mmsghdr]>,
    entries: Vec<Entry<'a>>,
}

impl<'a> Batch<'a> {
    fn new() -> Self {
        let empty = libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        };
        Batch {
            headers: vec![[0; HEADER_BYTES]; BATCH_PACKETS].into_boxed_slice(),
            iovecs: vec![[empty; 2]; BATCH_PACKETS].into_boxed_slice(),
            messages: (0..BATCH_PACKETS)
                // SAFETY: mmsghdr is plain old data (pointers, lengths, flags); all zeroes is a
                // valid, empty message.
                .map(|_| unsafe { mem::zeroed::<libc::mmsghdr>() })
                .collect(),
            entries: Vec::with_capacity(BATCH_PACKETS),
        }
    }

    fn clear(&mut self) {
        self.entries.clear();
    }

    fn is_full(&self) -> bool {
        self.entries.len() == BATCH_PACKETS
    }

    fn push(&mut self, p: &Planned<'a>) {
        let i = self.entries.len();
        p.header.write_to(&mut self.headers[i]);
        self.entries.push(Entry {
            frame: p.frame,
            frame_id: p.header.frame_id,
            offset_ns: p.offset_ns,
            payload: p.payload,
        });
    }

    /// Sends every packet of the batch to `dest`, in order, in as few `sendmmsg` calls as the
    /// kernel allows. After each call, `sent(before_ns, after_ns, entries)` is told which
    /// packets it sent and when. Interrupted calls are retried.
    fn send(
        &mut self,
        fd: RawFd,
        dest: &RawAddr,
        mut sent: impl FnMut(u64, u64, &[Entry<'a>]),
    ) -> io::Result<()> {
        let n = self.entries.len();
        // Every pointer below is taken from these base pointers, after the last write through
        // a reference, so none is invalidated before the kernel reads it.
        let headers = self.headers.as_mut_ptr();
        let iovecs = self.iovecs.as_mut_ptr();
        let messages = self.messages.as_mut_ptr();
        for (i, entry) in self.entries.iter().enumerate() {
            // SAFETY: i < n <= BATCH_PACKETS, the length of all three arrays, so every `add`
            // stays in bounds. The iovecs point at this batch's header and at the payload,
            // which `'a` keeps alive for the call; the kernel only reads through them
            // (`cast_mut` is for the C type only). `msg_name` points at `dest`, alive for the
            // call and only read.
            unsafe {
                let iov = &mut *iovecs.add(i);
                iov[0] = libc::iovec {
                    iov_base: headers.add(i).cast(),
                    iov_len: HEADER_BYTES,
                };
                iov[1] = libc::iovec {
                    iov_base: entry.payload.as_ptr().cast_mut().cast(),
                    iov_len: entry.payload.len(),
                };
                let m = &mut *messages.add(i);
                m.msg_hdr.msg_name = (&raw const dest.storage).cast_mut().cast();
                m.msg_hdr.msg_namelen = dest.len;
                m.msg_hdr.msg_iov = iov.as_mut_ptr();
                m.msg_hdr.msg_iovlen = 2;
                m.msg_len = 0;
            }
        }
        let mut done = 0;
        while done < n {
            let before = monotonic_ns();
            // SAFETY: messages[done..n] are initialised above and point only at memory alive
            // for this call; `n - done <= BATCH_PACKETS` fits a c_uint.
            let r =
                unsafe { libc::sendmmsg(fd, messages.add(done), (n - done) as libc::c_uint, 0) };
            let after = monotonic_ns();
            if r < 0 {
                let err = io::Error::last_os_error();
                match err.kind() {
                    io::ErrorKind::Interrupted => continue,
                    // Not expected on a blocking UDP socket; wait a little rather than fail.
                    io::ErrorKind::WouldBlock => {
                        std::thread::yield_now();
                        continue;
                    }
                    _ => return Err(err),
                }
            }
            let count = (r as usize).min(n - done);
            sent(before, after, &self.entries[done..done + count]);
            done += count;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(chirps: u32, frames: FrameCount, pacing: Pacing, faults: Faults) -> SenderConfig {
        SenderConfig {
            dest: "127.0.0.1:9".parse().expect("address"),
            shape: WireShape { samples: 2, chirps },
            pacing,
            frames,
            first_frame_id: u32::MAX - 1,
            faults,
            tick: Duration::ZERO,
        }
    }

    fn walk<'a>(frames: &'a [Vec<u8>], config: &'a SenderConfig) -> (Vec<Planned<'a>>, u64) {
        let clock = validate(frames, config).expect("valid");
        let mut cursor = Cursor::new(frames, config, clock);
        let mut out = Vec::new();
        while let Some(p) = cursor.peek(0) {
            assert_eq!(cursor.peek(0).map(|q| q.header), Some(p.header));
            out.push(p);
            cursor.advance();
        }
        (out, cursor.frames_done())
    }

    fn frames(count: u8, chirps: u32) -> Vec<Vec<u8>> {
        (0..count).map(|f| vec![f; 8 * chirps as usize]).collect()
    }

    #[test]
    fn plain_run_wraps_ids_and_cycles_frames() {
        let c = config(3, FrameCount::Frames(4), Pacing::Burst, Faults::default());
        let prepared = frames(2, 3);
        let (packets, done) = walk(&prepared, &c);
        assert_eq!(done, 4);
        assert_eq!(packets.len(), 12);
        let ids: Vec<(u32, u32)> = packets
            .iter()
            .map(|p| (p.header.frame_id, p.header.chirp_id))
            .collect();
        assert_eq!(
            ids[..4],
            [
                (u32::MAX - 1, 0),
                (u32::MAX - 1, 1),
                (u32::MAX - 1, 2),
                (u32::MAX, 0)
            ]
        );
        assert_eq!(ids[6..8], [(0, 0), (0, 1)]);
        assert_eq!(packets[9].payload, &[1u8; 8][..]);
        assert!(packets.iter().all(|p| p.offset_ns == 0));
    }

    #[test]
    fn faults_shape_the_packet_sequence() {
        let mut faults = Faults::default();
        faults.drop.insert((0, 1));
        faults.duplicate.insert((0, 2));
        faults.reorder.insert(1);
        faults.malformed.insert((1, 0), Malformed::WrongSize);
        faults.duplicate.insert((1, 0));
        // Every chirp of frame 2 dropped: the frame sends nothing but still counts.
        for k in 0..3 {
            faults.drop.insert((2, k));
        }
        let c = config(
            3,
            FrameCount::Frames(4),
            Pacing::ChirpInterval(Duration::from_nanos(10)),
            faults,
        );
        let prepared = frames(1, 3);
        let (packets, done) = walk(&prepared, &c);
        assert_eq!(done, 4);
        let seq: Vec<(u64, u32, u64, usize)> = packets
            .iter()
            .map(|p| (p.frame, p.header.chirp_id, p.offset_ns, p.payload.len()))
            .collect();
        assert_eq!(
            seq,
            [
                (0, 0, 0, 8),
                (0, 2, 20, 8),
                (0, 2, 20, 8),
                (1, 2, 30, 8),
                (1, 1, 40, 8),
                (1, 0, 50, 4),
                (1, 0, 50, 4),
                (3, 0, 90, 8),
                (3, 1, 100, 8),
                (3, 2, 110, 8),
            ]
        );
    }

    #[test]
    fn paced_duration_counts_frames_starting_within_it() {
        let c = config(
            4,
            FrameCount::Duration(Duration::from_millis(5)),
            Pacing::CpiRate(1000.0),
            Faults::default(),
        );
        let prepared = frames(1, 4);
        let (packets, done) = walk(&prepared, &c);
        assert_eq!(done, 5);
        assert_eq!(packets.len(), 20);
        assert_eq!(packets[5].offset_ns, 1_250_000);
    }

    #[test]
    fn invalid_configurations_are_refused() {
        let f = frames(1, 3);
        let mut c = config(
            3,
            FrameCount::Frames(1),
            Pacing::CpiRate(0.0),
            Faults::default(),
        );
        assert!(matches!(validate(&f, &c), Err(SendError::Rate(_))));
        c.pacing = Pacing::Burst;
        assert!(matches!(validate(&[], &c), Err(SendError::NoFrames)));
        assert!(matches!(
            validate(&frames(1, 2), &c),
            Err(SendError::FrameSize { expected: 24, .. })
        ));
        c.faults.duplicate.insert((5, 3));
        assert!(matches!(
            validate(&f, &c),
            Err(SendError::FaultOutOfRange {
                fault: "duplicate",
                chirp: 3,
                ..
            })
        ));
        c.faults = Faults::default();
        c.shape.samples = 20_000;
        assert!(matches!(
            validate(&f, &c),
            Err(SendError::PacketTooLarge { .. })
        ));
        c.shape.samples = 0;
        assert!(matches!(validate(&f, &c), Err(SendError::Shape { .. })));
        c.shape.samples = 2;
        c.dest.set_port(0);
        assert!(matches!(validate(&f, &c), Err(SendError::DestPort(_))));
    }

    #[test]
    fn the_pacing_thread_asks_for_precise_sleeps() {
        std::thread::spawn(|| {
            let slack = || nix::sys::prctl::get_timerslack().expect("PR_GET_TIMERSLACK") as u128;
            precise_sleeps();
            assert_eq!(slack(), TIMER_SLACK.as_nanos());
        })
        .join()
        .expect("the check ran");
    }

    #[test]
    fn raw_address_matches_the_socket_address() {
        let a = RawAddr::new("127.0.0.1:4660".parse().expect("v4"));
        assert_eq!(a.len as usize, mem::size_of::<libc::sockaddr_in>());
        // SAFETY: RawAddr::new wrote a sockaddr_in for an IPv4 address.
        let sin = unsafe { *(&raw const a.storage).cast::<libc::sockaddr_in>() };
        assert_eq!(sin.sin_port, 4660u16.to_be());
        assert_eq!(sin.sin_addr.s_addr.to_ne_bytes(), [127, 0, 0, 1]);
        let b = RawAddr::new("[::1]:80".parse().expect("v6"));
        assert_eq!(b.len as usize, mem::size_of::<libc::sockaddr_in6>());
    }
}

//! Which well-formed packets may build frames: the source filter and lock, the frame window,
//! and following a sender that restarts. Pure bookkeeping over `(source, frame, packet)`: no
//! sockets, no buffers, no clock.
//!
//! Guarantees:
//! - Only one source feeds the stream at a time (the *lock*): packets of every other source
//!   are [`Admit::Foreign`], so packets of two senders are never assembled into one frame.
//!   The first (allowed) sender to open a frame holds the lock *provisionally*; it is
//!   *confirmed* once that sender has stored [`StreamState::corroboration`] packets (a frame's
//!   worth, the evidence a restart needs). Until then another sender whose packets make such
//!   a run in order takes the lock over. (The receiver opens a stream's first frame only with
//!   a frame's worth of its source's packets held, so its lock is confirmed as it is taken,
//!   or for frames of one packet by the second, and a few early packets of a stray socket
//!   take nothing.) A confirmed lock never moves without an allow list; with one, another
//!   allowed source takes it over only with the same evidence, sent while the stream's own
//!   source is silent (a sender restarted on a new port).
//! - A packet may open a frame only within the window ahead of the newest frame
//!   ([`StreamState::window`] frames); one outside it is [`Admit::OutOfWindow`] and moves
//!   nothing. A sender that really jumped (restarted far ahead, or came back after a long
//!   loss) is followed once [`StreamState::corroboration`] of its packets arrive in order;
//!   the frames it skipped are counted in [`StreamState::missed_frames`].
//! - Frames behind the newest one that are not open are [`Admit::Late`]: a frame is delivered
//!   at most once, so a sender restarted far behind resumes when it reaches frames not yet
//!   seen.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::str::FromStr;

/// Distinct foreign sources listed by address; packets of further ones are only counted.
pub const FOREIGN_LISTED: usize = 16;

/// Why an `--allow-from` rule names no address.
#[derive(Debug, thiserror::Error)]
pub enum AllowFromError {
    /// The port is not one.
    #[error("{text:?}: the port {port:?} is not a number 0-65535")]
    Port {
        /// The rule.
        text: String,
        /// Its port.
        port: String,
    },
    /// Not an address, and no name the resolver knows.
    #[error("{text:?}: not an address, and the name does not resolve: {error}")]
    Unresolved {
        /// The rule.
        text: String,
        /// The resolver's error.
        error: std::io::Error,
    },
    /// A name that resolves to nothing.
    #[error("{0:?}: the name resolves to no address")]
    NoAddress(String),
}

/// An allowed source: an address, with or without a port (`--allow-from ADDR[:PORT]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllowFrom {
    /// The address.
    pub ip: IpAddr,
    /// The port; `None`: any.
    pub port: Option<u16>,
}

impl AllowFrom {
    /// Whether `source` matches.
    pub fn matches(&self, source: SocketAddr) -> bool {
        canonical(source.ip()) == canonical(self.ip) && self.port.is_none_or(|p| p == source.port())
    }

    /// Every rule `text` names: `ADDR`, `ADDR:PORT`, `[V6]:PORT`, or a host name (each of its
    /// addresses).
    pub fn parse(text: &str) -> Result<Vec<AllowFrom>, AllowFromError> {
        if let Ok(addr) = SocketAddr::from_str(text) {
            return Ok(vec![AllowFrom {
                ip: addr.ip(),
                port: Some(addr.port()),
            }]);
        }
        let bare = text.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = IpAddr::from_str(bare) {
            return Ok(vec![AllowFrom { ip, port: None }]);
        }
        let (host, port) = match text.rsplit_once(':') {
            Some((host, port)) if !host.contains(':') => {
                let port = port.parse::<u16>().map_err(|_| AllowFromError::Port {
                    text: text.to_string(),
                    port: port.to_string(),
                })?;
                (host, Some(port))
            }
            _ => (text, None),
        };
        let addrs: Vec<SocketAddr> = (host, port.unwrap_or(0))
            .to_socket_addrs()
            .map_err(|error| AllowFromError::Unresolved {
                text: text.to_string(),
                error,
            })?
            .collect();
        if addrs.is_empty() {
            return Err(AllowFromError::NoAddress(text.to_string()));
        }
        Ok(addrs
            .into_iter()
            .map(|a| AllowFrom { ip: a.ip(), port })
            .collect())
    }
}

impl std::fmt::Display for AllowFrom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.port {
            Some(port) => write!(f, "{}", SocketAddr::new(self.ip, port)),
            None => write!(f, "{}", self.ip),
        }
    }
}

/// IPv4-mapped IPv6 addresses compare as their IPv4 address.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// What a well-formed packet of a frame that is not open may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admit {
    /// From the stream's source (or, before the lock, an allowed one), within the window: it
    /// may open its frame.
    Open,
    /// From a source other than the lock, or not allowed.
    Foreign,
    /// Its frame is further ahead than the window.
    OutOfWindow,
    /// Its frame is behind the newest frame and not open: ended, passed over, or dropped.
    Late,
}

/// A run of packets of one source, each of the same frame as the one before (another packet:
/// packets may come reordered) or of the next, that may prove a stream the window refuses.
#[derive(Clone, Copy, Debug)]
struct Candidate {
    source: SocketAddr,
    frame: u64,
    packet: u32,
    count: u64,
}

/// The lock, window and restart detector of one receiver.
#[derive(Debug)]
pub struct StreamState {
    allow: Vec<AllowFrom>,
    lock: Option<SocketAddr>,
    /// Packets the lock's source stored since it took the lock: the lock is confirmed at
    /// `corroboration`.
    evidence: u64,
    /// The head and missed frames when the lock was taken, restored when a provisional lock
    /// is taken over (its frames were never the stream's).
    before_lock: (u64, u64),
    /// The source the lock was last taken from.
    pub replaced: Option<SocketAddr>,
    /// One past the newest frame opened: the window is `head .. head + window`.
    head: u64,
    window: u64,
    corroboration: u64,
    candidate: Option<Candidate>,
    /// Frames the stream passed over without one of their packets being stored.
    pub missed_frames: u64,
    /// Times the stream was followed to a new position or a new source.
    pub restarts: u64,
    /// Foreign sources by address, with their packets (the first [`FOREIGN_LISTED`]).
    pub foreign_sources: Vec<(SocketAddr, u64)>,
}

impl StreamState {
    /// A stream accepting `allow` (empty: any first sender), opening frames up to `window`
    /// ahead, following a jump after `corroboration` packets in order.
    pub fn new(allow: Vec<AllowFrom>, window: u64, corroboration: u64) -> Self {
        Self {
            allow,
            lock: None,
            evidence: 0,
            before_lock: (0, 0),
            replaced: None,
            head: 0,
            window: window.max(1),
            corroboration: corroboration.max(1),
            candidate: None,
            missed_frames: 0,
            restarts: 0,
            foreign_sources: Vec::new(),
        }
    }

    /// Frames ahead of the newest one a packet may open.
    pub fn window(&self) -> u64 {
        self.window
    }

    /// Packets in order that make a jump or a new source believed.
    pub fn corroboration(&self) -> u64 {
        self.corroboration
    }

    /// The source the stream is locked to.
    pub fn lock(&self) -> Option<SocketAddr> {
        self.lock
    }

    /// Whether the lock is confirmed: its source stored a frame's worth of packets in order
    /// (or proved a takeover with as many).
    pub fn confirmed(&self) -> bool {
        self.lock.is_some() && self.evidence >= self.corroboration
    }

    /// Packets the lock's source stored since it took the lock, up to the count that
    /// confirms it.
    pub fn evidence(&self) -> u64 {
        self.evidence.min(self.corroboration)
    }

    /// One past the newest frame opened.
    pub fn head(&self) -> u64 {
        self.head
    }

    fn allowed(&self, source: SocketAddr) -> bool {
        self.allow.is_empty() || self.allow.iter().any(|a| a.matches(source))
    }

    /// Whether `source` may feed frames now: the lock, or before the lock an allowed source.
    pub fn is_stream_source(&self, source: SocketAddr) -> bool {
        match self.lock {
            Some(lock) => lock == source,
            None => self.allowed(source),
        }
    }

    /// Judges a packet of `frame` from `source` whose frame is not open; `None` means the
    /// packet corroborated a jump or a new source, and the stream now follows it: the caller
    /// ends its open frames (they are the old stream's) and asks again.
    pub fn admit(&mut self, source: SocketAddr, frame: u64, packet: u32) -> Option<Admit> {
        if !self.is_stream_source(source) {
            self.count_foreign(source);
            // A provisional lock gives way to any allowed source with the evidence; a
            // confirmed one only to a source the user allowed by name.
            let may_take_over =
                self.allowed(source) && (!self.allow.is_empty() || !self.confirmed());
            if may_take_over && self.corroborates(source, frame, packet) {
                self.follow(source, frame);
                return None;
            }
            return Some(Admit::Foreign);
        }
        if frame >= self.head.saturating_add(self.window) {
            if self.corroborates(source, frame, packet) {
                self.follow(source, frame);
                return None;
            }
            return Some(Admit::OutOfWindow);
        }
        if frame < self.head {
            return Some(Admit::Late);
        }
        Some(Admit::Open)
    }

    /// Records that `frame` opened from `source` with `packets` stored: the lock is taken
    /// (provisionally, if it was free), the head moves.
    pub fn opened(&mut self, source: SocketAddr, frame: u64, packets: u64) {
        if self.lock.is_none() {
            self.lock = Some(source);
            self.evidence = 0;
            self.before_lock = (self.head, self.missed_frames);
        }
        self.evidence = self.evidence.saturating_add(packets);
        if frame >= self.head {
            self.missed_frames += frame - self.head;
            self.head = frame + 1;
        }
        self.candidate = None;
    }

    /// Records that the stream's source stored a packet in an open frame: it is alive, so no
    /// run of other packets can prove a restart yet, and its lock gains evidence.
    pub fn delivered(&mut self) {
        self.candidate = None;
        self.evidence = self.evidence.saturating_add(1);
    }

    /// Whether the packet extends the candidate run to the corroboration count.
    fn corroborates(&mut self, source: SocketAddr, frame: u64, packet: u32) -> bool {
        let extends = self.candidate.is_some_and(|c| {
            c.source == source && ((frame == c.frame && packet != c.packet) || frame == c.frame + 1)
        });
        let count = match self.candidate {
            Some(c) if extends => c.count + 1,
            // A repeat of the last packet (a duplicate) neither extends nor breaks the run.
            Some(c) if c.source == source && c.frame == frame && c.packet == packet => c.count,
            _ => 1,
        };
        self.candidate = Some(Candidate {
            source,
            frame,
            packet,
            count,
        });
        count >= self.corroboration
    }

    fn follow(&mut self, source: SocketAddr, frame: u64) {
        if self.lock != Some(source) {
            if !self.confirmed() {
                // The provisional lock's frames were never the stream's: the stream starts
                // where its real source is.
                (self.head, self.missed_frames) = self.before_lock;
            }
            self.replaced = self.lock;
            self.before_lock = (self.head, self.missed_frames);
        }
        self.lock = Some(source);
        // The run of packets that proved it is the new lock's evidence.
        self.evidence = self.corroboration;
        self.restarts += 1;
        self.candidate = None;
        if frame >= self.head {
            self.missed_frames += frame - self.head;
            self.head = frame;
        }
    }

    fn count_foreign(&mut self, source: SocketAddr) {
        if let Some(entry) = self.foreign_sources.iter_mut().find(|(a, _)| *a == source) {
            entry.1 += 1;
        } else if self.foreign_sources.len() < FOREIGN_LISTED {
            self.foreign_sources.push((source, 1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    fn allow_rules_parse_addresses_ports_and_names() {
        assert_eq!(
            AllowFrom::parse("10.0.0.1").unwrap(),
            vec![AllowFrom {
                ip: "10.0.0.1".parse().unwrap(),
                port: None
            }]
        );
        assert_eq!(
            AllowFrom::parse("10.0.0.1:5000").unwrap(),
            vec![AllowFrom {
                ip: "10.0.0.1".parse().unwrap(),
                port: Some(5000)
            }]
        );
        assert_eq!(AllowFrom::parse("[::1]:7").unwrap()[0].port, Some(7));
        assert_eq!(AllowFrom::parse("::1").unwrap()[0].port, None);
        let local = AllowFrom::parse("localhost:9").unwrap();
        assert!(
            local
                .iter()
                .all(|a| a.port == Some(9) && a.ip.is_loopback()),
            "{local:?}"
        );
        assert!(
            AllowFrom::parse("10.0.0.1:99999")
                .unwrap_err()
                .to_string()
                .contains("port")
        );
        assert!(AllowFrom::parse("no.such.host.invalid").is_err());
        let any_port = AllowFrom {
            ip: "127.0.0.1".parse().unwrap(),
            port: None,
        };
        assert!(any_port.matches(addr(1)) && any_port.matches(addr(2)));
        assert!(
            any_port.matches("[::ffff:127.0.0.1]:4".parse().unwrap()),
            "v4-mapped"
        );
        assert!(
            !AllowFrom {
                ip: "127.0.0.1".parse().unwrap(),
                port: Some(1)
            }
            .matches(addr(2))
        );
    }

    #[test]
    fn the_first_sender_to_open_a_frame_takes_the_lock_for_good_once_confirmed() {
        let mut s = StreamState::new(Vec::new(), 8, 4);
        assert_eq!(s.admit(addr(1), 0, 0), Some(Admit::Open));
        assert_eq!(
            s.admit(addr(2), 0, 0),
            Some(Admit::Open),
            "no lock before a frame opens"
        );
        s.opened(addr(1), 0, 2);
        assert_eq!(
            (s.lock(), s.confirmed(), s.evidence()),
            (Some(addr(1)), false, 2)
        );
        s.delivered();
        s.delivered();
        assert!(
            s.confirmed(),
            "a frame's worth of packets confirms the lock"
        );
        // Another sender never takes a confirmed lock without an allow list, however orderly.
        for packet in 0..100 {
            assert_eq!(s.admit(addr(2), 1, packet), Some(Admit::Foreign));
        }
        assert_eq!((s.lock(), s.replaced), (Some(addr(1)), None));
        assert_eq!(s.foreign_sources, vec![(addr(2), 102 - 2)]);
    }

    #[test]
    fn a_few_early_packets_lock_only_until_a_real_stream_proves_itself() {
        let mut s = StreamState::new(Vec::new(), 8, 4);
        // Two packets of a stray socket, naming a frame far from the real stream's.
        s.opened(addr(7), 5, 2);
        assert_eq!((s.head(), s.missed_frames), (6, 5));
        // The real sender starts at frame 0: foreign while the stray holds the lock, then
        // followed on the fourth packet in order.
        for packet in 0..3 {
            assert_eq!(s.admit(addr(1), 0, packet), Some(Admit::Foreign));
        }
        assert_eq!(s.admit(addr(1), 0, 3), None);
        assert_eq!(
            (s.lock(), s.replaced, s.confirmed()),
            (Some(addr(1)), Some(addr(7)), true)
        );
        // The stray's frames were never the stream's: the stream starts at frame 0 with none
        // missed.
        assert_eq!((s.head(), s.missed_frames, s.restarts), (0, 0, 1));
        assert_eq!(s.admit(addr(1), 0, 4), Some(Admit::Open));
        // Confirmed now: the stray cannot take it back, however orderly.
        for packet in 0..10 {
            assert_eq!(s.admit(addr(7), 1, packet), Some(Admit::Foreign));
        }
        assert_eq!(s.lock(), Some(addr(1)));
    }

    #[test]
    fn a_provisional_lock_whose_sender_keeps_sending_is_not_taken_over() {
        let mut s = StreamState::new(Vec::new(), 8, 4);
        s.opened(addr(1), 0, 2);
        // Interleaved: the stream's own packets reset the other's run each time.
        for packet in 0..20 {
            assert_eq!(s.admit(addr(2), 0, packet), Some(Admit::Foreign));
            s.delivered();
        }
        assert_eq!((s.lock(), s.restarts), (Some(addr(1)), 0));
    }

    #[test]
    fn a_packet_beyond_the_window_moves_nothing() {
        let mut s = StreamState::new(Vec::new(), 8, 4);
        s.opened(addr(1), 0, 4);
        assert_eq!(s.admit(addr(1), 19, 0), Some(Admit::OutOfWindow));
        assert_eq!(
            s.admit(addr(1), 8, 3),
            Some(Admit::Open),
            "head 1 + window 8 > 8"
        );
        assert_eq!(s.admit(addr(1), 9, 3), Some(Admit::OutOfWindow));
        assert_eq!((s.head(), s.missed_frames, s.restarts), (1, 0, 0));
        assert_eq!(s.admit(addr(1), 1, 0), Some(Admit::Open));
    }

    #[test]
    fn a_jump_is_followed_once_corroborated_and_its_gap_counted() {
        let mut s = StreamState::new(Vec::new(), 8, 4);
        s.opened(addr(1), 0, 4);
        for packet in 0..3 {
            assert_eq!(s.admit(addr(1), 500, packet), Some(Admit::OutOfWindow));
        }
        assert_eq!(
            s.admit(addr(1), 500, 3),
            None,
            "the fourth in order is believed"
        );
        assert_eq!((s.head(), s.missed_frames, s.restarts), (500, 499, 1));
        assert_eq!(s.admit(addr(1), 500, 4), Some(Admit::Open));
    }

    #[test]
    fn strays_out_of_order_or_interleaved_with_the_stream_never_corroborate() {
        let mut s = StreamState::new(Vec::new(), 8, 4);
        s.opened(addr(1), 0, 4);
        for i in 0..100u32 {
            // Far-off ids in no order.
            assert_eq!(
                s.admit(addr(1), 1000 + u64::from(i % 7) * 3, i % 5),
                Some(Admit::OutOfWindow)
            );
            // A live stream resets any run.
            if i % 3 == 0 {
                s.delivered();
            }
        }
        assert_eq!((s.head(), s.restarts), (1, 0));
    }

    #[test]
    fn an_allowed_sender_on_a_new_port_takes_over_once_corroborated() {
        let allow = AllowFrom::parse("127.0.0.1").unwrap();
        let mut s = StreamState::new(allow, 8, 4);
        assert_eq!(s.admit(addr(9), 0, 0), Some(Admit::Open));
        s.opened(addr(9), 0, 4);
        let stranger: SocketAddr = "127.0.0.2:9".parse().unwrap();
        for packet in 0..10 {
            assert_eq!(
                s.admit(stranger, 1, packet),
                Some(Admit::Foreign),
                "not allowed"
            );
        }
        for packet in 0..3 {
            assert_eq!(s.admit(addr(10), 0, packet), Some(Admit::Foreign));
        }
        assert_eq!(s.admit(addr(10), 0, 3), None);
        assert_eq!(s.lock(), Some(addr(10)));
        assert_eq!(
            s.admit(addr(9), 1, 0),
            Some(Admit::Foreign),
            "the old port is now foreign"
        );
        assert_eq!(s.admit(addr(10), 1, 0), Some(Admit::Open));
    }

    #[test]
    fn a_source_outside_the_allow_list_never_opens_a_frame() {
        let mut s = StreamState::new(AllowFrom::parse("127.0.0.1:5").unwrap(), 8, 4);
        assert_eq!(s.admit(addr(6), 0, 0), Some(Admit::Foreign));
        assert_eq!(s.admit(addr(5), 0, 0), Some(Admit::Open));
    }
}

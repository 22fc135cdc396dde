//! What the endpoint's threads share: its limits, the flag that stops them, the counts of
//! what became of every connection, and the throttles that keep each kind of warning to one
//! every [`WARN_EVERY`] however fast its cause repeats (a flood must not flood the log).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::Limits;
use crate::run::EndpointCounts;

/// The least time between two warnings of one kind; those in between are counted and the
/// next warning says how many there were.
pub(super) const WARN_EVERY: Duration = Duration::from_secs(10);

/// What became of one accepted connection: each ends in exactly one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    /// `GET` or `HEAD /metrics`, answered whole.
    Scrape,
    /// Answered 400, 404 or 405.
    OtherRequest,
    /// Closed unserved: no free handler, or the endpoint stopping.
    Refused,
    /// The request, or the writing of its answer, ran past the deadline.
    TimedOut,
    /// The request's head was over the limit.
    Oversized,
    /// The client closed or broke the connection first.
    HungUp,
}

/// The endpoint's state, shared by its acceptor and its handlers.
pub(super) struct Shared {
    /// The limits it serves under.
    pub(super) limits: Limits,
    stop: AtomicBool,
    counts: Counters,
    /// Warns of connections refused for want of a handler.
    pub(super) busy: Throttle,
    /// Warns of requests cut for time.
    pub(super) slow: Throttle,
    /// Warns of requests refused for size.
    pub(super) oversized: Throttle,
}

impl Shared {
    pub(super) fn new(limits: Limits) -> Shared {
        Shared {
            limits,
            stop: AtomicBool::new(false),
            counts: Counters::default(),
            busy: Throttle::default(),
            slow: Throttle::default(),
            oversized: Throttle::default(),
        }
    }

    /// Tells every thread to stop.
    pub(super) fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// Whether the endpoint is stopping.
    pub(super) fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Counts a connection accepted.
    pub(super) fn accepted(&self) {
        self.counts.connections.fetch_add(1, Ordering::SeqCst);
    }

    /// Counts a failed accept.
    pub(super) fn accept_failed(&self) {
        self.counts.accept_errors.fetch_add(1, Ordering::SeqCst);
    }

    /// Counts what became of a connection.
    pub(super) fn ended(&self, outcome: Outcome) {
        let c = &self.counts;
        let counter = match outcome {
            Outcome::Scrape => &c.scrapes,
            Outcome::OtherRequest => &c.other_requests,
            Outcome::Refused => &c.refused,
            Outcome::TimedOut => &c.timed_out,
            Outcome::Oversized => &c.oversized,
            Outcome::HungUp => &c.hung_up,
        };
        counter.fetch_add(1, Ordering::SeqCst);
    }

    /// The counts so far.
    pub(super) fn counts(&self) -> EndpointCounts {
        let c = &self.counts;
        let get = |a: &AtomicU64| a.load(Ordering::SeqCst);
        EndpointCounts {
            connections: get(&c.connections),
            scrapes: get(&c.scrapes),
            other_requests: get(&c.other_requests),
            refused: get(&c.refused),
            timed_out: get(&c.timed_out),
            oversized: get(&c.oversized),
            hung_up: get(&c.hung_up),
            accept_errors: get(&c.accept_errors),
        }
    }
}

/// [`EndpointCounts`] as the threads count them.
#[derive(Default)]
struct Counters {
    connections: AtomicU64,
    scrapes: AtomicU64,
    other_requests: AtomicU64,
    refused: AtomicU64,
    timed_out: AtomicU64,
    oversized: AtomicU64,
    hung_up: AtomicU64,
    accept_errors: AtomicU64,
}

/// One kind of warning, given at most once every [`WARN_EVERY`].
#[derive(Default)]
pub(super) struct Throttle {
    last: Mutex<Option<Instant>>,
    quiet: AtomicU64,
}

impl Throttle {
    /// Calls `warn` with the times this kind was noted without a warning since the last one,
    /// if this is the first or the last was [`WARN_EVERY`] ago; else counts it.
    pub(super) fn note(&self, warn: impl FnOnce(Since)) {
        let now = Instant::now();
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if last.is_some_and(|t| now.duration_since(t) < WARN_EVERY) {
            self.quiet.fetch_add(1, Ordering::Relaxed);
            return;
        }
        *last = Some(now);
        warn(Since(self.quiet.swap(0, Ordering::Relaxed)));
    }
}

/// Times a kind of warning was noted and not given since the last one given: shown as
/// ` (N more since the last warning)`, or nothing for none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Since(pub(super) u64);

impl std::fmt::Display for Since {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            0 => Ok(()),
            n => write!(f, " ({n} more since the last warning)"),
        }
    }
}

//! A handler thread: takes accepted connections from the endpoint's queue and answers one
//! request on each, under the limits. The request's head is read into a buffer of the limit's
//! size and never further; the whole exchange, reading the head and writing the answer, has
//! one deadline; every blocking read or write waits at most [`SLICE`], so a stopping endpoint
//! is heard within it.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam::channel::Receiver;

use super::http::{self, Answer, Request};
use super::state::{Outcome, Shared};
use crate::openmetrics::Board;

/// The longest a handler blocks on a socket before it looks at the deadline and the stop flag.
const SLICE: Duration = Duration::from_millis(100);

/// Answers the connections `queue` delivers until the acceptor is gone and the queue empty.
pub(super) fn serve(queue: &Receiver<TcpStream>, shared: &Shared, board: &Arc<Board>) {
    let mut head = vec![0; shared.limits.head_bytes];
    while let Ok(stream) = queue.recv() {
        let outcome = if shared.stopping() {
            refuse(&stream);
            Outcome::Refused
        } else {
            answer(&stream, &mut head, shared, board)
        };
        shared.ended(outcome);
        let limits = &shared.limits;
        match outcome {
            Outcome::TimedOut => shared.slow.note(|since| {
                tracing::warn!(
                    "kplace run: metrics endpoint: cut a request not read and answered within \
                     {:?}{since}",
                    limits.deadline
                );
            }),
            Outcome::Oversized => shared.oversized.note(|since| {
                tracing::warn!(
                    "kplace run: metrics endpoint: refused a request whose head was over {} \
                     bytes{since}",
                    limits.head_bytes
                );
            }),
            _ => {}
        }
    }
}

/// Closes a connection unserved, with a 503 if its socket takes one without waiting.
pub(super) fn refuse(stream: &TcpStream) {
    say_and_go(stream, &Answer::busy());
}

/// Why a connection ended before its answer was written.
enum Cut {
    /// The deadline passed.
    Time,
    /// The endpoint is stopping.
    Stop,
    /// The client closed it, or an I/O error broke it.
    Gone,
}

/// Reads one request on `stream` into `head` and answers it.
fn answer(stream: &TcpStream, head: &mut [u8], shared: &Shared, board: &Board) -> Outcome {
    let deadline = Instant::now() + shared.limits.deadline;
    if stream.set_nonblocking(false).is_err() {
        return Outcome::HungUp;
    }
    let (answer, outcome) = match read_head(stream, head, deadline, shared) {
        Ok(Some(end)) => match http::parse(&head[..end]) {
            Request::Metrics { head_only } => {
                (Answer::metrics(board.render(), head_only), Outcome::Scrape)
            }
            Request::NotFound { head_only } => {
                (Answer::not_found(head_only), Outcome::OtherRequest)
            }
            Request::MethodNotAllowed => (Answer::method_not_allowed(), Outcome::OtherRequest),
            Request::Bad(why) => (Answer::bad(why), Outcome::OtherRequest),
        },
        Ok(None) => (
            Answer::too_large(shared.limits.head_bytes),
            Outcome::Oversized,
        ),
        Err(Cut::Time) => {
            // A client that sends nothing may still read: tell it why, if it takes it now.
            say_and_go(stream, &Answer::timed_out(shared.limits.deadline));
            return Outcome::TimedOut;
        }
        Err(Cut::Stop) => return Outcome::Refused,
        Err(Cut::Gone) => return Outcome::HungUp,
    };
    tracing::debug!("kplace run: metrics endpoint: answered {}", answer.status());
    match write_all(stream, &answer.bytes(), deadline, shared) {
        Ok(()) => {
            let _ = stream.shutdown(Shutdown::Write);
            outcome
        }
        Err(Cut::Time) => Outcome::TimedOut,
        Err(Cut::Stop) => Outcome::Refused,
        Err(Cut::Gone) => Outcome::HungUp,
    }
}

/// Writes `answer` to `stream` if its socket takes it without waiting, and goes.
fn say_and_go(stream: &TcpStream, answer: &Answer) {
    let _ = stream.set_nonblocking(true);
    let mut stream = stream;
    let _ = stream.write(&answer.bytes());
}

/// Reads a request's head into `head`: where it ends, or `None` when `head` filled up before
/// it did (the rest is never read).
fn read_head(
    mut stream: &TcpStream,
    head: &mut [u8],
    deadline: Instant,
    shared: &Shared,
) -> Result<Option<usize>, Cut> {
    let mut filled = 0;
    loop {
        if filled == head.len() {
            return Ok(None);
        }
        wait_slice(deadline, shared, |slice| {
            stream.set_read_timeout(Some(slice))
        })?;
        match stream.read(&mut head[filled..]) {
            Ok(0) => return Err(Cut::Gone),
            Ok(n) => {
                let from = filled.saturating_sub(3);
                filled += n;
                if let Some(end) = http::head_end(&head[..filled], from) {
                    return Ok(Some(end));
                }
            }
            Err(e) if retry(e.kind()) => {}
            Err(_) => return Err(Cut::Gone),
        }
    }
}

/// Writes all of `bytes` to `stream` by `deadline`.
fn write_all(
    mut stream: &TcpStream,
    bytes: &[u8],
    deadline: Instant,
    shared: &Shared,
) -> Result<(), Cut> {
    let mut written = 0;
    while written < bytes.len() {
        wait_slice(deadline, shared, |slice| {
            stream.set_write_timeout(Some(slice))
        })?;
        match stream.write(&bytes[written..]) {
            Ok(0) => return Err(Cut::Gone),
            Ok(n) => written += n,
            Err(e) if retry(e.kind()) => {}
            Err(_) => return Err(Cut::Gone),
        }
    }
    Ok(())
}

/// Before each blocking call: the endpoint stopping or the deadline passed end the exchange;
/// otherwise the call may wait the time left, at most a [`SLICE`], which `set` sets.
fn wait_slice(
    deadline: Instant,
    shared: &Shared,
    set: impl FnOnce(Duration) -> std::io::Result<()>,
) -> Result<(), Cut> {
    if shared.stopping() {
        return Err(Cut::Stop);
    }
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(Cut::Time);
    }
    // A zero timeout would mean none; `left` is not zero here.
    set(left.min(SLICE)).map_err(|_| Cut::Gone)
}

/// Whether a read or write that failed this way is tried again (its time ran out, or a signal
/// came).
fn retry(kind: ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
    )
}

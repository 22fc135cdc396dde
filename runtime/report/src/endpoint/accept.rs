//! The acceptor thread: waits (`poll`) on the non-blocking listener and on the wake pipe the
//! server closes to stop it, accepts every pending connection, and hands each to the handlers'
//! bounded queue; when the queue is full the connection is answered 503, if its socket takes
//! it at once, and closed: never held, never given a thread. An accept that fails is counted
//! and warned of (once per kind every [`super::state::WARN_EVERY`]); one that a shortage
//! caused (file descriptors, memory) makes it back off [`BACKOFF`] before trying again, and
//! no error ends it: it stops only when the server stops.

use std::io::{ErrorKind, PipeReader};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Duration;

use crossbeam::channel::{Sender, TrySendError};
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use super::handler;
use super::state::{Outcome, Shared, Throttle};

/// How long the acceptor waits after a shortage before it accepts again.
pub(super) const BACKOFF: Duration = Duration::from_millis(25);

/// The acceptor's listener, wake pipe and queue.
pub(super) struct Acceptor {
    /// The listening socket, non-blocking.
    pub(super) listener: TcpListener,
    /// Readable (at its end) once the server stops.
    pub(super) wake: PipeReader,
    /// The handlers' queue.
    pub(super) queue: Sender<TcpStream>,
    pub(super) shared: Arc<Shared>,
}

/// Why an accept failed, as far as the acceptor cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Trouble {
    /// No file descriptor left, in the process or the system: the connection waits in the
    /// listen queue until one is freed.
    Descriptors,
    /// No memory for the socket.
    Memory,
    /// The connection failed before it was accepted (aborted, refused by a filter, or a
    /// network error pending on it): nothing to wait for.
    Aborted,
    /// Anything else.
    Other,
}

impl Trouble {
    fn of(error: &std::io::Error) -> Trouble {
        match error.raw_os_error().map(Errno::from_raw) {
            Some(Errno::EMFILE | Errno::ENFILE) => Trouble::Descriptors,
            Some(Errno::ENOBUFS | Errno::ENOMEM) => Trouble::Memory,
            Some(
                Errno::ECONNABORTED
                | Errno::EPROTO
                | Errno::EPERM
                | Errno::ENETDOWN
                | Errno::ENETUNREACH
                | Errno::EHOSTDOWN
                | Errno::EHOSTUNREACH
                | Errno::ENONET
                | Errno::ENOPROTOOPT
                | Errno::EOPNOTSUPP,
            ) => Trouble::Aborted,
            _ => Trouble::Other,
        }
    }

    /// What it means for the endpoint, in words.
    fn meaning(self) -> &'static str {
        match self {
            Trouble::Descriptors => {
                "out of file descriptors: connections wait to be accepted until some are freed"
            }
            Trouble::Memory => "out of socket memory",
            Trouble::Aborted => "the connection failed before it was accepted",
            Trouble::Other => "an unexpected error",
        }
    }
}

/// One throttle per [`Trouble`].
#[derive(Default)]
struct Troubles([Throttle; 4]);

impl Troubles {
    fn warn(&self, trouble: Trouble, error: &std::io::Error) {
        self.0[trouble as usize].note(|since| {
            let pause = if trouble == Trouble::Aborted {
                String::new()
            } else {
                format!("; accepting again in {BACKOFF:?}")
            };
            tracing::warn!(
                "kplace run: metrics endpoint: cannot accept a connection: {error} ({}){pause}\
                 {since}",
                trouble.meaning()
            );
        });
    }
}

/// What woke the acceptor.
enum Woken {
    /// The listener may have connections (or the wait timed out, or a signal came).
    Listener,
    /// The server stops.
    Stop,
}

impl Acceptor {
    /// Accepts until the server stops.
    pub(super) fn run(self) {
        let troubles = Troubles::default();
        let polling = Throttle::default();
        while !self.shared.stopping() {
            match self.wait(&polling) {
                Woken::Stop => break,
                Woken::Listener => {
                    if let Woken::Stop = self.drain(&troubles) {
                        break;
                    }
                }
            }
        }
    }

    /// Waits until the listener has a connection or the server stops.
    fn wait(&self, polling: &Throttle) -> Woken {
        let mut fds = [
            PollFd::new(self.listener.as_fd(), PollFlags::POLLIN),
            PollFd::new(self.wake.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            // The pipe's end is readable, or hung up: the server closed it.
            Ok(_) if fds[1].revents().is_none_or(|r| !r.is_empty()) => Woken::Stop,
            Ok(_) | Err(Errno::EINTR) => Woken::Listener,
            Err(e) => {
                polling.note(|since| {
                    tracing::warn!(
                        "kplace run: metrics endpoint: cannot wait for connections: {e}; trying \
                         again in {BACKOFF:?}{since}"
                    );
                });
                self.pause()
            }
        }
    }

    /// Waits [`BACKOFF`], or until the server stops.
    fn pause(&self) -> Woken {
        let mut fds = [PollFd::new(self.wake.as_fd(), PollFlags::POLLIN)];
        let timeout = PollTimeout::try_from(BACKOFF).unwrap_or(PollTimeout::MAX);
        match poll(&mut fds, timeout) {
            Ok(n) if n > 0 => Woken::Stop,
            Ok(_) | Err(Errno::EINTR) => Woken::Listener,
            Err(_) => {
                std::thread::sleep(BACKOFF);
                Woken::Listener
            }
        }
    }

    /// Accepts every connection pending, handing each on; after a shortage, backs off first.
    fn drain(&self, troubles: &Troubles) -> Woken {
        while !self.shared.stopping() {
            match self.listener.accept() {
                Ok((stream, _)) => self.dispatch(stream),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Woken::Listener,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    self.shared.accept_failed();
                    let trouble = Trouble::of(&e);
                    troubles.warn(trouble, &e);
                    if trouble != Trouble::Aborted {
                        return self.pause();
                    }
                }
            }
        }
        Woken::Stop
    }

    /// Hands `stream` to a handler, or refuses it when none can take it.
    fn dispatch(&self, stream: TcpStream) {
        self.shared.accepted();
        let stream = match self.queue.try_send(stream) {
            Ok(()) => return,
            Err(TrySendError::Full(stream)) => {
                self.shared.busy.note(|since| {
                    let limits = &self.shared.limits;
                    tracing::warn!(
                        "kplace run: metrics endpoint: its {} handlers are busy and {} \
                         connections wait: refusing connections{since}",
                        limits.handlers,
                        limits.queue
                    );
                });
                stream
            }
            Err(TrySendError::Disconnected(stream)) => {
                self.shared.busy.note(|_| {
                    tracing::error!(
                        "kplace run: metrics endpoint: no handler left: refusing connections"
                    );
                });
                stream
            }
        };
        handler::refuse(&stream);
        self.shared.ended(Outcome::Refused);
    }
}

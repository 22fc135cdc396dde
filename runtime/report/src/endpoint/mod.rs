//! The HTTP endpoint `kplace run --metrics ADDR` serves: `GET /metrics` (or `HEAD`) answers the
//! run's [`Board`] as OpenMetrics text until the server is dropped or
//! [stopped](MetricsServer::stop). Any other path is a 404 that names the one there is, any other
//! method a 405, and what is not an HTTP/1.x request a 400. The text is rendered per scrape
//! from the board's fixed-size snapshot, so a scraper costs the run nothing between scrapes.
//!
//! What it guarantees, whatever its clients do ([`Limits`]): a fixed number of threads (one
//! acceptor, [`Limits::handlers`] handlers), and of connections held (a bounded queue; past it
//! a connection is answered 503 and closed at once); a request head read into a buffer of
//! [`Limits::head_bytes`] and never further (past it: 431); one request per connection, read
//! and answered within [`Limits::deadline`] or cut. A failing accept (out of file descriptors
//! in a flood) is warned of and backed off from, never the end of the endpoint: it serves
//! again once the flood ends. What became of every connection is counted
//! ([`EndpointCounts`], in the run's report), and stopping is prompt and joins every thread.

mod accept;
mod handler;
mod http;
mod state;

#[cfg(test)]
mod tests;

use std::io::PipeWriter;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use self::state::Shared;
use crate::openmetrics::Board;
pub use crate::run::EndpointCounts;

/// What the endpoint holds at most, and how long it gives a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Handler threads: requests answered at once.
    pub handlers: usize,
    /// Accepted connections waiting for a handler; past them, connections are refused.
    pub queue: usize,
    /// The most bytes of a request's line and headers read.
    pub head_bytes: usize,
    /// The time from a handler taking a connection to its answer written.
    pub deadline: Duration,
}

impl Default for Limits {
    /// 2 handlers, 16 waiting connections, 8 KiB of head, 2 s per request: ample for a
    /// scraper every few seconds, and a few kilobytes and three threads under any flood.
    fn default() -> Limits {
        Limits {
            handlers: 2,
            queue: 16,
            head_bytes: 8 * 1024,
            deadline: Duration::from_secs(2),
        }
    }
}

/// Why the endpoint could not start.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// The address could not be listened on.
    #[error("--metrics {addr}: cannot listen: {source}{}", taken_advice(source))]
    Listen {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// A thread, or the pipe that stops them, could not be made.
    #[error("--metrics {addr}: cannot start the endpoint's {what}: {source}")]
    Start {
        /// The address asked for.
        addr: SocketAddr,
        /// What could not be made.
        what: &'static str,
        /// Why.
        source: std::io::Error,
    },
    /// A limit of zero.
    #[error("metrics endpoint limits {limits:?}: every limit must be above zero")]
    Limits {
        /// The limits given.
        limits: Limits,
    },
}

/// What to do about a port another socket holds: port 0 takes a free one.
fn taken_advice(error: &std::io::Error) -> &'static str {
    match error.kind() {
        std::io::ErrorKind::AddrInUse => {
            ": another program listens there; give another port, or port 0 for a free one \
             (the log says which)"
        }
        _ => "",
    }
}

/// A running endpoint; dropping it stops it and joins its threads.
pub struct MetricsServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    /// Closed to wake the acceptor when the server stops.
    wake: Option<PipeWriter>,
    threads: Vec<JoinHandle<()>>,
}

impl MetricsServer {
    /// Listens on `addr` (port 0: any free port) and serves `board` under the default
    /// [`Limits`] until dropped.
    pub fn start(addr: SocketAddr, board: Arc<Board>) -> Result<MetricsServer, MetricsError> {
        MetricsServer::start_with(addr, board, Limits::default())
    }

    /// Listens on `addr` and serves `board` under `limits` until dropped.
    pub fn start_with(
        addr: SocketAddr,
        board: Arc<Board>,
        limits: Limits,
    ) -> Result<MetricsServer, MetricsError> {
        if limits.handlers == 0
            || limits.queue == 0
            || limits.head_bytes == 0
            || limits.deadline.is_zero()
        {
            return Err(MetricsError::Limits { limits });
        }
        let start = |what| move |source| MetricsError::Start { addr, what, source };
        let listen = |source| MetricsError::Listen { addr, source };
        let listener = TcpListener::bind(addr).map_err(listen)?;
        listener.set_nonblocking(true).map_err(listen)?;
        let bound = listener.local_addr().map_err(listen)?;
        let (wake_end, wake) = std::io::pipe().map_err(start("wake pipe"))?;
        let mut server = MetricsServer {
            addr: bound,
            shared: Arc::new(Shared::new(limits)),
            wake: Some(wake),
            threads: Vec::with_capacity(limits.handlers + 1),
        };
        // Made after `server`, so dropped before it: should a thread not start, the handlers
        // that did find the queue closed, and dropping `server` joins them.
        let (queue, taken) = crossbeam::channel::bounded(limits.queue);
        for i in 0..limits.handlers {
            let shared = Arc::clone(&server.shared);
            let (taken, board) = (taken.clone(), Arc::clone(&board));
            let thread = std::thread::Builder::new()
                .name(format!("metrics-serve-{i}"))
                .spawn(move || handler::serve(&taken, &shared, &board))
                .map_err(start("handler threads"))?;
            server.threads.push(thread);
        }
        let acceptor = accept::Acceptor {
            listener,
            wake: wake_end,
            queue,
            shared: Arc::clone(&server.shared),
        };
        let thread = std::thread::Builder::new()
            .name("metrics-accept".into())
            .spawn(move || acceptor.run())
            .map_err(start("acceptor thread"))?;
        server.threads.push(thread);
        tracing::info!("kplace run: metrics at http://{bound}/metrics");
        if bound.ip().is_unspecified() {
            tracing::info!(
                "kplace run: the metrics endpoint listens on every interface: anyone who can \
                 reach port {} reads the run's metrics (no authentication, no TLS)",
                bound.port()
            );
        }
        Ok(server)
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// What it has done so far.
    pub fn counts(&self) -> EndpointCounts {
        self.shared.counts()
    }

    /// Stops it, joins its threads, and says what it did: every connection accepted has then
    /// ended in one outcome.
    pub fn stop(mut self) -> EndpointCounts {
        self.halt();
        self.shared.counts()
    }

    /// Tells the threads to stop, wakes the acceptor, and joins them all.
    fn halt(&mut self) {
        self.shared.stop();
        drop(self.wake.take());
        for thread in self.threads.drain(..) {
            let name = thread.thread().name().unwrap_or("?").to_string();
            if thread.join().is_err() {
                tracing::error!("kplace run: metrics endpoint: its thread {name} panicked");
            }
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.halt();
    }
}

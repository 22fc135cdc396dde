//! The HTTP endpoint `kplace run --metrics ADDR` serves: `GET /metrics` answers the run's
//! [`Board`] as OpenMetrics text, on a thread of its own (`tiny_http`), until the server is
//! dropped. Any other path is a 404 that names the one there is; only GET and HEAD are
//! answered. The text is rendered per scrape from the board's fixed-size snapshot, so a
//! scraper costs the run nothing between scrapes and the endpoint holds no history.

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use tiny_http::{Header, Method, Response, Server};

use crate::report::openmetrics::Board;

/// The content type of OpenMetrics text.
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Why the endpoint could not start.
#[derive(Debug, thiserror::Error)]
#[error("--metrics {addr}: cannot listen: {why}")]
pub struct MetricsError {
    /// The address asked for.
    pub addr: SocketAddr,
    /// Why.
    pub why: String,
}

/// A running endpoint; dropping it stops the server and joins its thread.
pub struct MetricsServer {
    server: Arc<Server>,
    thread: Option<JoinHandle<()>>,
    addr: SocketAddr,
}

impl MetricsServer {
    /// Listens on `addr` (port 0: any free port) and serves `board` until dropped.
    pub fn start(addr: SocketAddr, board: Arc<Board>) -> Result<MetricsServer, MetricsError> {
        let error = |why: String| MetricsError { addr, why };
        let server = Arc::new(Server::http(addr).map_err(|e| error(e.to_string()))?);
        let bound = server
            .server_addr()
            .to_ip()
            .ok_or_else(|| error("not an IP address".into()))?;
        let serving = Arc::clone(&server);
        let thread = std::thread::Builder::new()
            .name("kplace-metrics".into())
            .spawn(move || serve(&serving, &board))
            .map_err(|e| error(e.to_string()))?;
        tracing::info!("kplace run: metrics at http://{bound}/metrics");
        Ok(MetricsServer {
            server,
            thread: Some(thread),
            addr: bound,
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Answers requests one at a time until the server is unblocked.
fn serve(server: &Server, board: &Board) {
    // A constant: it parses.
    let content_type = Header::from_bytes("Content-Type", CONTENT_TYPE).ok();
    for request in server.incoming_requests() {
        let answer = match (request.method(), request.url()) {
            (Method::Get | Method::Head, "/metrics") => {
                let text = Response::from_string(board.render());
                match &content_type {
                    Some(header) => text.with_header(header.clone()),
                    None => text,
                }
            }
            (Method::Get | Method::Head, _) => {
                Response::from_string("kplace serves its metrics at /metrics\n")
                    .with_status_code(404)
            }
            _ => Response::from_string("only GET /metrics\n").with_status_code(405),
        };
        // A scraper that hangs up early costs only its own answer.
        let _ = request.respond(answer);
    }
}

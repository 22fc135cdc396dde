//! The little of HTTP/1.x the endpoint speaks, as pure functions of bytes: where a request's
//! head ends, what the head asks for, and the bytes of each answer. Every answer closes the
//! connection (`Connection: close`) and says its length; no body is ever read.

use std::time::Duration;

/// The content type of OpenMetrics text.
pub(super) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The one path served.
const PATH: &str = "/metrics";

/// What a request's head asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Request {
    /// `GET` or `HEAD /metrics` (`head_only` for `HEAD`).
    Metrics { head_only: bool },
    /// `GET` or `HEAD` of another path.
    NotFound { head_only: bool },
    /// Another method.
    MethodNotAllowed,
    /// Not an HTTP/1.x request head, and why.
    Bad(&'static str),
}

/// Where the head in `buf` ends (the index after its blank line), looking at the line ends
/// from `from` on (bytes before it were looked at already); `None` until it has arrived. A
/// line may end in CRLF or a bare LF.
pub(super) fn head_end(buf: &[u8], from: usize) -> Option<usize> {
    (from..buf.len()).find_map(|i| {
        let before = &buf[..i];
        (buf[i] == b'\n' && (before.ends_with(b"\n") || before.ends_with(b"\n\r"))).then_some(i + 1)
    })
}

/// What the request head `head` (its blank line included) asks for.
pub(super) fn parse(head: &[u8]) -> Request {
    let Ok(text) = std::str::from_utf8(head) else {
        return Request::Bad("the request head is not UTF-8");
    };
    // A server ignores empty lines before the request line (RFC 9112, 2.2).
    let text = text.trim_start_matches(['\r', '\n']);
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let line = lines.next().unwrap_or_default();
    let parts: Vec<&str> = line.split(' ').collect();
    let [method, target, version] = parts[..] else {
        return Request::Bad("the request line is not METHOD TARGET VERSION");
    };
    if method.is_empty() || !method.bytes().all(is_token) {
        return Request::Bad("the method is not a token");
    }
    if !matches!(version, "HTTP/1.0" | "HTTP/1.1") {
        return Request::Bad("the version is not HTTP/1.0 or HTTP/1.1");
    }
    if target.is_empty() || target.bytes().any(|b| b.is_ascii_control()) {
        return Request::Bad("the target is empty or holds control characters");
    }
    for header in lines.take_while(|l| !l.is_empty()) {
        let name = header.split_once(':').map(|(name, _)| name);
        if !name.is_some_and(|n| !n.is_empty() && n.bytes().all(is_token)) {
            return Request::Bad("a header line is not NAME: VALUE");
        }
    }
    let head_only = match method {
        "GET" => false,
        "HEAD" => true,
        _ => return Request::MethodNotAllowed,
    };
    let path = target.split_once('?').map_or(target, |(path, _)| path);
    if path == PATH {
        Request::Metrics { head_only }
    } else {
        Request::NotFound { head_only }
    }
}

/// Whether `b` may be in a token (a method, a header's name): RFC 9110's `tchar`.
fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// An answer: its status, content type, extra header lines and body, written whole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Answer {
    status: u16,
    content_type: &'static str,
    extra: &'static str,
    body: String,
    head_only: bool,
}

impl Answer {
    /// The board's text.
    pub(super) fn metrics(text: String, head_only: bool) -> Answer {
        Answer {
            status: 200,
            content_type: CONTENT_TYPE,
            extra: "",
            body: text,
            head_only,
        }
    }

    /// Another path: a 404 that names the one there is.
    pub(super) fn not_found(head_only: bool) -> Answer {
        Answer {
            head_only,
            ..Answer::text(404, "kplace serves its metrics at /metrics")
        }
    }

    /// Another method.
    pub(super) fn method_not_allowed() -> Answer {
        Answer {
            extra: "Allow: GET, HEAD\r\n",
            ..Answer::text(405, "only GET /metrics")
        }
    }

    /// Not a request it understands.
    pub(super) fn bad(why: &str) -> Answer {
        Answer::text(400, &format!("bad request: {why}"))
    }

    /// A head over `limit` bytes.
    pub(super) fn too_large(limit: usize) -> Answer {
        Answer::text(
            431,
            &format!("the request line and headers are over {limit} bytes"),
        )
    }

    /// A request not whole within `deadline`.
    pub(super) fn timed_out(deadline: Duration) -> Answer {
        Answer::text(
            408,
            &format!("the request did not arrive within {deadline:?}"),
        )
    }

    /// Every handler busy.
    pub(super) fn busy() -> Answer {
        Answer {
            extra: "Retry-After: 1\r\n",
            ..Answer::text(503, "the metrics endpoint is busy: try again")
        }
    }

    /// A plain-text answer with status `status`.
    fn text(status: u16, line: &str) -> Answer {
        Answer {
            status,
            content_type: "text/plain; charset=utf-8",
            extra: "",
            body: format!("{line}\n"),
            head_only: false,
        }
    }

    /// The answer's status code.
    pub(super) fn status(&self) -> u16 {
        self.status
    }

    /// The answer as written on the wire: status line, headers, and the body unless it
    /// answers a `HEAD`.
    pub(super) fn bytes(&self) -> Vec<u8> {
        let reason = match self.status {
            200 => "OK",
            400 => "Bad Request",
            404 => "Not Found",
            405 => "Method Not Allowed",
            408 => "Request Timeout",
            431 => "Request Header Fields Too Large",
            503 => "Service Unavailable",
            _ => "",
        };
        let mut out = format!(
            "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{}\
             Connection: close\r\n\r\n",
            self.status,
            self.content_type,
            self.body.len(),
            self.extra
        )
        .into_bytes();
        if !self.head_only {
            out.extend_from_slice(self.body.as_bytes());
        }
        out
    }
}

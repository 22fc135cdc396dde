use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::http::{self, Answer, Request};
use super::state::{Since, Throttle};
use super::*;

/// The longest any wait here may take: far past anything the server does, so that a hang
/// fails instead of blocking the suite.
const LIMIT: Duration = Duration::from_secs(30);

fn start(limits: Limits) -> MetricsServer {
    let board = Arc::new(Board::new(1, vec!["fir".into()]));
    let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
    MetricsServer::start_with(addr, board, limits).unwrap()
}

fn connect(server: &MetricsServer) -> TcpStream {
    let stream = TcpStream::connect(server.addr()).unwrap();
    stream.set_read_timeout(Some(LIMIT)).unwrap();
    stream.set_write_timeout(Some(LIMIT)).unwrap();
    stream
}

/// Everything the server writes back on `stream` until it closes, as text (what it wrote
/// before a reset, if it reset).
fn answer(mut stream: TcpStream) -> String {
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// Sends `request` on a new connection and returns the answer.
fn exchange(server: &MetricsServer, request: &[u8]) -> String {
    let mut stream = connect(server);
    stream.write_all(request).unwrap();
    answer(stream)
}

/// Waits, at most [`LIMIT`], until `connections` connections were accepted and every one has
/// ended; the counts then.
fn settled(server: &MetricsServer, connections: u64) -> EndpointCounts {
    let start = Instant::now();
    loop {
        let counts = server.counts();
        if counts.connections == connections && counts.ended() == connections {
            return counts;
        }
        assert!(start.elapsed() < LIMIT, "never settled: {counts:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_request_head_is_read_as_http_1() {
    let parse = |text: &str| http::parse(text.as_bytes());
    let metrics = |head_only| Request::Metrics { head_only };
    assert_eq!(
        parse("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
        metrics(false)
    );
    assert_eq!(parse("HEAD /metrics HTTP/1.0\r\n\r\n"), metrics(true));
    assert_eq!(parse("\r\nGET /metrics?x=1 HTTP/1.1\n\n"), metrics(false));
    assert_eq!(
        parse("GET / HTTP/1.1\r\n\r\n"),
        Request::NotFound { head_only: false }
    );
    assert_eq!(
        parse("POST /metrics HTTP/1.1\r\n\r\n"),
        Request::MethodNotAllowed
    );
    for bad in [
        "garbage\r\n\r\n",
        "GET /metrics\r\n\r\n",
        "GET  /metrics HTTP/1.1\r\n\r\n",
        "GET /metrics HTTP/2.0\r\n\r\n",
        "G(T /metrics HTTP/1.1\r\n\r\n",
        "GET /metrics HTTP/1.1\r\nno colon\r\n\r\n",
        "GET /metrics HTTP/1.1\r\n folded: x\r\n\r\n",
        "\r\n\r\n",
    ] {
        assert!(matches!(parse(bad), Request::Bad(_)), "{bad:?}");
    }
    assert!(matches!(
        http::parse(b"GET /\xff HTTP/1.1\r\n\r\n"),
        Request::Bad(_)
    ));
}

#[test]
fn a_head_ends_at_its_blank_line_however_it_arrives() {
    let head = b"GET /metrics HTTP/1.1\r\nA: b\r\n\r\nbody";
    assert_eq!(http::head_end(head, 0), Some(head.len() - 4));
    // Line by line, looking only at what is new (and the three bytes before it).
    let end = (1..=head.len()).find_map(|n| http::head_end(&head[..n], n.saturating_sub(4)));
    assert_eq!(end, Some(head.len() - 4));
    assert_eq!(http::head_end(b"GET / HTTP/1.0\n\n", 0), Some(16));
    assert_eq!(http::head_end(b"GET / HTTP/1.1\r\nA: b\r\n", 0), None);
}

#[test]
fn an_answer_says_its_length_and_closes() {
    let text = String::from_utf8(Answer::metrics("# EOF\n".into(), false).bytes()).unwrap();
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(text.contains("\r\nContent-Length: 6\r\n"), "{text}");
    assert!(text.contains("\r\nConnection: close\r\n"), "{text}");
    assert!(text.ends_with("\r\n\r\n# EOF\n"), "{text}");
    let head = String::from_utf8(Answer::metrics("# EOF\n".into(), true).bytes()).unwrap();
    assert!(
        head.ends_with("Content-Length: 6\r\nConnection: close\r\n\r\n"),
        "{head}"
    );
    let busy = String::from_utf8(Answer::busy().bytes()).unwrap();
    assert!(
        busy.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
        "{busy}"
    );
    assert!(busy.contains("\r\nRetry-After: 1\r\n"), "{busy}");
}

#[test]
fn the_endpoint_answers_each_request_and_counts_it() {
    let server = start(Limits::default());
    let ok = exchange(&server, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
    assert!(
        ok.contains(
            "\r\nContent-Type: application/openmetrics-text; version=1.0.0; charset=utf-8\r\n"
        ),
        "{ok}"
    );
    assert!(ok.ends_with("# EOF\n"), "{ok}");
    let head = exchange(&server, b"HEAD /metrics HTTP/1.0\r\n\r\n");
    assert!(
        head.starts_with("HTTP/1.1 200 OK\r\n") && head.ends_with("\r\n\r\n"),
        "{head}"
    );
    let missing = exchange(&server, b"GET /other HTTP/1.1\r\n\r\n");
    assert!(missing.starts_with("HTTP/1.1 404 "), "{missing}");
    assert!(
        missing.ends_with("kplace serves its metrics at /metrics\n"),
        "{missing}"
    );
    let post = exchange(
        &server,
        b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
    );
    assert!(post.starts_with("HTTP/1.1 405 "), "{post}");
    assert!(post.contains("\r\nAllow: GET, HEAD\r\n"), "{post}");
    let garbage = exchange(&server, b"\x16\x03\x01 hello\r\n\r\n");
    assert!(garbage.starts_with("HTTP/1.1 400 "), "{garbage}");
    drop(connect(&server));
    let counts = settled(&server, 6);
    assert_eq!(
        counts,
        EndpointCounts {
            connections: 6,
            scrapes: 2,
            other_requests: 3,
            hung_up: 1,
            ..EndpointCounts::default()
        }
    );
    assert!(!counts.troubled());
    assert_eq!(server.stop(), counts);
}

#[test]
fn a_head_over_the_limit_is_answered_431_and_not_read_further() {
    let limits = Limits {
        head_bytes: 1024,
        ..Limits::default()
    };
    let server = start(limits);
    // Exactly the limit with no end in sight: the server reads it all, answers, and closes.
    let mut head = b"GET /metrics HTTP/1.1\r\nX-Long: ".to_vec();
    head.resize(1024, b'a');
    let refused = exchange(&server, &head);
    assert!(
        refused.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"),
        "{refused}"
    );
    assert!(refused.contains("over 1024 bytes"), "{refused}");
    // One byte less with its end is served.
    let mut fits = b"GET /metrics HTTP/1.1\r\nX-Long: ".to_vec();
    fits.resize(1020, b'a');
    fits.extend_from_slice(b"\r\n\r\n");
    assert!(exchange(&server, &fits).starts_with("HTTP/1.1 200 OK\r\n"));
    let counts = settled(&server, 2);
    assert_eq!((counts.oversized, counts.scrapes), (1, 1), "{counts:?}");
    assert!(counts.troubled());
}

#[test]
fn a_request_not_whole_by_the_deadline_is_cut_while_another_is_served() {
    let limits = Limits {
        deadline: Duration::from_millis(300),
        ..Limits::default()
    };
    let server = start(limits);
    let mut slow = connect(&server);
    slow.write_all(b"GET /metrics HTTP/1.1\r\nX-Slow: ")
        .unwrap();
    let ok = exchange(&server, b"GET /metrics HTTP/1.1\r\n\r\n");
    assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
    let cut = answer(slow);
    assert!(cut.starts_with("HTTP/1.1 408 Request Timeout\r\n"), "{cut}");
    let counts = settled(&server, 2);
    assert_eq!((counts.timed_out, counts.scrapes), (1, 1), "{counts:?}");
}

#[test]
fn connections_past_the_handlers_and_the_queue_are_refused_at_once() {
    // A deadline no connection reaches here: the held connections hold their handler.
    let limits = Limits {
        handlers: 1,
        queue: 2,
        deadline: Duration::from_secs(600),
        ..Limits::default()
    };
    let server = start(limits);
    let held: Vec<TcpStream> = (0..20).map(|_| connect(&server)).collect();
    // A connection is counted when accepted and counted refused once its 503 is written:
    // wait for both. One in the handler (or not yet taken from the queue) and two waiting
    // leave at least 17 refused.
    let start = Instant::now();
    let counts = loop {
        let counts = server.counts();
        if counts.connections == 20 && counts.refused >= 17 {
            break counts;
        }
        assert!(start.elapsed() < LIMIT, "{counts:?}");
        std::thread::sleep(Duration::from_millis(5));
    };
    assert!(
        (17..=18).contains(&counts.refused),
        "refused beyond the handler and the queue: {counts:?}"
    );
    let mut held = held;
    let last = held.pop().unwrap();
    let busy = answer(last);
    assert!(
        busy.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
        "{busy}"
    );
    // The flood over, the endpoint serves.
    drop(held);
    let counts = settled(&server, 20);
    assert_eq!(counts.refused + counts.hung_up, 20, "{counts:?}");
    let ok = exchange(&server, b"GET /metrics HTTP/1.1\r\n\r\n");
    assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
    let last = server.stop();
    assert_eq!((last.connections, last.scrapes), (21, 1), "{last:?}");
    assert!(last.troubled());
    assert!(
        last.to_string().starts_with(&format!(
            "metrics endpoint: 21 connections: 1 scrape answered, {} refused (busy), ",
            last.refused
        )),
        "{last}"
    );
}

#[test]
fn stopping_ends_a_request_in_flight_and_joins_every_thread() {
    let limits = Limits {
        deadline: Duration::from_secs(600),
        ..Limits::default()
    };
    let server = start(limits);
    let mut held = connect(&server);
    held.write_all(b"GET /metrics HTTP/1.1\r\n").unwrap();
    let start = Instant::now();
    while server.counts().connections < 1 {
        assert!(start.elapsed() < LIMIT);
        std::thread::sleep(Duration::from_millis(5));
    }
    let addr = server.addr();
    let (done, stopped) = std::sync::mpsc::channel();
    std::thread::spawn(move || done.send(server.stop()));
    let counts = stopped
        .recv_timeout(LIMIT)
        .expect("stop returns without waiting for the request's deadline");
    assert_eq!((counts.connections, counts.ended()), (1, 1), "{counts:?}");
    assert!(TcpStream::connect(addr).is_err(), "still listening");
}

#[test]
fn limits_of_zero_are_refused() {
    let board = Arc::new(Board::new(1, Vec::new()));
    let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
    for limits in [
        Limits {
            handlers: 0,
            ..Limits::default()
        },
        Limits {
            queue: 0,
            ..Limits::default()
        },
        Limits {
            deadline: Duration::ZERO,
            ..Limits::default()
        },
    ] {
        let error = MetricsServer::start_with(addr, Arc::clone(&board), limits)
            .err()
            .expect("refused");
        assert!(error.to_string().contains("must be above zero"), "{error}");
    }
}

#[test]
fn a_throttled_warning_is_given_once_and_the_rest_counted() {
    let throttle = Throttle::default();
    let mut warned = Vec::new();
    for _ in 0..3 {
        throttle.note(|since| warned.push(since));
    }
    assert_eq!(warned, vec![Since(0)], "one warning in the period");
    assert_eq!(Since(0).to_string(), "");
    assert_eq!(Since(2).to_string(), " (2 more since the last warning)");
}

/// The case: a port another program holds says that port 0 takes a free one.
#[test]
fn a_taken_port_says_that_port_zero_takes_a_free_one() {
    let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = holder.local_addr().unwrap();
    let board = Arc::new(Board::new(1, vec!["fir".into()]));
    let e = MetricsServer::start(taken, board)
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.starts_with(&format!("--metrics {taken}: cannot listen: "))
            && e.ends_with(
                ": another program listens there; give another port, or port 0 for a free one \
                 (the log says which)"
            ),
        "{e}"
    );
}

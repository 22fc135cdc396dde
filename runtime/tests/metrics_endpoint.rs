//! The metrics endpoint (`kplace run --metrics`) under abuse, against the real server: a flood
//! of connections held open, a 10 MB header line, a request sent a byte at a time, and a
//! process out of file descriptors. Each leaves the endpoint serving, with a bounded number
//! of threads and without buffering what it was sent.
//!
//! The tests measure the whole process (its threads), so they take turns ([`serial`]). No
//! test asserts a time: every wait has a limit far past what the server needs, so that a hang
//! fails instead of blocking.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use kplace::net::metrics::MetricsServer;
use kplace::report::openmetrics::Board;

/// The longest any wait may take.
const LIMIT: Duration = Duration::from_secs(60);

/// Connections in the flood: past the 2,400 that knocked the old endpoint over, if the
/// file descriptor limit allows.
const FLOOD: usize = 3000;

/// One test at a time: they count the process's threads.
fn serial() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

fn start() -> MetricsServer {
    let board = Arc::new(Board::new(1, vec!["fir".into()]));
    let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
    MetricsServer::start(addr, board).unwrap()
}

/// The process's threads, from /proc/self/status.
fn threads() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("a Threads: line")
}

/// One scrape: the answer's text, or `None` when the endpoint refused or broke it.
fn scrape(addr: SocketAddr) -> Option<String> {
    let mut stream = TcpStream::connect_timeout(&addr, LIMIT).ok()?;
    stream.set_read_timeout(Some(LIMIT)).ok()?;
    stream.set_write_timeout(Some(LIMIT)).ok()?;
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    Some(text)
}

/// Scrapes until one is answered 200, trying at most 200 times: after a flood, the handlers
/// may still be closing what the flood left in the queue.
fn scrape_until_served(addr: SocketAddr) -> String {
    let mut last = None;
    for _ in 0..200 {
        match scrape(addr) {
            Some(text) if text.starts_with("HTTP/1.1 200 ") => return text,
            other => last = other,
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("never served after the flood; last answer: {last:?}");
}

/// The soft limit on open files, raised toward the hard one to fit `wanted`; what it is then.
fn open_files_for(wanted: u64) -> u64 {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    if soft >= wanted {
        return soft;
    }
    let raised = wanted.min(hard);
    match setrlimit(Resource::RLIMIT_NOFILE, raised, hard) {
        Ok(()) => raised,
        Err(_) => soft,
    }
}

#[test]
fn a_flood_of_held_connections_leaves_the_threads_bounded_and_the_endpoint_serving() {
    let _turn = serial();
    // Room for the flood's ends on this side, and the endpoint's few, below the limit: the
    // flood is to meet the endpoint's queue, not the process's descriptors.
    let room = open_files_for(FLOOD as u64 + 256);
    let flood = FLOOD.min(room.saturating_sub(256) as usize);
    assert!(flood >= 500, "only {room} open files: too few for a flood");
    let before = threads();
    let server = start();
    let addr = server.addr();
    let mut held = Vec::with_capacity(flood);
    let mut most = threads();
    for i in 0..flood {
        if let Ok(stream) = TcpStream::connect_timeout(&addr, LIMIT) {
            held.push(stream);
        }
        if i % 100 == 0 {
            most = most.max(threads());
        }
    }
    most = most.max(threads());
    assert!(
        held.len() * 10 >= flood * 9,
        "most of the flood connected: {} of {flood}",
        held.len()
    );
    // The endpoint's threads (an acceptor and its handlers) and a few the test harness may
    // start meanwhile; a thread per connection would be thousands.
    assert!(
        most <= before + 3 + 8,
        "threads went from {before} to {most} under a flood of {flood} connections"
    );
    drop(held);
    let text = scrape_until_served(addr);
    assert!(text.ends_with("# EOF\n"), "{text}");
    // And once more, at once: the endpoint is not left refusing.
    let again = scrape(addr).expect("served");
    assert!(again.starts_with("HTTP/1.1 200 "), "{again}");
}

#[test]
fn a_ten_megabyte_header_is_refused_without_being_read() {
    let _turn = serial();
    let server = start();
    let mut stream = TcpStream::connect_timeout(&server.addr(), LIMIT).unwrap();
    stream.set_read_timeout(Some(LIMIT)).unwrap();
    stream.set_write_timeout(Some(LIMIT)).unwrap();
    let mut request = b"GET /metrics HTTP/1.1\r\nX-Huge: ".to_vec();
    request.resize(request.len() + 10 * 1024 * 1024, b'a');
    request.extend_from_slice(b"\r\n\r\n");
    // The endpoint stops reading at its limit and closes: the rest cannot be sent (the
    // socket's buffers hold far less than 10 MB).
    let sent = stream.write_all(&request);
    assert!(
        sent.is_err(),
        "a 10 MB header line was read whole: the endpoint buffers what it is sent"
    );
    // It said why, unless the reset overtook its answer.
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 431 "),
        "{answer}"
    );
    // And it goes on serving.
    let text = scrape_until_served(server.addr());
    assert!(text.ends_with("# EOF\n"), "{text}");
}

#[test]
fn a_request_sent_a_byte_at_a_time_is_cut_while_others_are_served() {
    let _turn = serial();
    let server = start();
    let addr = server.addr();
    let mut slow = TcpStream::connect_timeout(&addr, LIMIT).unwrap();
    slow.write_all(b"GET /metrics HTTP/1.1\r\nX-Slow: ")
        .unwrap();
    let text = scrape(addr).expect("another client is served meanwhile");
    assert!(text.starts_with("HTTP/1.1 200 "), "{text}");
    // A byte every 100 ms, until the endpoint cuts it: it writes its 408 and closes, so a
    // read sees the answer or the end, or a write fails. Bounded: never past LIMIT.
    slow.set_nonblocking(true).unwrap();
    let start = Instant::now();
    let mut got = Vec::new();
    let cut = loop {
        let mut chunk = [0; 512];
        match slow.read(&mut chunk) {
            Ok(0) => break true,
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => break true,
        }
        if slow.write(b"a").is_err() {
            break true;
        }
        if start.elapsed() > LIMIT {
            break false;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(cut, "a request trickling in was never cut");
    let got = String::from_utf8_lossy(&got);
    assert!(got.is_empty() || got.starts_with("HTTP/1.1 408 "), "{got}");
}

/// Set in the child process [`out_of_file_descriptors_the_endpoint_backs_off_and_recovers`]
/// starts: it runs the test's other half.
const CHILD: &str = "KPLACE_TEST_METRICS_OUT_OF_FILES";

#[test]
fn out_of_file_descriptors_the_endpoint_backs_off_and_recovers() {
    if std::env::var_os(CHILD).is_some() {
        return out_of_files();
    }
    let _turn = serial();
    // In a child process: it lowers its own limit on open files and uses them all.
    let name = "out_of_file_descriptors_the_endpoint_backs_off_and_recovers";
    let ended = kplace_testkit::Guard::spawn(
        std::process::Command::new(std::env::current_exe().unwrap())
            .args([name, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD, "1"),
    )
    .wait(LIMIT * 2);
    assert!(
        ended.status.success() && ended.stdout.contains("1 passed"),
        "{}\n{}",
        ended.stdout,
        ended.stderr
    );
}

/// The child's half: every descriptor taken while a connection waits to be accepted, then
/// some freed.
fn out_of_files() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    setrlimit(Resource::RLIMIT_NOFILE, 128.min(hard), hard).unwrap();
    let server = start();
    let addr = server.addr();
    let mut files = Vec::new();
    while let Ok(file) = std::fs::File::open("/dev/null") {
        files.push(file);
    }
    // One free descriptor, which the client's socket takes: the endpoint has none to accept
    // the connection with.
    files.pop();
    let mut client = TcpStream::connect_timeout(&addr, LIMIT).expect("connected");
    let start = Instant::now();
    while server.counts().accept_errors == 0 {
        assert!(
            start.elapsed() < LIMIT,
            "no accept error: {:?}",
            server.counts()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    files.truncate(files.len() - 16);
    // The endpoint accepts the waiting connection, and serves it.
    client.set_read_timeout(Some(LIMIT)).unwrap();
    client
        .write_all(b"GET /metrics HTTP/1.1\r\n\r\n")
        .expect("sent");
    let mut text = String::new();
    client.read_to_string(&mut text).expect("answered");
    assert!(text.starts_with("HTTP/1.1 200 "), "{text}");
    let again = scrape(addr).expect("served");
    assert!(again.starts_with("HTTP/1.1 200 "), "{again}");
    let counts = server.stop();
    assert!(counts.accept_errors >= 1, "{counts:?}");
    assert_eq!((counts.connections, counts.scrapes), (2, 2), "{counts:?}");
    println!("{counts:?}");
}

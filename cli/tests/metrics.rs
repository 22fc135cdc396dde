//! `kplace run --metrics ADDR`: the OpenMetrics endpoint scraped while a paced UDP stream runs,
//! its counts (the pipeline's and the receiver's) growing with the stream and agreeing with
//! the run's own report at the end;
//! a flood of connections and a 10 MB header that leave the run whole and its report counting
//! them; what it refuses. Every process is guarded and every wait has a limit.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use kplace_testkit::Guard;

const LIMIT: Duration = Duration::from_secs(120);

/// The scraped run's frame slots: the most frames in flight at once.
const SLOTS: usize = 8;

fn kplace() -> std::process::Command {
    let mut c = std::process::Command::new(kplace_testkit::kplace_bin!());
    c.current_dir(kplace_testkit::workspace());
    c
}

/// One HTTP GET of `path` on `port`: the status line and the body; `None` when the endpoint
/// is gone (the run ended).
fn try_get(port: u16, path: &str) -> Option<(String, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    Some((
        head.lines().next().unwrap_or("").to_string(),
        body.to_string(),
    ))
}

fn get(port: u16, path: &str) -> (String, String) {
    try_get(port, path).expect("the endpoint answers")
}

/// The port of the metrics endpoint `run` serves, from its log.
fn metrics_port(run: &mut Guard) -> u16 {
    run.wait_stderr("/metrics", LIMIT);
    let log = run.stderr_so_far();
    log.split("metrics at http://127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split('/').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no metrics address in: {log}"))
}

/// The value of the sample line `name` in OpenMetrics `text`.
fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn the_metrics_endpoint_is_scraped_while_a_stream_runs() {
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready.json");
    let report = dir.path().join("run.json");
    let mut receiver = Guard::spawn(kplace().args([
        "run",
        "--frames",
        "300",
        "--source",
        "udp://127.0.0.1:0",
        "--metrics",
        "127.0.0.1:0",
        "--report-every",
        "100ms",
        "--progress-out",
        dir.path().join("progress.jsonl").to_str().unwrap(),
        "--ready-file",
        ready.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
        "--idle-timeout-s",
        "5",
        "--slots",
        &SLOTS.to_string(),
    ]));
    let udp = receiver.wait_ready(&ready, LIMIT)[0];
    let port = metrics_port(&mut receiver);
    // Before any frame: an endpoint with nothing made up.
    let (status, before) = get(port, "/metrics");
    assert!(status.contains("200"), "{status}");
    assert!(before.ends_with("# EOF\n"), "{before}");
    let (status, _) = get(port, "/");
    assert!(status.contains("404"), "{status}");

    // 300 frames at 100 frames per second: three seconds of stream, scraped as it goes.
    let sender = Guard::spawn(kplace().args([
        "send",
        "--dest",
        &format!("127.0.0.1:{udp}"),
        "--frames",
        "300",
        "--rate",
        "100",
    ]));
    let start = Instant::now();
    let mut seen = Vec::new();
    let mut ingest = Vec::new();
    while start.elapsed() < LIMIT && receiver.running() {
        let Some((_, text)) = try_get(port, "/metrics") else {
            break;
        };
        if let Some(frames) = sample(&text, "kplace_frames_total{pipeline=\"0\"}") {
            seen.push(frames);
            let count = sample(
                &text,
                "kplace_post_frame_latency_seconds_count{pipeline=\"0\"}",
            );
            let inf = sample(
                &text,
                "kplace_post_frame_latency_seconds_bucket{le=\"+Inf\",pipeline=\"0\"}",
            );
            assert_eq!(count, Some(frames), "one latency per frame:\n{text}");
            assert_eq!(inf, Some(frames), "{text}");
            let launches = sample(
                &text,
                "kplace_stage_launches_total{pipeline=\"0\",stage=\"cfar\"}",
            );
            // One CFAR launch per frame: every frame counted ran it, and a frame whose CFAR
            // has ended but whose later stages have not is not counted yet (at most the
            // run's 8 slots of them).
            let launches = launches.unwrap_or_else(|| panic!("no CFAR launches:\n{text}"));
            assert!(
                launches >= frames && launches <= frames + SLOTS as f64,
                "one CFAR launch per frame:\n{text}"
            );
            // The receiver's counters: every datagram read under at most one class so far
            // (a packet held to corroborate a restart is classed later).
            let packets = sample(&text, "kplace_ingest_packets_total{pipeline=\"0\"}");
            let classified: f64 = text
                .lines()
                .filter(|l| l.starts_with("kplace_ingest_classified_packets_total{"))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum();
            let accepted = sample(
                &text,
                "kplace_ingest_classified_packets_total{pipeline=\"0\",class=\"accepted\"}",
            );
            if let (Some(packets), Some(accepted)) = (packets, accepted) {
                ingest.push(packets);
                assert!(accepted <= classified && classified <= packets, "{text}");
            }
            if frames >= 100.0 {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        seen.windows(2).all(|w| w[0] <= w[1]) && seen.iter().any(|&f| f > 0.0 && f < 300.0),
        "the counts grew while the stream ran: {seen:?}"
    );
    assert!(
        ingest.windows(2).all(|w| w[0] <= w[1]) && ingest.iter().any(|&p| p > 0.0),
        "the receiver's counts were posted and grew: {ingest:?}"
    );
    let sent = sender.wait(LIMIT);
    assert!(sent.status.success(), "{}", sent.stderr);
    let ended = receiver.wait(LIMIT);
    assert!(ended.status.success(), "{}\n{}", ended.stdout, ended.stderr);
    assert!(
        ended.stdout.contains("verification PASSED: 300/300"),
        "{}",
        ended.stdout
    );
    // The endpoint went with the run.
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "still listening after the run"
    );
}

#[test]
fn metrics_need_an_address_and_one_process() {
    for (args, phrase) in [
        (
            vec!["run", "--metrics", "localhost"],
            "invalid socket address",
        ),
        (
            vec![
                "run",
                "--pipelines",
                "2",
                "--pipeline-mode",
                "process",
                "--metrics",
                "127.0.0.1:0",
            ],
            "with --pipeline-mode process each pipeline is a process of its own",
        ),
    ] {
        let ended = Guard::spawn(kplace().args(&args)).wait(LIMIT);
        assert!(!ended.status.success(), "{args:?}");
        assert!(ended.stderr.contains(phrase), "{args:?}: {}", ended.stderr);
    }
}

/// The case: a port another program holds fails the run before its first frame,
/// saying that port 0 takes a free one.
#[test]
fn a_taken_port_is_refused_saying_port_zero_takes_a_free_one() {
    let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = holder.local_addr().unwrap().to_string();
    let args = [
        "run",
        "--cpi",
        "256x32",
        "--frames",
        "4",
        "--metrics",
        &taken,
    ];
    let ended = Guard::spawn(kplace().args(args)).wait(LIMIT);
    assert_eq!(ended.status.code(), Some(2), "{}", ended.stderr);
    assert!(
        ended
            .stderr
            .contains(&format!("--metrics {taken}: cannot listen: "))
            && ended.stderr.contains(
                "another program listens there; give another port, or port 0 for a free one"
            ),
        "{}",
        ended.stderr
    );
    assert!(!ended.stdout.contains("frames 4"), "{}", ended.stdout);
}

/// Connections held open at once: far past the endpoint's handlers and queue (18), and well
/// under a default limit of 1024 open files.
const FLOOD: usize = 600;

#[test]
fn a_flood_of_the_metrics_endpoint_leaves_the_run_whole_and_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready.json");
    let report = dir.path().join("run.json");
    let mut receiver = Guard::spawn(kplace().args([
        "run",
        "--frames",
        "50",
        "--source",
        "udp://127.0.0.1:0",
        "--metrics",
        "127.0.0.1:0",
        "--ready-file",
        ready.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
        "--idle-timeout",
        "5s",
        // The stream starts only after the flood.
        "--start-timeout",
        "300s",
    ]));
    let udp = receiver.wait_ready(&ready, LIMIT)[0];
    let port = metrics_port(&mut receiver);
    // A 10 MB header line: the endpoint reads 8 KiB of it and closes, so it cannot be sent.
    let mut huge = TcpStream::connect(("127.0.0.1", port)).unwrap();
    huge.set_write_timeout(Some(LIMIT)).unwrap();
    let mut request = b"GET /metrics HTTP/1.1\r\nX-Huge: ".to_vec();
    request.resize(request.len() + 10 * 1024 * 1024, b'a');
    assert!(
        huge.write_all(&request).is_err(),
        "10 MB of header were read"
    );
    drop(huge);
    let flood: Vec<TcpStream> = (0..FLOOD)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).expect("the flood connects"))
        .collect();
    drop(flood);
    // The flood over, a scrape is served (the handlers may first close what it left queued).
    let mut tries = 0;
    loop {
        tries += 1;
        match try_get(port, "/metrics") {
            Some((status, text)) if status.contains("200") => {
                assert!(text.ends_with("# EOF\n"), "{text}");
                break;
            }
            other => assert!(tries < 200, "never served after the flood: {other:?}"),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let sender = Guard::spawn(kplace().args([
        "send",
        "--dest",
        &format!("127.0.0.1:{udp}"),
        "--frames",
        "50",
        "--rate",
        "100",
    ]));
    assert!(sender.wait(LIMIT).status.success());
    let ended = receiver.wait(LIMIT);
    assert!(ended.status.success(), "{}\n{}", ended.stdout, ended.stderr);
    assert!(
        ended.stdout.contains("verification PASSED: 50/50"),
        "{}",
        ended.stdout
    );
    let text = std::fs::read_to_string(&report).unwrap();
    let run: kplace::report::run::RunReport = kplace::report::read_json(&text, "run.json").unwrap();
    let counts = run
        .metrics_endpoint
        .expect("the report counts the endpoint");
    // Every connection made here, each ended in one outcome.
    let made = FLOOD as u64 + 1 + tries;
    assert_eq!(counts.connections, made, "{counts:?}");
    assert_eq!(counts.ended(), made, "{counts:?}");
    assert_eq!((counts.scrapes, counts.oversized), (1, 1), "{counts:?}");
    assert_eq!(
        counts.refused + counts.timed_out + counts.hung_up,
        FLOOD as u64 + tries - 1,
        "the flood and the scrapes refused: {counts:?}"
    );
    // The summary says it in a line, and the log said it as it happened.
    assert!(
        ended.stdout.contains(&format!(
            "metrics endpoint: {made} connections: 1 scrape answered, "
        )),
        "{}",
        ended.stdout
    );
    assert!(
        ended.stderr.contains(
            "kplace run: metrics endpoint: refused a request whose head was over 8192 bytes"
        ),
        "{}",
        ended.stderr
    );
}

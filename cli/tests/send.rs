//! The sender against a real UDP socket on loopback: every packet parses, ids are fresh and
//! consecutive, payloads are the prepared frames' bytes, faults do what they say, pacing never
//! sends early, and `kplace send` does the same from the command line.
//!
//! Traffic is kept small (tens of packets of a few hundred bytes per test) so that the
//! receiving socket's default buffer holds a whole burst. The sending thread is pinned to one
//! core, so loopback delivers in send order. No test asserts an upper bound on time.

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kplace::net::sender::{self, Faults, FrameCount, Pacing, SendError, SendReport, SenderConfig};
use kplace::net::wire::{self, HEADER_BYTES, Malformed, PacketHeader, WireShape};

const SHAPE: WireShape = WireShape::ci16(16, 8);

/// A received datagram.
struct Packet {
    bytes: Vec<u8>,
    truncated: bool,
}

impl Packet {
    fn classify(&self, shape: WireShape) -> Result<PacketHeader, Malformed> {
        wire::classify(
            PacketHeader::read_from(&self.bytes),
            self.bytes.len(),
            self.truncated,
            shape,
        )
    }

    fn payload(&self) -> &[u8] {
        &self.bytes[HEADER_BYTES..]
    }
}

fn receiver() -> (UdpSocket, SocketAddr) {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("bind a receiving socket");
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("set a read timeout");
    let addr = socket.local_addr().expect("local address");
    (socket, addr)
}

/// Receives exactly `count` datagrams, then checks that no more arrive.
fn receive(socket: &UdpSocket, count: usize, shape: WireShape) -> Vec<Packet> {
    let mut buf = vec![0u8; shape.packet_bytes() + 1];
    let mut packets = Vec::with_capacity(count);
    while packets.len() < count {
        let n = socket
            .recv(&mut buf)
            .unwrap_or_else(|e| panic!("received {} of {count} packets, then {e}", packets.len()));
        packets.push(Packet {
            bytes: buf[..n].to_vec(),
            truncated: n == buf.len(),
        });
    }
    socket
        .set_read_timeout(Some(Duration::from_millis(100)))
        .expect("set a read timeout");
    match socket.recv(&mut buf) {
        Ok(n) => panic!("an extra packet of {n} bytes after the expected {count}"),
        Err(e) => assert!(
            matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
            "{e}"
        ),
    }
    packets
}

/// Distinct, recognisable frames: byte `b` of frame `f` is `(f * 37 + b * 7) % 251`.
fn prepared(count: usize, shape: WireShape) -> Vec<Vec<u8>> {
    (0..count)
        .map(|f| {
            (0..shape.frame_bytes())
                .map(|b| ((f * 37 + b * 7) % 251) as u8)
                .collect()
        })
        .collect()
}

fn chirp_payload(frame: &[u8], chirp: u32, shape: WireShape) -> &[u8] {
    let size = shape.payload_bytes();
    &frame[chirp as usize * size..(chirp as usize + 1) * size]
}

fn config(dest: SocketAddr, pacing: Pacing, frames: FrameCount) -> SenderConfig {
    SenderConfig {
        dest,
        shape: SHAPE,
        pacing,
        frames,
        first_frame_id: 0,
        faults: Faults::default(),
        tick: Duration::ZERO,
    }
}

/// Runs the sender on a thread pinned to one core while this thread receives `count` packets.
fn exchange(
    frames: &[Vec<u8>],
    config: &SenderConfig,
    socket: &UdpSocket,
    count: usize,
) -> (SendReport, Vec<Packet>) {
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let sender = s.spawn(|| {
            pin_to_one_core();
            sender::send(frames, config, &stop)
        });
        let packets = receive(socket, count, config.shape);
        let report = sender
            .join()
            .expect("sender thread")
            .expect("send succeeds");
        (report, packets)
    })
}

fn pin_to_one_core() {
    if let Some(core) = kplace::os::CpuSet::allowed()
        .ok()
        .and_then(|s| s.cpus().first().copied())
    {
        let _ = kplace::os::pin_current_thread(core);
    }
}

#[test]
fn burst_sends_every_chirp_with_fresh_ids_and_the_prepared_bytes() {
    let (socket, dest) = receiver();
    let frames = prepared(3, SHAPE);
    let mut config = config(dest, Pacing::Burst, FrameCount::Frames(7));
    config.first_frame_id = u32::MAX - 2;
    let (report, packets) = exchange(&frames, &config, &socket, 7 * 8);

    assert_eq!(report.frames, 7);
    assert_eq!(report.packets, 56);
    assert_eq!(report.bytes, 56 * SHAPE.packet_bytes() as u64);
    assert!(!report.stopped);
    assert!(report.send_buffer > 0);
    assert!(report.syscalls >= 1 && report.syscalls <= report.packets);
    for (i, packet) in packets.iter().enumerate() {
        let header = packet.classify(SHAPE).expect("every packet is well formed");
        let (frame, chirp) = ((i / 8) as u32, (i % 8) as u32);
        // Fresh, consecutive ids, wrapping past u32::MAX, while the 3 prepared frames loop.
        assert_eq!(header.frame_id, config.first_frame_id.wrapping_add(frame));
        assert_eq!(header.packet_id, chirp);
        assert_eq!(header.channel_id, 0);
        assert!(packet.bytes[16..HEADER_BYTES].iter().all(|&b| b == 0));
        assert_eq!(
            packet.payload(),
            chirp_payload(&frames[frame as usize % 3], chirp, SHAPE)
        );
    }
    let ids: Vec<u32> = report.frame_starts.iter().map(|t| t.frame_id).collect();
    assert_eq!(ids, [u32::MAX - 2, u32::MAX - 1, u32::MAX, 0, 1, 2, 3]);
    for pair in report.frame_starts.windows(2) {
        assert!(pair[0].first_ns <= pair[0].last_ns);
        assert!(pair[0].first_ns <= pair[1].first_ns);
    }
}

#[test]
fn faults_drop_duplicate_reorder_and_corrupt_exactly_the_chirps_named() {
    let (socket, dest) = receiver();
    let frames = prepared(2, SHAPE);
    let mut config = config(dest, Pacing::Burst, FrameCount::Frames(5));
    config.first_frame_id = 100;
    config.faults.drop.insert((0, 1));
    config.faults.duplicate.insert((1, 2));
    config.faults.reorder.insert(2);
    for (chirp, kind) in Malformed::ALL.into_iter().enumerate() {
        config.faults.malformed.insert((3, chirp as u32), kind);
    }
    // 5 frames of 8, one dropped, one duplicated.
    let (report, packets) = exchange(&frames, &config, &socket, 40);
    assert_eq!(report.frames, 5);
    assert_eq!(report.packets, 40);

    let mut good: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    let mut bad = Vec::new();
    for packet in &packets {
        match packet.classify(SHAPE) {
            Ok(h) => {
                let frame = &frames[(h.frame_id - 100) as usize % 2];
                assert_eq!(packet.payload(), chirp_payload(frame, h.packet_id, SHAPE));
                good.entry(h.frame_id).or_default().push(h.packet_id);
            }
            Err(kind) => bad.push(kind),
        }
    }
    assert_eq!(good[&100], [0, 2, 3, 4, 5, 6, 7], "chirp 1 dropped");
    assert_eq!(good[&101], [0, 1, 2, 2, 3, 4, 5, 6, 7], "chirp 2 twice");
    assert_eq!(good[&102], [7, 6, 5, 4, 3, 2, 1, 0], "reversed");
    assert_eq!(good[&103], [4, 5, 6, 7], "chirps 0..4 malformed");
    assert_eq!(good[&104], [0, 1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(
        bad,
        Malformed::ALL,
        "each malformed packet under its own class"
    );
}

#[test]
fn paced_frames_are_spread_over_their_period_and_never_early() {
    let (socket, dest) = receiver();
    let frames = prepared(1, SHAPE);
    let rate = 400.0;
    let config = config(dest, Pacing::FrameRate(rate), FrameCount::Frames(4));
    let (report, packets) = exchange(&frames, &config, &socket, 32);

    assert_eq!(report.frames, 4);
    let order: Vec<(u32, u32)> = packets
        .iter()
        .map(|p| {
            let h = p.classify(SHAPE).expect("well formed");
            (h.frame_id, h.packet_id)
        })
        .collect();
    let want: Vec<(u32, u32)> = (0..4).flat_map(|f| (0..8).map(move |k| (f, k))).collect();
    assert_eq!(order, want);

    // No packet leaves before its deadline: each frame's first packet at or after the frame's
    // start, its last at or after its last slot, 7/8 of a period later.
    let slot_ns = 1e9 / rate / 8.0;
    assert_eq!(report.frame_starts.len(), 4);
    for (f, t) in report.frame_starts.iter().enumerate() {
        let first_due = report.start_ns + (f as f64 * 8.0 * slot_ns) as u64;
        let last_due = report.start_ns + ((f * 8 + 7) as f64 * slot_ns) as u64;
        assert!(t.first_ns >= first_due, "frame {f} started early: {t:?}");
        assert!(t.last_ns >= last_due, "frame {f} ended early: {t:?}");
        assert!(t.last_ns > t.first_ns);
    }
}

#[test]
fn chirp_interval_pacing_and_a_duration_give_a_deterministic_count() {
    let (socket, dest) = receiver();
    let frames = prepared(2, SHAPE);
    // 8 chirps of 125 us: a 1 ms period, so frames start at 0, 1, 2 ms within 2.5 ms.
    let config = config(
        dest,
        Pacing::PacketInterval(Duration::from_micros(125)),
        FrameCount::Duration(Duration::from_micros(2500)),
    );
    let (report, packets) = exchange(&frames, &config, &socket, 24);
    assert_eq!(report.frames, 3);
    assert_eq!(report.packets, 24);
    for (i, p) in packets.iter().enumerate() {
        let h = p.classify(SHAPE).expect("well formed");
        assert_eq!((h.frame_id, h.packet_id), ((i / 8) as u32, (i % 8) as u32));
    }
    let last = report.frame_starts.last().expect("three frames");
    assert!(last.last_ns >= report.start_ns + 23 * 125_000);
}

#[test]
fn the_stop_flag_ends_a_run_early() {
    let (socket, dest) = receiver();
    let frames = prepared(1, SHAPE);
    // Already set: nothing is sent.
    let stop = AtomicBool::new(true);
    let config = config(dest, Pacing::Burst, FrameCount::Frames(10));
    let report = sender::send(&frames, &config, &stop).expect("send");
    assert!(report.stopped);
    assert_eq!((report.frames, report.packets), (0, 0));

    // Set mid-run: a 10 CPI/s run of 1000 frames ends after the first packet arrives.
    let config = SenderConfig {
        pacing: Pacing::FrameRate(10.0),
        frames: FrameCount::Frames(1000),
        ..config
    };
    let stop = AtomicBool::new(false);
    let report = std::thread::scope(|s| {
        let sender = s.spawn(|| sender::send(&frames, &config, &stop));
        let mut buf = vec![0u8; SHAPE.packet_bytes()];
        socket.recv(&mut buf).expect("a first packet");
        stop.store(true, Ordering::Relaxed);
        sender.join().expect("sender thread").expect("send")
    });
    assert!(report.stopped);
    assert!(report.frames < 1000);
    assert!(report.packets >= 1 && report.packets < 8000);
}

#[test]
fn an_invalid_configuration_fails_before_sending() {
    let (_socket, dest) = receiver();
    let stop = AtomicBool::new(false);
    let config = config(dest, Pacing::Burst, FrameCount::Frames(1));
    let short = vec![vec![0u8; SHAPE.frame_bytes() - 1]];
    assert!(matches!(
        sender::send(&short, &config, &stop),
        Err(SendError::FrameSize { index: 0, .. })
    ));
    let mut config = config;
    config.faults.drop.insert((0, 8));
    assert!(matches!(
        sender::send(&prepared(1, SHAPE), &config, &stop),
        Err(SendError::FaultOutOfRange { packet: 8, .. })
    ));
}

/// `kplace ARGS` in the workspace, where the default graph (`workloads/radar/graph.yaml`) is.
fn kplace(args: &[&str]) -> Output {
    kplace_testkit::output(
        Command::new(env!("CARGO_BIN_EXE_kplace"))
            .args(args)
            .current_dir(kplace_testkit::workspace()),
    )
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The scene's frame `frame` at 256x16 as wire payload bytes (chirp-major ci16 LE).
fn scene_bytes(frame: u64) -> Vec<u8> {
    let cpi: kplace_radar::Cpi = "256x16".parse().expect("cpi");
    let scene = kplace_radar::Scene::new(kplace_radar::SceneConfig::new(cpi)).expect("scene");
    scene.frame_bytes(frame).expect("generate")
}

#[test]
fn cli_sends_a_scene_burst() {
    let (socket, dest) = receiver();
    let shape = WireShape::ci16(256, 16);
    let dest = dest.to_string();
    let out = kplace(&[
        "send", "--dest", &dest, "--frames", "3", "--burst", "--cpi", "256x16",
    ]);
    assert!(out.status.success(), "kplace send failed:\n{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("sent 3 frames, 48 packets"), "{stdout}");
    let packets = receive(&socket, 48, shape);
    let scene: Vec<Vec<u8>> = (0..3).map(scene_bytes).collect();
    for (i, p) in packets.iter().enumerate() {
        let h = p.classify(shape).expect("well formed");
        let (frame, chirp) = ((i / 16) as u32, (i % 16) as u32);
        assert_eq!((h.frame_id, h.packet_id), (frame, chirp));
        assert_eq!(
            p.payload(),
            chirp_payload(&scene[frame as usize], chirp, shape)
        );
    }
}

#[test]
fn cli_injects_faults_and_writes_send_times() {
    let (socket, dest) = receiver();
    let shape = WireShape::ci16(256, 16);
    let dir = tempfile::tempdir().expect("tempdir");
    let times = dir.path().join("times.csv");
    let dest = dest.to_string();
    let out = kplace(&[
        "send",
        "--dest",
        &dest,
        "--cpi",
        "256x16",
        "--frames",
        "2",
        "--rate",
        "500",
        "--first-frame-id",
        "40",
        "--drop",
        "0:3",
        "--duplicate",
        "1:0",
        "--malformed",
        "1:5:packet_out_of_range",
        "--times",
        times.to_str().expect("utf-8 path"),
    ]);
    assert!(out.status.success(), "kplace send failed:\n{}", text(&out));
    let packets = receive(&socket, 32, shape);
    let bad: Vec<Malformed> = packets
        .iter()
        .filter_map(|p| p.classify(shape).err())
        .collect();
    assert_eq!(bad, [Malformed::PacketOutOfRange]);
    let ids: Vec<(u32, u32)> = packets
        .iter()
        .filter_map(|p| p.classify(shape).ok())
        .map(|h| (h.frame_id, h.packet_id))
        .collect();
    assert_eq!(ids.len(), 31);
    assert!(!ids.contains(&(40, 3)));
    assert_eq!(ids.iter().filter(|&&id| id == (41, 0)).count(), 2);

    let csv = std::fs::read_to_string(&times).expect("times file");
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], "frame_id,first_ns,last_ns");
    assert_eq!(lines.len(), 3, "{csv}");
    for (line, id) in lines[1..].iter().zip([40, 41]) {
        let fields: Vec<u64> = line
            .split(',')
            .map(|f| f.parse().expect("a number"))
            .collect();
        assert_eq!(fields.len(), 3);
        assert_eq!(fields[0], id);
        assert!(fields[1] <= fields[2]);
    }
}

/// `--report` says how well the schedule was kept, and at which nice value the sender ran
/// (raising it needs no privilege, so the asked value is the one reported).
#[test]
fn cli_reports_its_schedule_and_priority() {
    let (socket, dest) = receiver();
    let shape = WireShape::ci16(256, 16);
    let dir = tempfile::tempdir().expect("tempdir");
    let report = dir.path().join("send.json");
    let dest = dest.to_string();
    let out = kplace(&[
        "send",
        "--dest",
        &dest,
        "--cpi",
        "256x16",
        "--frames",
        "3",
        "--rate",
        "200",
        "--nice",
        "5",
        "--report",
        report.to_str().expect("utf-8 path"),
    ]);
    assert!(out.status.success(), "kplace send failed:\n{}", text(&out));
    receive(&socket, 48, shape);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).expect("a report")).unwrap();
    assert_eq!(json["schema"], "kplace-send-report/2");
    assert_eq!(
        (json["frames"].as_u64(), json["packets"].as_u64()),
        (Some(3), Some(48))
    );
    assert_eq!(json["nice"], 5, "{json}");
    for key in [
        "max_lag_ms",
        "max_oversleep_ms",
        "elapsed_s",
        "frames_per_s",
    ] {
        let v = json[key].as_f64().unwrap_or(-1.0);
        assert!(v >= 0.0 && v.is_finite(), "{key}: {json}");
    }
    assert!(json["involuntary_switches"].as_u64().is_some(), "{json}");
    assert_eq!(json["stopped"], false);
    // A report that cannot be written is refused before anything is sent.
    let out = kplace(&[
        "send",
        "--dest",
        &dest,
        "--cpi",
        "256x16",
        "--frames",
        "1",
        "--report",
        "Cargo.toml/dir/send.json",
    ]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("cannot create the send report file Cargo.toml/dir/send.json"),
        "{}",
        text(&out)
    );
}

#[test]
fn cli_refuses_bad_options() {
    for (args, want) in [
        (&["send", "--dest", "nowhere"][..], "--dest"),
        (&["send", "--dest", "127.0.0.1:0"][..], "port 0"),
        (
            &["send", "--dest", "127.0.0.1:9", "--nice", "40"][..],
            "--nice",
        ),
        (
            &["send", "--dest", "127.0.0.1:9", "--burst", "--rate", "10"][..],
            "cannot be used with",
        ),
        (
            &["send", "--dest", "127.0.0.1:9", "--malformed", "0:1:bogus"][..],
            "wrong_size",
        ),
        (
            &[
                "send",
                "--dest",
                "127.0.0.1:9",
                "--cpi",
                "256x16",
                "--drop",
                "0:16",
            ][..],
            "packets 0..16",
        ),
    ] {
        let out = kplace(args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "kplace {args:?}:\n{}",
            text(&out)
        );
        assert!(
            text(&out).contains(want),
            "kplace {args:?} lacks {want:?}:\n{}",
            text(&out)
        );
    }
}

#[test]
fn a_pacing_tick_sends_everything_late_never_early() {
    // With a tick the sender sleeps between wake-ups instead of spinning: every packet still
    // goes out, and none before its deadline.
    let receiver = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    receiver
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let mut config = config(
        receiver.local_addr().unwrap(),
        Pacing::FrameRate(200.0),
        FrameCount::Frames(3),
    );
    config.tick = Duration::from_micros(200);
    let frames = prepared(1, SHAPE);
    let report = sender::send(&frames, &config, &AtomicBool::new(false)).unwrap();
    let chirps = SHAPE.packets;
    assert_eq!(report.packets, 3 * u64::from(chirps));
    let mut buf = vec![0u8; 1 << 16];
    let mut got = Vec::new();
    for _ in 0..3 * chirps {
        let n = receiver.recv(&mut buf).unwrap();
        let header = kplace::net::wire::PacketHeader::read_from(&buf[..n]).unwrap();
        got.push((header.frame_id, header.packet_id));
    }
    got.sort_unstable();
    let want: Vec<(u32, u32)> = (0..3)
        .flat_map(|f| (0..chirps).map(move |c| (f, c)))
        .collect();
    assert_eq!(got, want, "every packet, once");
    // Never early: the whole run takes at least the schedule's length (3 frames at 200/s,
    // the last chirp due one slot before 15 ms).
    let last_due = Duration::from_micros(15_000 - 5_000 / u64::from(chirps));
    assert!(report.elapsed >= last_due, "{:?}", report.elapsed);
}

/// An explicit --scene-frames whose prepared frames exceed the 256 MiB budget is refused
/// before anything is prepared or sent (it grew without limit), naming the option, the bytes
/// and the most this CPI allows.
#[test]
fn cli_refuses_scene_frames_beyond_the_budget() {
    let (socket, dest) = receiver();
    let dest = dest.to_string();
    let mut command = Command::new(env!("CARGO_BIN_EXE_kplace"));
    command
        .current_dir(kplace_testkit::workspace())
        .args([
            "send",
            "--dest",
            &dest,
            "--frames",
            "10",
            "--burst",
            "--scene-frames",
            "100000000",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let out = kplace_testkit::output_within(&mut command, Duration::from_secs(60), None);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = text(&out);
    assert!(
        err.contains("--scene-frames 100000000")
            && err.contains("52428800000000 bytes")
            && err.contains("at most 512 for this CPI"),
        "{err}"
    );
    socket
        .set_read_timeout(Some(Duration::from_millis(100)))
        .expect("set a read timeout");
    assert!(
        socket.recv(&mut [0u8; 64]).is_err(),
        "nothing may be sent after the refusal"
    );
}

/// SIGINT ends a send after its current batch, with its summary and exit status 0, whatever
/// was left of its duration: the runtime's stop mechanism, which every kplace command uses.
#[test]
fn a_signal_ends_a_send_early_with_its_summary() {
    let (_socket, dest) = receiver();
    let dest = dest.to_string();
    let mut child = kplace_testkit::Guard::spawn(
        Command::new(env!("CARGO_BIN_EXE_kplace"))
            .current_dir(kplace_testkit::workspace())
            .args(["send", "--dest", &dest, "--cpi", "256x16", "--rate", "20"])
            .args(["--duration", "600"]),
    );
    child.wait_stderr("distinct frames of", Duration::from_secs(60));
    // The handler is installed right after that line.
    std::thread::sleep(Duration::from_millis(500));
    child.signal("INT");
    let ended = child.wait(Duration::from_secs(30));
    assert_eq!(ended.status.code(), Some(0), "{}", ended.stderr);
    assert!(
        ended.stdout.starts_with("sent ") && ended.stdout.contains("frames"),
        "{}",
        ended.stdout
    );
}

use super::cursor::Planned;
use super::pacing::TIMER_SLACK;
use super::*;
use crate::wire::Malformed;

fn config(packets: u32, frames: FrameCount, pacing: Pacing, faults: Faults) -> SenderConfig {
    SenderConfig {
        dest: "127.0.0.1:9".parse().expect("address"),
        shape: WireShape::ci16(2, packets),
        pacing,
        frames,
        first_frame_id: u32::MAX - 1,
        faults,
        tick: Duration::ZERO,
    }
}

fn walk<'a>(frames: &'a [Vec<u8>], config: &'a SenderConfig) -> (Vec<Planned<'a>>, u64) {
    let clock = validate(frames, config).expect("valid");
    let mut cursor = Cursor::new(frames, config, clock);
    let mut out = Vec::new();
    while let Some(p) = cursor.peek(0) {
        assert_eq!(cursor.peek(0).map(|q| q.header), Some(p.header));
        out.push(p);
        cursor.advance();
    }
    (out, cursor.frames_done())
}

fn frames(count: u8, packets: u32) -> Vec<Vec<u8>> {
    (0..count).map(|f| vec![f; 8 * packets as usize]).collect()
}

#[test]
fn plain_run_wraps_ids_and_cycles_frames() {
    let c = config(3, FrameCount::Frames(4), Pacing::Burst, Faults::default());
    let prepared = frames(2, 3);
    let (packets, done) = walk(&prepared, &c);
    assert_eq!(done, 4);
    assert_eq!(packets.len(), 12);
    let ids: Vec<(u32, u32)> = packets
        .iter()
        .map(|p| (p.header.frame_id, p.header.packet_id))
        .collect();
    assert_eq!(
        ids[..4],
        [
            (u32::MAX - 1, 0),
            (u32::MAX - 1, 1),
            (u32::MAX - 1, 2),
            (u32::MAX, 0)
        ]
    );
    assert_eq!(ids[6..8], [(0, 0), (0, 1)]);
    assert_eq!(packets[9].payload, &[1u8; 8][..]);
    assert!(packets.iter().all(|p| p.offset_ns == 0));
}

#[test]
fn faults_shape_the_packet_sequence() {
    let mut faults = Faults::default();
    faults.drop.insert((0, 1));
    faults.duplicate.insert((0, 2));
    faults.reorder.insert(1);
    faults.malformed.insert((1, 0), Malformed::WrongSize);
    faults.duplicate.insert((1, 0));
    // Every packet of frame 2 dropped: the frame sends nothing but still counts.
    for k in 0..3 {
        faults.drop.insert((2, k));
    }
    let c = config(
        3,
        FrameCount::Frames(4),
        Pacing::PacketInterval(Duration::from_nanos(10)),
        faults,
    );
    let prepared = frames(1, 3);
    let (packets, done) = walk(&prepared, &c);
    assert_eq!(done, 4);
    let seq: Vec<(u64, u32, u64, usize)> = packets
        .iter()
        .map(|p| (p.frame, p.header.packet_id, p.offset_ns, p.payload.len()))
        .collect();
    assert_eq!(
        seq,
        [
            (0, 0, 0, 8),
            (0, 2, 20, 8),
            (0, 2, 20, 8),
            (1, 2, 30, 8),
            (1, 1, 40, 8),
            (1, 0, 50, 4),
            (1, 0, 50, 4),
            (3, 0, 90, 8),
            (3, 1, 100, 8),
            (3, 2, 110, 8),
        ]
    );
}

#[test]
fn paced_duration_counts_frames_starting_within_it() {
    let c = config(
        4,
        FrameCount::Duration(Duration::from_millis(5)),
        Pacing::FrameRate(1000.0),
        Faults::default(),
    );
    let prepared = frames(1, 4);
    let (packets, done) = walk(&prepared, &c);
    assert_eq!(done, 5);
    assert_eq!(packets.len(), 20);
    assert_eq!(packets[5].offset_ns, 1_250_000);
}

#[test]
fn invalid_configurations_are_refused() {
    let f = frames(1, 3);
    let mut c = config(
        3,
        FrameCount::Frames(1),
        Pacing::FrameRate(0.0),
        Faults::default(),
    );
    assert!(matches!(validate(&f, &c), Err(SendError::Rate(_))));
    c.pacing = Pacing::Burst;
    assert!(matches!(validate(&[], &c), Err(SendError::NoFrames)));
    assert!(matches!(
        validate(&frames(1, 2), &c),
        Err(SendError::FrameSize { expected: 24, .. })
    ));
    c.faults.duplicate.insert((5, 3));
    assert!(matches!(
        validate(&f, &c),
        Err(SendError::FaultOutOfRange {
            fault: "duplicate",
            packet: 3,
            ..
        })
    ));
    c.faults = Faults::default();
    c.shape.elements = 20_000;
    assert!(matches!(
        validate(&f, &c),
        Err(SendError::PacketTooLarge { .. })
    ));
    c.shape.elements = 0;
    assert!(matches!(validate(&f, &c), Err(SendError::Shape { .. })));
    c.shape.elements = 2;
    c.dest.set_port(0);
    assert!(matches!(validate(&f, &c), Err(SendError::DestPort(_))));
}

#[test]
fn the_pacing_thread_asks_for_precise_sleeps() {
    std::thread::spawn(|| {
        let slack = || nix::sys::prctl::get_timerslack().expect("PR_GET_TIMERSLACK") as u128;
        precise_sleeps();
        assert_eq!(slack(), TIMER_SLACK.as_nanos());
    })
    .join()
    .expect("the check ran");
}

/// Every packet reaches the destination, IPv4 or IPv6, header and payload intact: the address
/// and gather vectors `sendmmsg` is given are right.
#[test]
fn packets_reach_an_ipv4_or_ipv6_destination_whole() {
    for bind in ["127.0.0.1:0", "[::1]:0"] {
        let Ok(receiver) = std::net::UdpSocket::bind(bind) else {
            println!("skipped {bind}: no such loopback here");
            continue;
        };
        receiver
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let mut c = config(4, FrameCount::Frames(2), Pacing::Burst, Faults::default());
        c.dest = receiver.local_addr().expect("address");
        c.first_frame_id = 7;
        let prepared = frames(2, 4);
        let report = send(&prepared, &c, &AtomicBool::new(false)).expect("sent");
        assert_eq!((report.frames, report.packets), (2, 8));
        let mut buf = [0u8; 256];
        for n in 0..8u32 {
            let (len, _) = receiver.recv_from(&mut buf).expect("a packet");
            assert_eq!(len, HEADER_BYTES + 8, "{bind}");
            let header = crate::wire::classify(
                crate::wire::PacketHeader::read_from(&buf[..len]),
                len,
                false,
                c.shape,
            )
            .expect("a well-formed packet");
            assert_eq!(
                (header.frame_id, header.packet_id),
                (7 + n / 4, n % 4),
                "{bind}"
            );
            assert_eq!(&buf[HEADER_BYTES..len], &[(n / 4) as u8; 8], "{bind}");
        }
    }
}

#[test]
fn a_send_is_printed_and_timed() {
    let report = SendReport {
        frames: 2,
        packets: 256,
        bytes: 1_000_000,
        elapsed: Duration::from_millis(20),
        max_lag: Duration::from_micros(1500),
        max_oversleep: Duration::from_micros(250),
        involuntary_switches: 3,
        frame_starts: vec![
            FrameTimes {
                frame_id: 7,
                first_ns: 100,
                last_ns: 200,
            },
            FrameTimes {
                frame_id: 8,
                first_ns: 300,
                last_ns: 400,
            },
        ],
        start_ns: 50,
        send_buffer: 8 << 20,
        syscalls: 4,
        stopped: false,
    };
    let line = report.summary("127.0.0.1:9000".parse().unwrap());
    assert!(
        line.starts_with(
            "sent 2 frames, 256 packets, 1.0 MB to 127.0.0.1:9000 in 0.020 s: 100.0 frames/s"
        ) && line.ends_with("4 sendmmsg calls, send buffer 8192 KiB"),
        "{line}"
    );
    let mut csv = Vec::new();
    report.write_times(&mut csv).unwrap();
    assert_eq!(
        String::from_utf8(csv).unwrap(),
        "frame_id,first_ns,last_ns\n7,100,200\n8,300,400\n"
    );
    assert_eq!(Pacing::FrameRate(250.5).to_string(), "250.5 frames/s");
    assert_eq!(
        Pacing::PacketInterval(Duration::from_micros(50)).to_string(),
        "a packet every 50.000 us"
    );
    assert_eq!(FrameCount::Frames(9).to_string(), "9 frames");
    assert_eq!(
        FrameCount::Duration(Duration::from_millis(1500)).to_string(),
        "for 1.500 s"
    );
}

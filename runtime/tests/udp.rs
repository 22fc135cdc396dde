//! The radar graph on a real packet stream over loopback: `kplace::net::sender` sends, the UDP
//! receiver assembles, the CPU library processes, the verifier checks. Faults (loss,
//! duplicates, reordering, malformed packets) are injected by the sender and must be counted
//! exactly while every other frame verifies; a sender far faster than the pipeline must end
//! in counted drops, never a wedge.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::num::NonZeroU64;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use kplace::abi::RecordList;
use kplace::executor::{self, CompletedFrame, FrameSink, PartialFrame, SinkError};
use kplace::executor::{BeginError, PacketStatus};
use kplace::model::graph::{Graph, Overrides};
use kplace::model::placement::Placement;
use kplace::net::sender::{self, Faults, FrameCount, Pacing, SenderConfig};
use kplace::net::udp::{Assembly, FrameBuffers, UdpConfig, UdpSource};
use kplace::net::wire::{Malformed, WireShape};
use kplace::plan::Plan;
use kplace_radar::{Cluster, Cpi, Scene, SceneConfig, Verifier, VerifyConfig};

const CPI: Cpi = Cpi {
    samples: 1024,
    chirps: 128,
};
const SHAPE: WireShape = WireShape::ci16(1024, 128);

fn plan(slots: usize, workers: usize) -> Plan {
    let root = kplace_testkit::workspace();
    let overrides = Overrides {
        dims: vec![
            ("N".into(), CPI.samples as u64),
            ("M".into(), CPI.chirps as u64),
        ],
        params: Vec::new(),
    };
    let graph = Graph::load(&root.join("workloads/radar/graph.yaml"), &overrides).unwrap();
    let text = format!(
        "name: t\nlibraries: {{cpu: {}}}\nstages: {{range_fft: cpu, doppler_fft: cpu, cfar: cpu, cluster: cpu}}\nruntime: {{slots: {slots}, workers: {workers}}}\n",
        kplace_testkit::cpu_library().display()
    );
    Plan::new(graph, Placement::parse(&text, Path::new("t.yaml")).unwrap()).unwrap()
}

fn scene_frames(scene: &Scene, count: u64) -> Vec<Vec<u8>> {
    (0..count).map(|f| scene.frame_bytes(f).unwrap()).collect()
}

/// Verifies complete frames, records partial ones.
struct Check {
    verifier: Verifier,
    complete: Vec<u64>,
    partial: Vec<u64>,
}

impl FrameSink for Check {
    fn frame(&mut self, frame: &CompletedFrame<'_>) -> Result<(), SinkError> {
        let list =
            RecordList::parse(frame.sink(0)).map_err(|e| SinkError::failed(e.to_string()))?;
        let clusters: Vec<Cluster> = list
            .records()
            .map(kplace_radar::Detection::from_record)
            .map(|d| Cluster {
                range_bin: d.range_bin,
                doppler_bin: d.doppler_bin,
                power: d.power,
            })
            .collect();
        let verdict = self.verifier.check(frame.frame_id, &clusters);
        if !verdict.passed() {
            return Err(SinkError::failed(format!(
                "frame {} failed verification: {verdict:?}",
                frame.frame_id
            )));
        }
        self.complete.push(frame.frame_id);
        Ok(())
    }

    fn partial(&mut self, frame: &PartialFrame) -> Result<(), SinkError> {
        self.partial.push(frame.frame_id);
        Ok(())
    }
}

struct Outcome {
    check: Check,
    counters: kplace::net::udp::IngestCounters,
    report: kplace::report::metrics::RunMetrics,
}

/// Loopback streams run one at a time: two in parallel on a two-core machine would starve
/// each other's pipelines and turn paced runs into drops.
static SERIAL: Mutex<()> = Mutex::new(());

/// Runs `frames` frames through sender -> receiver -> pipeline.
fn stream(frames: u64, pacing: Pacing, faults: Faults, slots: usize) -> Outcome {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let scene = Scene::new(SceneConfig::new(CPI)).unwrap();
    let prepared = scene_frames(&scene, 4);
    let plan = plan(slots, 1);
    let mut config = UdpConfig::new("127.0.0.1:0".parse().unwrap(), SHAPE);
    config.frames = Some(frames);
    config.idle_timeout = Duration::from_millis(500);
    let mut source = UdpSource::bind(config).unwrap();
    let dest: SocketAddr = source.local_addr().unwrap();
    let mut check = Check {
        verifier: Verifier::new(scene, VerifyConfig::for_cpi(CPI, 1e-6), frames)
            .with_template_period(NonZeroU64::new(4).unwrap()),
        complete: Vec::new(),
        partial: Vec::new(),
    };
    let send_config = SenderConfig {
        dest,
        shape: SHAPE,
        pacing,
        frames: FrameCount::Frames(frames),
        first_frame_id: 0,
        faults,
        tick: Duration::ZERO,
    };
    let stop = AtomicBool::new(false);
    let report = std::thread::scope(|s| {
        let sender = s.spawn(|| sender::send(&prepared, &send_config, &stop));
        let report = executor::run(&plan, &mut source, &mut check);
        sender.join().unwrap().unwrap();
        report.unwrap()
    });
    Outcome {
        check,
        counters: source.counters().clone(),
        report,
    }
}

#[test]
fn a_paced_stream_is_verified_frame_by_frame() {
    // 100 CPI/s: far below what even a debug build sustains.
    let out = stream(30, Pacing::FrameRate(100.0), Faults::default(), 4);
    assert_eq!(out.check.complete, (0..30).collect::<Vec<_>>());
    assert!(out.check.partial.is_empty());
    let summary = out.check.verifier.summary();
    assert!(summary.passed(out.check.verifier.config()), "{summary:?}");
    assert_eq!(out.counters.accepted, 30 * 128);
    assert_eq!(out.counters.complete_frames, 30);
    assert_eq!(
        out.counters.duplicates + out.counters.late + out.counters.dropped_packets,
        0
    );
    assert!(out.counters.in_place > 0, "in-order chirps land in place");
    assert_eq!(
        out.report.post_frame.count, 30,
        "latency recorded for every frame"
    );
}

#[test]
fn loss_duplicates_reordering_and_malformed_packets_are_counted_exactly() {
    let faults = Faults {
        drop: BTreeSet::from([(3, 5), (7, 0), (7, 127), (12, 64)]),
        duplicate: BTreeSet::from([(2, 9), (9, 100), (9, 101)]),
        reorder: BTreeSet::from([4, 10]),
        malformed: BTreeMap::from([
            ((5, 17), Malformed::WrongSize),
            ((6, 3), Malformed::WrongElements),
            ((8, 40), Malformed::PacketOutOfRange),
            ((11, 2), Malformed::WrongChannel),
        ]),
    };
    let out = stream(16, Pacing::FrameRate(100.0), faults, 4);
    // A dropped or malformed chirp leaves its frame partial; every other frame verifies.
    let partial = vec![3, 5, 6, 7, 8, 11, 12];
    assert_eq!(out.check.partial, partial);
    let complete: Vec<u64> = (0..16).filter(|f| !partial.contains(f)).collect();
    assert_eq!(out.check.complete, complete);
    assert_eq!(out.report.partial_frames, 7);
    let c = &out.counters;
    assert_eq!(c.duplicates, 3);
    for class in Malformed::ALL {
        assert_eq!(c.malformed(class), 1, "{class:?}");
    }
    assert_eq!(c.accepted, 16 * 128 - 4 - 4);
    assert_eq!((c.complete_frames, c.partial_frames), (9, 7));
}

#[test]
fn a_sender_far_faster_than_the_pipeline_ends_in_counted_drops() {
    // Bursting 300 frames into 2 slots: most must be dropped whole, none may wedge the run.
    let out = stream(300, Pacing::Burst, Faults::default(), 2);
    let c = &out.counters;
    let accounted =
        out.check.complete.len() as u64 + out.check.partial.len() as u64 + c.dropped_frames;
    assert!(
        c.dropped_frames > 0 || c.partial_frames > 0,
        "a burst overruns two slots: {c:?}"
    );
    assert!(accounted <= 300, "{c:?}");
    // Everything that completed verified (the sink fails the run otherwise), in order.
    assert!(out.check.complete.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(out.report.dropped_frames, c.dropped_frames);
    // Memory stays bounded: nothing grows with the frame count but the counters.
    assert_eq!(out.report.frames, out.check.complete.len() as u64);
}

#[test]
fn ingest_only_assembles_every_frame() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let scene = Scene::new(SceneConfig::new(CPI)).unwrap();
    let prepared = scene_frames(&scene, 2);
    let mut config = UdpConfig::new("127.0.0.1:0".parse().unwrap(), SHAPE);
    config.frames = Some(50);
    config.first_frame_id = 7;
    config.idle_timeout = Duration::from_millis(500);
    let mut source = UdpSource::bind(config).unwrap();
    let send_config = SenderConfig {
        dest: source.local_addr().unwrap(),
        shape: SHAPE,
        pacing: Pacing::FrameRate(500.0),
        frames: FrameCount::Frames(50),
        first_frame_id: 7,
        faults: Faults::default(),
        tick: Duration::ZERO,
    };
    let stop = AtomicBool::new(false);
    let mut buffers = FrameBuffers::new(4, 128, SHAPE.payload_bytes()).unwrap();
    std::thread::scope(|s| {
        let sender = s.spawn(|| sender::send(&prepared, &send_config, &stop));
        source.receive(&mut buffers, SHAPE.payload_bytes()).unwrap();
        sender.join().unwrap().unwrap();
    });
    let c = source.counters();
    assert_eq!(c.complete_frames, 50, "{c:?}");
    assert!(
        c.receiving > Duration::ZERO && c.receiving < Duration::from_secs(60),
        "{c:?}"
    );
    assert_eq!(
        (c.partial_frames, c.unexpected, c.malformed),
        (0, 0, [0; 4])
    );
}

/// Plain buffers whose first packet holds the receiver up for `stall`, as a receiver thread
/// descheduled mid-frame on a busy machine is.
struct StallingBuffers {
    inner: FrameBuffers,
    stall: Option<Duration>,
}

impl Assembly for StallingBuffers {
    type Frame = <FrameBuffers as Assembly>::Frame;
    fn capacity(&self) -> usize {
        self.inner.capacity()
    }
    fn try_begin(&mut self, frame_id: u64) -> Result<Self::Frame, BeginError> {
        self.inner.try_begin(frame_id)
    }
    fn id(frame: &Self::Frame) -> u64 {
        FrameBuffers::id(frame)
    }
    fn place(&self, frame: &Self::Frame, index: u64) -> Option<*mut u8> {
        self.inner.place(frame, index)
    }
    fn done(&mut self, frame: &Self::Frame, index: u64) -> PacketStatus {
        if let Some(stall) = self.stall.take() {
            std::thread::sleep(stall);
        }
        self.inner.done(frame, index)
    }
    fn received(&self, frame: &Self::Frame) -> u64 {
        self.inner.received(frame)
    }
    fn finish(&mut self, frame: Self::Frame) -> bool {
        self.inner.finish(frame)
    }
    fn stopping(&self) -> bool {
        self.inner.stopping()
    }
}

/// Packets that arrived while the receiver was held up, for longer than the frame timeout,
/// wait in the socket: their frames complete; none ends as partial.
#[test]
fn a_receiver_held_up_past_the_frame_timeout_loses_no_frame() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let scene = Scene::new(SceneConfig::new(CPI)).unwrap();
    let prepared = scene_frames(&scene, 3);
    let mut config = UdpConfig::new("127.0.0.1:0".parse().unwrap(), SHAPE);
    config.frames = Some(3);
    config.idle_timeout = Duration::from_millis(500);
    let frame_timeout = config.frame_timeout;
    let mut source = UdpSource::bind(config).unwrap();
    // Every packet is in the socket before the receiver reads one: 3 frames of 128 chirps.
    let send_config = SenderConfig {
        dest: source.local_addr().unwrap(),
        shape: SHAPE,
        pacing: Pacing::Burst,
        frames: FrameCount::Frames(3),
        first_frame_id: 0,
        faults: Faults::default(),
        tick: Duration::ZERO,
    };
    sender::send(&prepared, &send_config, &AtomicBool::new(false)).unwrap();
    let mut store = StallingBuffers {
        inner: FrameBuffers::new(4, 128, SHAPE.payload_bytes()).unwrap(),
        stall: Some(frame_timeout * 3),
    };
    source.receive(&mut store, SHAPE.payload_bytes()).unwrap();
    let c = source.counters();
    assert_eq!(
        (c.complete_frames, c.partial_frames, c.late, c.accepted),
        (3, 0, 0, 3 * 128),
        "{c:?}"
    );
}

#[test]
fn arbitrary_datagrams_are_counted_and_never_disturb_valid_frames() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let scene = Scene::new(SceneConfig::new(CPI)).unwrap();
    let prepared = scene_frames(&scene, 1);
    let mut config = UdpConfig::new("127.0.0.1:0".parse().unwrap(), SHAPE);
    config.frames = Some(3);
    config.idle_timeout = Duration::from_millis(500);
    let mut source = UdpSource::bind(config).unwrap();
    let dest = source.local_addr().unwrap();
    let mut buffers = FrameBuffers::new(4, 128, SHAPE.payload_bytes()).unwrap();
    let garbage = 600u64;
    std::thread::scope(|s| {
        s.spawn(|| {
            let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            let mut x = 0x2545_F491_4F6C_DD1Du64;
            let mut next = move || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            };
            let mut datagram = vec![0u8; SHAPE.packet_bytes() + 64];
            for i in 0..garbage {
                // Random lengths, a third of them exactly a packet's, every byte random.
                let len = if i % 3 == 0 {
                    SHAPE.packet_bytes()
                } else {
                    (next() % datagram.len() as u64) as usize
                };
                for b in &mut datagram[..len] {
                    *b = next() as u8;
                }
                socket.send_to(&datagram[..len], dest).unwrap();
                if i % 50 == 0 {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            let send_config = SenderConfig {
                dest,
                shape: SHAPE,
                pacing: Pacing::FrameRate(200.0),
                frames: FrameCount::Frames(3),
                first_frame_id: 0,
                faults: Faults::default(),
                tick: Duration::ZERO,
            };
            sender::send(&prepared, &send_config, &AtomicBool::new(false)).unwrap();
        });
        source.receive(&mut buffers, SHAPE.payload_bytes()).unwrap();
    });
    let c = source.counters();
    assert_eq!(c.complete_frames, 3, "{c:?}");
    assert_eq!(c.accepted, 3 * 128, "{c:?}");
    assert_eq!(
        c.classified() - c.accepted,
        garbage,
        "every random datagram is counted as refused: {c:?}"
    );
    assert_eq!(c.classified(), c.packets, "{c:?}");
    assert!(c.malformed(Malformed::WrongSize) >= garbage / 2, "{c:?}");
}

/// Sends random datagrams (mostly of the wrong size, every byte random) to `dest` every 10 ms
/// until `done` is set, for at most `cap`; returns whether it ran out its cap.
fn junk_until(dest: std::net::SocketAddr, done: &AtomicBool, cap: Duration) -> bool {
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut datagram = vec![0u8; SHAPE.packet_bytes() + 64];
    let until = std::time::Instant::now() + cap;
    while !done.load(std::sync::atomic::Ordering::Acquire) {
        if std::time::Instant::now() >= until {
            return true;
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let len = (x % datagram.len() as u64) as usize;
        for (i, b) in datagram[..len].iter_mut().enumerate() {
            *b = (x >> (i % 8)) as u8;
        }
        let _ = socket.send_to(&datagram[..len], dest);
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// Only packets the stream takes count as activity: junk every 10 ms neither keeps a receiver
/// nobody sends to waiting past its start timeout, nor one whose sender stopped past its idle
/// timeout. The junk would go on for 30 s; the receiver must end while it still arrives.
#[test]
fn junk_never_keeps_a_receiver_alive() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let scene = Scene::new(SceneConfig::new(CPI)).unwrap();
    let prepared = scene_frames(&scene, 2);
    const CAP: Duration = Duration::from_secs(30);
    for with_stream in [false, true] {
        let mut config = UdpConfig::new("127.0.0.1:0".parse().unwrap(), SHAPE);
        config.frames = None;
        config.start_timeout = Some(Duration::from_millis(300));
        config.idle_timeout = Duration::from_millis(300);
        let mut source = UdpSource::bind(config).unwrap();
        let dest = source.local_addr().unwrap();
        let mut buffers = FrameBuffers::new(4, 128, SHAPE.payload_bytes()).unwrap();
        let done = AtomicBool::new(false);
        let ran_out = std::thread::scope(|s| {
            let junk = s.spawn(|| junk_until(dest, &done, CAP));
            if with_stream {
                let send_config = SenderConfig {
                    dest,
                    shape: SHAPE,
                    pacing: Pacing::FrameRate(200.0),
                    frames: FrameCount::Frames(2),
                    first_frame_id: 0,
                    faults: Faults::default(),
                    tick: Duration::ZERO,
                };
                sender::send(&prepared, &send_config, &AtomicBool::new(false)).unwrap();
            }
            let received = source.receive(&mut buffers, SHAPE.payload_bytes());
            done.store(true, std::sync::atomic::Ordering::Release);
            received.unwrap();
            junk.join().unwrap()
        });
        let c = source.counters();
        assert!(
            !ran_out,
            "with_stream {with_stream}: the receiver waited as long as junk came: {c:?}"
        );
        assert!(c.packets > c.accepted, "junk arrived: {c:?}");
        let frames = if with_stream { 2 } else { 0 };
        assert_eq!(c.complete_frames, frames, "{c:?}");
        assert_eq!(c.accepted, frames * 128, "{c:?}");
    }
}

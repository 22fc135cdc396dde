//! The executor on a generic graph of C kernels: every frame's results are exact and in
//! order whatever the worker and slot counts, whether the intermediate tensor is a sink (the
//! slot's own buffer) or lives only while the stages run (a shared set), and failures stop the
//! run with their cause.

use std::path::Path;

use kplace::executor::{
    self, BeginError, CompletedFrame, FrameSink, Ingest, PacketStatus, PartialFrame, Progress,
    RunError, SinkError, Source, SourceError,
};
use kplace::model::graph::{Graph, Overrides};
use kplace::model::placement::Placement;
use kplace::net::replay::FrameReplay;
use kplace::plan::Plan;
use kplace_testkit::build_c_library;

const ROWS: usize = 64;
const COLS: usize = 24;

/// The test graph: `magnitude` in tiles, then `sum`. Only `sums` is a sink, so `mag` lives
/// only while a frame's stages run; [`graph_text_with_sinks`] can make it a sink too.
fn graph_text(extra_params: &str) -> String {
    graph_text_with_sinks(extra_params, "[sums]")
}

fn graph_text_with_sinks(extra_params: &str, sinks: &str) -> String {
    format!(
        "name: test
dims: {{R: {ROWS}, C: {COLS}}}
source: {{tensor: iq, packet_axis: 0}}
tensors:
  - {{name: iq, dtype: ci16, shape: [R, C]}}
  - {{name: mag, dtype: f32, shape: [R, C]}}
  - {{name: sums, dtype: f32, shape: [C]}}
stages:
  - name: magnitude
    kernel: test.magnitude2
    inputs: [iq]
    outputs: [mag]
    split: {{axis: 0, tile: 8}}
    params: {{scale: 0.25{extra_params}}}
  - {{name: sum, kernel: test.column_sum, inputs: [mag], outputs: [sums]}}
sinks: {sinks}
"
    )
}

fn plan(workers: usize, slots: usize, extra_params: &str) -> Plan {
    plan_with(workers, slots, extra_params, "")
}

/// [`plan`] with more `runtime` settings, e.g. `", spin_us: 200"`.
fn plan_with(workers: usize, slots: usize, extra_params: &str, runtime: &str) -> Plan {
    plan_of(&graph_text(extra_params), workers, slots, runtime)
}

fn plan_of(graph: &str, workers: usize, slots: usize, runtime: &str) -> Plan {
    let lib = build_c_library("test_kernels.c", "test_kernels", &[]);
    let graph = Graph::parse(graph, Path::new("test.yaml"), &Overrides::default()).unwrap();
    let placement = Placement::parse(
        &format!(
            "name: t\nlibraries: {{cpu: {}}}\nstages: {{magnitude: cpu, sum: cpu}}\nruntime: {{workers: {workers}, slots: {slots}{runtime}}}\n",
            lib.display()
        ),
        Path::new("p.yaml"),
    )
    .unwrap();
    Plan::new(graph, placement).unwrap()
}

/// Deterministic pseudo-random frames of this test's shape.
fn frames(count: usize, seed: u64) -> Vec<Vec<u8>> {
    kplace_testkit::test_frames(ROWS, COLS, count, seed)
}

fn expected_sums(frame: &[u8]) -> Vec<f32> {
    kplace_testkit::expected_column_sums(frame, ROWS, COLS)
}

#[derive(Default)]
struct Collect {
    frames: Vec<(u64, Vec<u8>)>,
    partial: Vec<u64>,
    /// Every frame id in delivery order, partial or not.
    order: Vec<u64>,
    fail_at: Option<u64>,
    /// Every progress report, in order.
    progress: Vec<Progress>,
}

impl FrameSink for Collect {
    fn frame(&mut self, frame: &CompletedFrame<'_>) -> Result<(), SinkError> {
        if self.fail_at == Some(frame.frame_id) {
            return Err(SinkError::failed("sink refused the frame"));
        }
        self.frames.push((frame.frame_id, frame.sink(0).to_vec()));
        self.order.push(frame.frame_id);
        Ok(())
    }

    fn partial(&mut self, frame: &PartialFrame) -> Result<(), SinkError> {
        self.partial.push(frame.frame_id);
        self.order.push(frame.frame_id);
        Ok(())
    }

    fn progress(&mut self, progress: &Progress) -> Result<(), SinkError> {
        self.progress.push(progress.clone());
        Ok(())
    }
}

#[test]
fn results_are_exact_and_in_order_for_any_workers_and_slots() {
    let prepared = frames(7, 3);
    let expected: Vec<Vec<f32>> = prepared.iter().map(|f| expected_sums(f)).collect();
    let mut reference: Option<Vec<(u64, Vec<u8>)>> = None;
    for (workers, slots, sinks) in [1, 2, 3]
        .into_iter()
        .flat_map(|w| [1, 2, 5].map(|s| (w, s)))
        .flat_map(|(w, s)| ["[sums]", "[sums, mag]"].map(|k| (w, s, k)))
    {
        {
            let plan = plan_of(&graph_text_with_sinks("", sinks), workers, slots, "");
            let mut source = FrameReplay::new(prepared.clone(), 40);
            let mut sink = Collect::default();
            let report = executor::run(&plan, &mut source, &mut sink).unwrap();
            assert_eq!(report.frames, 40);
            // `mag` is a sink, so a slot's own, or else one of a set per slot, of which one
            // worker binds one only: it runs a frame's stages before the next frame's tiles.
            let sets = &report.overhead;
            if sinks == "[sums]" {
                assert_eq!(sets.stage_sets, slots as u32, "{workers} workers");
                let most = if workers == 1 { 1 } else { slots as u32 };
                assert!(
                    (1..=most).contains(&sets.stage_sets_peak),
                    "{} sets bound at once with {workers} workers, {slots} slots",
                    sets.stage_sets_peak
                );
            } else {
                assert_eq!((sets.stage_sets, sets.stage_sets_peak), (0, 0));
            }
            assert_eq!(
                report.stages[0].launches,
                40 * (ROWS as u64 / 8),
                "one launch per tile"
            );
            assert_eq!(report.stages[1].launches, 40);
            let ids: Vec<u64> = sink.frames.iter().map(|(id, _)| *id).collect();
            assert_eq!(ids, (0..40).collect::<Vec<_>>(), "frames arrive in order");
            for (id, bytes) in &sink.frames {
                let sums: Vec<f32> = bytes
                    .chunks_exact(4)
                    .map(|b| f32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
                    .collect();
                assert_eq!(
                    sums,
                    expected[*id as usize % 7],
                    "frame {id} with {workers} workers, {slots} slots, sinks {sinks}"
                );
            }
            match &reference {
                None => reference = Some(sink.frames),
                Some(r) => assert_eq!(
                    r, &sink.frames,
                    "byte-identical across worker and slot counts"
                ),
            }
        }
    }
}

#[test]
fn spinning_and_pinned_threads_change_no_result_and_every_task_is_counted() {
    let prepared = frames(5, 11);
    let expected: Vec<Vec<f32>> = prepared.iter().map(|f| expected_sums(f)).collect();
    let cores = kplace::os::CpuSet::allowed().unwrap();
    for workers in [1, 2] {
        // Pinned to the first cores this process may use (a core twice, on a one-core machine).
        let pins: Vec<String> = (0..workers)
            .map(|w| cores.cpus()[w % cores.cpus().len()].to_string())
            .collect();
        for runtime in [
            String::new(),
            ", spin_us: 300".to_string(),
            format!(", spin_us: 300, pin_cores: [{}]", pins.join(", ")),
        ] {
            let plan = plan_with(workers, 3, "", &runtime);
            let mut source = FrameReplay::new(prepared.clone(), 30);
            let mut sink = Collect::default();
            let report = executor::run(&plan, &mut source, &mut sink).unwrap();
            let context = format!("{workers} workers, runtime{{{runtime}}}");
            assert_eq!(sink.frames.len(), 30, "{context}");
            for (id, bytes) in &sink.frames {
                let sums: Vec<f32> = bytes
                    .chunks_exact(4)
                    .map(|b| f32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
                    .collect();
                assert_eq!(sums, expected[*id as usize % 5], "frame {id}, {context}");
            }
            let overhead = report.overhead;
            assert_eq!(overhead.frames, 30, "{context}");
            assert_eq!(overhead.workers, workers as u32, "{context}");
            // Every launch is one task: a tile of each 8 rows, then the column sum.
            let w = overhead.workers_total;
            assert_eq!(w.tasks, 30 * (ROWS as u64 / 8 + 1), "{context}");
            assert!(!w.launch.is_zero(), "{context}");
            if runtime.is_empty() {
                assert_eq!(
                    (w.spins, w.spun),
                    (0, std::time::Duration::ZERO),
                    "{context}"
                );
            }
            assert!(
                overhead.source.busy > std::time::Duration::ZERO,
                "{context}"
            );
            assert!(
                overhead.collector.busy > std::time::Duration::ZERO,
                "{context}"
            );
        }
    }
    // The run gave the calling thread (the collector) its own cores back.
    assert_eq!(kplace::os::CpuSet::allowed().unwrap(), cores);
}

#[test]
fn a_kernel_failure_stops_the_run_with_its_message() {
    let mut prepared = frames(4, 5);
    prepared[2][0..2].copy_from_slice(&1234i16.to_le_bytes());
    for workers in [1, 2] {
        let plan = plan(workers, 2, ", fail_marker: 1234");
        let mut source = FrameReplay::new(prepared.clone(), 1000);
        let mut sink = Collect::default();
        let err = executor::run(&plan, &mut source, &mut sink).unwrap_err();
        assert!(matches!(err, RunError::Launch(_)), "{err:?}");
        assert!(err.to_string().contains("marker frame seen"), "{err}");
        assert!(sink.frames.len() < 1000, "the run stopped early");
        assert!(
            sink.frames.iter().all(|(id, _)| id % 4 != 2),
            "the failing frame is never delivered"
        );
    }
}

#[test]
fn a_sink_failure_stops_the_run() {
    let plan = plan(2, 3, "");
    let mut source = FrameReplay::new(frames(2, 1), 500);
    let mut sink = Collect {
        fail_at: Some(10),
        ..Default::default()
    };
    let err = executor::run(&plan, &mut source, &mut sink).unwrap_err();
    assert!(err.to_string().contains("sink refused the frame"), "{err}");
    assert_eq!(sink.frames.len(), 10);
}

struct FailingSource;

impl Source for FailingSource {
    fn run(&mut self, ingest: &mut Ingest<'_>) -> Result<(), SourceError> {
        let frame = ingest.begin_frame(0).expect("a slot is free");
        ingest
            .packet_mut(&frame, 0)
            .expect("packet 0 has a place")
            .fill(0);
        ingest.packet_done(&frame, 0);
        // Leave the frame open: a source that fails mid-frame must not wedge the run.
        Err(SourceError::failed("the device went away"))
    }
}

#[test]
fn a_source_failure_stops_the_run() {
    let plan = plan(1, 2, "");
    let err = executor::run(&plan, &mut FailingSource, &mut Collect::default()).unwrap_err();
    assert!(err.to_string().contains("the device went away"), "{err}");
}

struct Packets;

impl Source for Packets {
    fn run(&mut self, ingest: &mut Ingest<'_>) -> Result<(), SourceError> {
        let frame = ingest.begin_frame(0).expect("slot");
        // Out of order, a duplicate and an out-of-range index.
        for p in (0..ROWS as u64).rev() {
            ingest.packet_mut(&frame, p).expect("free place").fill(1);
            assert_eq!(ingest.packet_done(&frame, p), PacketStatus::Accepted);
        }
        assert!(
            ingest.packet_mut(&frame, 3).is_none(),
            "a present packet has no writable place"
        );
        assert!(ingest.packet_place(&frame, 3).is_none());
        assert_eq!(ingest.packet_done(&frame, 3), PacketStatus::Duplicate);
        assert_eq!(
            ingest.packet_done(&frame, ROWS as u64),
            PacketStatus::OutOfRange
        );
        assert!(ingest.packet_mut(&frame, ROWS as u64).is_none());
        assert_eq!(ingest.received(&frame), ROWS as u64);
        assert!(ingest.finish(frame));
        Ok(())
    }
}

#[test]
fn packets_in_any_order_complete_a_frame_and_duplicates_are_refused() {
    let plan = plan(2, 2, "");
    let mut sink = Collect::default();
    executor::run(&plan, &mut Packets, &mut sink).unwrap();
    assert_eq!(sink.frames.len(), 1);
    // Every sample is (257, 257): I = Q = 0x0101.
    let want = 0.25f32 * 2.0 * 257.0 * 257.0 * ROWS as f32;
    let sums: Vec<f32> = sink.frames[0]
        .1
        .chunks_exact(4)
        .map(|b| f32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    assert!(sums.iter().all(|&s| s == want), "{sums:?} vs {want}");
}

/// Interleaves frames, leaves holes in some, and opens more frames than there are slots
/// without waiting, as a packet receiver does.
struct Lossy {
    frames: Vec<Vec<u8>>,
    /// Frames with one chirp missing.
    holes: Vec<u64>,
    count: u64,
    refused: Vec<u64>,
    /// Empty frames opened at the end, until no slot was free.
    opened: u64,
}

impl Source for Lossy {
    fn run(&mut self, ingest: &mut Ingest<'_>) -> Result<(), SourceError> {
        let bytes = ingest.packet_bytes();
        let mut id = 0;
        while id < self.count {
            // Two frames open at once, their packets interleaved.
            let a = ingest.begin_frame(id).expect("slot");
            let b = ingest.begin_frame(id + 1).expect("slot");
            for p in 0..ROWS as u64 {
                for frame in [&a, &b] {
                    let fid = frame.frame_id();
                    if self.holes.contains(&fid) && p == 37 {
                        continue;
                    }
                    let src = &self.frames[(fid % self.frames.len() as u64) as usize];
                    let place = ingest.packet_mut(frame, p).expect("place");
                    place.copy_from_slice(&src[p as usize * bytes..(p as usize + 1) * bytes]);
                    ingest.packet_done(frame, p);
                }
            }
            let complete_a = ingest.finish(a);
            let complete_b = ingest.finish(b);
            assert_eq!(complete_a, !self.holes.contains(&id));
            assert_eq!(complete_b, !self.holes.contains(&(id + 1)));
            id += 2;
        }
        // Open-loop: with every slot taken, try_begin_frame refuses instead of waiting.
        let mut open = Vec::new();
        loop {
            match ingest.try_begin_frame(1000 + open.len() as u64) {
                Ok(frame) => open.push(frame),
                Err(BeginError::NoFreeSlot) => {
                    self.refused.push(1000 + open.len() as u64);
                    break;
                }
                Err(BeginError::Stopping) => return Err(SourceError::failed("stopping")),
            }
        }
        self.opened = open.len() as u64;
        for frame in open {
            assert!(!ingest.finish(frame), "an empty frame is partial");
        }
        Ok(())
    }
}

#[test]
fn frames_with_missing_packets_complete_as_partial_in_order_and_free_their_slots() {
    let prepared = frames(3, 9);
    let expected: Vec<Vec<f32>> = prepared.iter().map(|f| expected_sums(f)).collect();
    for (workers, slots) in [(1, 2), (2, 3), (3, 4)] {
        let plan = plan(workers, slots, "");
        let mut source = Lossy {
            frames: prepared.clone(),
            holes: vec![1, 4, 5, 10],
            count: 12,
            refused: Vec::new(),
            opened: 0,
        };
        let mut sink = Collect::default();
        let report = executor::run(&plan, &mut source, &mut sink).unwrap();
        assert_eq!(report.frames, 8);
        let extra = source.opened;
        assert_eq!(report.partial_frames, 4 + extra);
        assert_eq!(
            report.dropped_frames, 1,
            "the frame refused a slot is counted as dropped"
        );
        assert_eq!(source.refused.len(), 1);
        assert_eq!(sink.partial[..4], [1, 4, 5, 10]);
        let mut want_order: Vec<u64> = (0..12).collect();
        want_order.extend(1000..1000 + extra);
        assert_eq!(
            sink.order, want_order,
            "partial frames keep their place in the order"
        );
        for (id, bytes) in &sink.frames {
            let sums: Vec<f32> = bytes
                .chunks_exact(4)
                .map(|b| f32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            assert_eq!(
                sums,
                expected[*id as usize % 3],
                "frame {id}: complete frames are exact"
            );
        }
    }
}

/// Progress reports add up to the run: processed, partial and dropped frames, interval by
/// interval, and the last report's totals are the run's own; nothing is reported without
/// `progress_every`.
#[test]
fn progress_reports_add_up_to_the_run() {
    let lossy = plan(2, 3, "");
    let mut source = Lossy {
        frames: frames(3, 9),
        holes: vec![1, 4, 5, 10],
        count: 12,
        refused: Vec::new(),
        opened: 0,
    };
    let mut sink = Collect::default();
    let options = executor::RunOptions {
        progress_every: Some(std::time::Duration::from_millis(1)),
        ..Default::default()
    };
    let report = executor::run_with(&lossy, &mut source, &mut sink, &options).unwrap();
    let reports = &sink.progress;
    let last = reports.last().expect("at least the last report");
    assert!(last.last && reports.iter().filter(|p| p.last).count() == 1);
    let sum = |f: fn(&Progress) -> u64| reports.iter().map(f).sum::<u64>();
    assert_eq!(sum(|p| p.interval_frames), report.frames);
    assert_eq!(sum(|p| p.interval_partial_frames), report.partial_frames);
    assert_eq!(sum(|p| p.interval_dropped_frames), report.dropped_frames);
    assert_eq!(
        (last.frames, last.partial_frames, last.dropped_frames),
        (report.frames, report.partial_frames, 1)
    );
    assert_eq!(sum(|p| p.post_frame.count), report.frames);
    for pair in reports.windows(2) {
        assert!(pair[0].elapsed <= pair[1].elapsed && pair[0].frames <= pair[1].frames);
        assert_eq!(pair[1].elapsed - pair[0].elapsed, pair[1].interval);
    }

    let mut quiet = Collect::default();
    let mut replay = FrameReplay::new(frames(2, 3), 5);
    executor::run(&plan(1, 2, ""), &mut replay, &mut quiet).unwrap();
    assert!(quiet.progress.is_empty(), "no reports unless asked for");
}

/// A traced run holds every launch of every frame once, each on a worker, in order: a frame's
/// `sum` starts after each of its `magnitude` tiles ended and after its packets began, and
/// its delivery comes after both; partial frames have packets and a delivery but no `sum`.
/// An untraced run records nothing.
#[test]
fn a_trace_holds_every_launch_of_every_frame_once_in_order() {
    use kplace::report::trace::{SpanKind, Track};
    let lossy = plan(3, 4, "");
    let mut source = Lossy {
        frames: frames(3, 9),
        holes: vec![1, 4],
        count: 8,
        refused: Vec::new(),
        opened: 0,
    };
    let options = executor::RunOptions {
        trace: true,
        ..Default::default()
    };
    let mut sink = Collect::default();
    let report = executor::run_with(&lossy, &mut source, &mut sink, &options).unwrap();
    let trace = report.trace.expect("traced");
    assert_eq!(trace.stages, ["magnitude", "sum"]);
    assert_eq!(trace.dropped_spans, 0);
    let of = |kind, frame: u64, stage: Option<u32>| {
        trace
            .spans
            .iter()
            .filter(move |s| s.kind == kind && s.frame == frame && s.stage == stage)
    };
    let tiles = (ROWS / 8) as u32;
    for (frame, _) in &sink.frames {
        let mut launches: Vec<u32> = of(SpanKind::Launch, *frame, Some(0))
            .map(|s| s.launch.unwrap())
            .collect();
        launches.sort_unstable();
        assert_eq!(launches, (0..tiles).collect::<Vec<_>>(), "frame {frame}");
        let sums: Vec<_> = of(SpanKind::Launch, *frame, Some(1)).collect();
        assert_eq!(sums.len(), 1, "frame {frame}: one sum");
        let tiles_end = of(SpanKind::Launch, *frame, Some(0))
            .map(|s| s.end_ns)
            .max()
            .unwrap();
        assert!(
            sums[0].start_ns >= tiles_end,
            "frame {frame}: sum after its tiles"
        );
        assert!(matches!(sums[0].track, Track::Worker(0..=2)));
        let packets: Vec<_> = of(SpanKind::Packets, *frame, None).collect();
        assert_eq!(packets.len(), 1, "frame {frame}");
        assert!(packets[0].start_ns <= sums[0].start_ns);
        let delivered: Vec<_> = of(SpanKind::Deliver, *frame, None).collect();
        assert_eq!(delivered.len(), 1, "frame {frame}");
        assert!(
            delivered[0].start_ns >= sums[0].end_ns,
            "frame {frame}: delivered after"
        );
    }
    for frame in &sink.partial {
        assert_eq!(
            of(SpanKind::Launch, *frame, Some(1)).count(),
            0,
            "partial {frame}"
        );
        assert_eq!(
            of(SpanKind::Deliver, *frame, None).count(),
            1,
            "partial {frame}"
        );
    }

    let mut quiet = Collect::default();
    let mut replay = FrameReplay::new(frames(2, 3), 5);
    let untraced = executor::run(&plan(1, 2, ""), &mut replay, &mut quiet).unwrap();
    assert_eq!(untraced.trace, None);
}

#[test]
fn a_warm_up_is_processed_but_left_out_of_the_figures() {
    let plan = plan(2, 3, "");
    let mut source = FrameReplay::new(frames(3, 4), 40);
    let mut sink = Collect::default();
    let options = executor::RunOptions {
        warmup_frames: 10,
        ..Default::default()
    };
    let report = executor::run_with(&plan, &mut source, &mut sink, &options).unwrap();
    assert_eq!(
        report.frames, 40,
        "warm-up frames are still processed and delivered"
    );
    assert_eq!(sink.frames.len(), 40);
    assert_eq!(report.measured_frames, 30);
    assert_eq!(report.post_frame.count, 30);
    assert_eq!(report.end_to_end.count, 30);
}

#[test]
fn a_session_reports_what_the_executor_measured_and_the_sinks_verdict() {
    use kplace::report::run::{Details, RUN_SCHEMA, Verification};
    use kplace::session::{self, RunFacts};
    let plan = plan(2, 3, "");
    let prepared = frames(4, 9);
    let mut source = FrameReplay::new(prepared, 12);
    let mut sink = Collect::default();
    let options = executor::RunOptions {
        warmup_frames: 2,
        ..Default::default()
    };
    let run = session::run(&plan, &mut source, &mut sink, &options).unwrap();
    assert_eq!(sink.frames.len(), 12);
    assert!(run.telemetry.is_none(), "a CPU plan samples no GPU");
    let verification = Verification {
        passed: true,
        against: "the scene's truth".into(),
        frames_reported: 12,
        frames_passed: 12,
        frames_failed: 0,
        frames_missing: 0,
        lost_frames: Vec::new(),
        frames_rejudged: 0,
        mismatches: Vec::new(),
        reasons: Vec::new(),
    };
    let mut details = Details::new();
    details.insert("clusters_per_frame".into(), 2.0.into());
    let facts = RunFacts {
        graph: plan.graph.name.clone(),
        placement: plan.placement.name.clone(),
        shape: format!("{ROWS}x{COLS}").parse().unwrap(),
        frame_bytes: (ROWS * COLS * 4) as u64,
        source: "replay".into(),
        frames_expected: 12,
        details: details.clone(),
        interrupted: None,
        mps: None,
    };
    let report = session::report(facts, &run, None, verification.clone());
    assert_eq!(report.schema, RUN_SCHEMA);
    assert_eq!(
        (report.graph.as_str(), report.placement.as_str()),
        ("test", "t")
    );
    assert_eq!((report.frames, report.measured_frames), (12, 10));
    assert_eq!(
        report.latency.post_frame.count, 10,
        "warm-up frames left out"
    );
    assert_eq!(
        report.details, details,
        "the workload's own figures, as it gave them"
    );
    assert_eq!(report.verification, verification);
    assert!(report.ingest.is_none());
    let names: Vec<&str> = report.stages.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["magnitude", "sum"]);
    assert_eq!(report.stages[1].launches, 12);
    let expected_gbit = 10.0 * (ROWS * COLS * 4) as f64 * 8.0 / report.wall_s / 1e9;
    assert!((report.input_gbit_per_s - expected_gbit).abs() <= 1e-9 * expected_gbit.max(1.0));
    assert!(
        !report.gpu_telemetry.available,
        "{:?}",
        report.gpu_telemetry
    );
}

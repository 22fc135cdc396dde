//! GPU placements on the simulated GPU (`kplace::cuda::sim`): the planner's mirrors,
//! transfers, pools and fences for every cut of a two-stage graph, and the executor moving
//! frames through them with streams, event fences and host callbacks, exactly, in order,
//! without a GPU. The simulated device delays every operation, so a missing fence shows up as
//! wrong data; the test kernels' "CUDA" variants compute on the host when their stream
//! reaches them.

#![allow(clippy::result_large_err)]

use std::path::Path;
use std::time::Duration;

use kplace::cuda::sim::SimProvider;
use kplace::executor::{
    self, CompletedFrame, FrameSink, Ingest, PartialFrame, RunError, SinkError, Source, SourceError,
};
use kplace::model::graph::{Graph, Overrides, StageId, TensorId};
use kplace::model::placement::Device;
use kplace::model::placement::Placement;
use kplace::net::replay::FrameReplay;
use kplace::plan::gpu_path::GpuPath;
use kplace::plan::{
    BufferSpace, Direction, Layout, Lifetime, Plan, PlanError, PlanMode, PoolPurpose, bind,
};
use kplace_testkit::build_c_library;

const ROWS: usize = 32;
const COLS: usize = 8;
const TILE: usize = 8;

fn graph(extra_params: &str) -> Graph {
    let text = format!(
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
    split: {{axis: 0, tile: {TILE}}}
    params: {{scale: 0.25{extra_params}}}
  - {{name: sum, kernel: test.column_sum, inputs: [mag], outputs: [sums]}}
sinks: [sums]
"
    );
    Graph::parse(&text, Path::new("graphs/test.yaml"), &Overrides::default()).unwrap()
}

fn placement(magnitude: &str, sum: &str, workers: usize, slots: usize) -> Placement {
    let lib = build_c_library("test_kernels.c", "test_kernels", &[]);
    let text = format!(
        "name: {magnitude}-{sum}\nlibraries: {{cpu: {lib}, gpu: {lib}}}\nstages:\n  magnitude: {magnitude}\n  sum: {sum}\nruntime: {{workers: {workers}, slots: {slots}}}\n",
        lib = lib.display()
    );
    Placement::parse(&text, Path::new("placements/test.yaml")).unwrap()
}

fn sim_plan(
    gpus: &SimProvider,
    magnitude: &str,
    sum: &str,
    workers: usize,
    slots: usize,
    extra_params: &str,
) -> Plan {
    Plan::with_gpus(
        graph(extra_params),
        placement(magnitude, sum, workers, slots),
        gpus,
        PlanMode::Run,
    )
    .unwrap()
}

const IQ: TensorId = TensorId(0);
const MAG: TensorId = TensorId(1);
const SUMS: TensorId = TensorId(2);

#[test]
fn all_gpu_uploads_int16_tile_by_tile_and_downloads_only_the_sink() {
    let gpus = SimProvider::new(1);
    let plan = sim_plan(&gpus, "gpu", "gpu", 1, 3, "");
    let edge = |t: TensorId| plan.edges[t.0];
    assert_eq!(edge(IQ).space, BufferSpace::PinnedHost(0));
    let iq = edge(IQ).mirror.expect("the samples are uploaded");
    assert_eq!(iq.space, BufferSpace::Device(0));
    assert_eq!(iq.transfer.direction, Direction::HostToDevice);
    assert_eq!(iq.transfer.stage, StageId(0), "on the reader's stream");
    assert_eq!(
        iq.transfer.pieces,
        (ROWS / TILE) as u64,
        "one piece per tile"
    );
    assert_eq!(
        iq.transfer.bytes,
        (ROWS * COLS * 4) as u64,
        "int16, not float"
    );
    assert_eq!(edge(MAG).space, BufferSpace::Device(0));
    assert!(edge(MAG).mirror.is_none(), "the map never leaves the GPU");
    assert_eq!(
        edge(MAG).lifetime,
        Lifetime::Slot,
        "a GPU's tensor is the slot's: queued work may outlive the frame's stages"
    );
    assert_eq!(edge(SUMS).space, BufferSpace::Device(0));
    let sums = edge(SUMS).mirror.expect("the sink is downloaded");
    assert_eq!(
        (sums.space, sums.transfer.direction, sums.transfer.stage),
        (
            BufferSpace::PinnedHost(0),
            Direction::DeviceToHost,
            StageId(1)
        )
    );
    let work = plan.stages[1].gpu().unwrap();
    assert_eq!(work.waits, vec![MAG], "sum waits on magnitude's event");
    assert_eq!(work.downloads, vec![SUMS]);
    assert_eq!(plan.stages[0].gpu().unwrap().uploads, vec![IQ]);
    let pool = |purpose| plan.pools[plan.pool_of(purpose).unwrap()].clone();
    assert_eq!(
        pool(PoolPurpose::Tensor(IQ)).space,
        BufferSpace::PinnedHost(0)
    );
    assert_eq!(pool(PoolPurpose::Mirror(IQ)).space, BufferSpace::Device(0));
    assert_eq!(pool(PoolPurpose::Mirror(IQ)).blocks, 3, "one per slot");
    assert_eq!(pool(PoolPurpose::Tensor(MAG)).space, BufferSpace::Device(0));
    assert!(plan.pool_of(PoolPurpose::Mirror(MAG)).is_none());
    assert_eq!(
        pool(PoolPurpose::Workspace(StageId(0))).space,
        BufferSpace::Device(0)
    );
    assert_eq!(
        pool(PoolPurpose::Workspace(StageId(0))).blocks,
        3 * ROWS / TILE,
        "a GPU stage's workspace per launch per slot: its work runs after the launch returns"
    );
    let text = plan.to_string();
    for want in [
        "H2D iq",
        "pinned(gpu:0) -> device(gpu:0)  on magnitude's stream before its launches, in 4 pieces",
        "D2H sums",
        "on sum's stream after its launches, before its event",
        "sum waits on magnitude's event before reading mag",
        "priority  0, 3 streams",
        "device(gpu:0)",
    ] {
        assert!(text.contains(want), "plan lacks {want:?}:\n{text}");
    }
}

#[test]
fn every_cut_crosses_the_bus_once_where_it_must() {
    let gpus = SimProvider::new(1);
    // GPU then CPU: the map comes down on the producer's stream, into pinned memory.
    let plan = sim_plan(&gpus, "gpu", "cpu", 1, 2, "");
    let mag = plan.edges[MAG.0].mirror.unwrap();
    assert_eq!(
        (mag.space, mag.transfer.direction, mag.transfer.stage),
        (
            BufferSpace::PinnedHost(0),
            Direction::DeviceToHost,
            StageId(0)
        )
    );
    assert_eq!(plan.edges[SUMS.0].space, BufferSpace::Host);
    assert!(plan.stages[1].gpu().is_none());
    assert!(
        plan.to_string()
            .contains("a host callback then releases sum")
    );
    // CPU then GPU: the map goes up whole, on the consumer's stream, from pinned memory.
    let plan = sim_plan(&gpus, "cpu", "gpu", 1, 2, "");
    assert_eq!(
        plan.edges[IQ.0].space,
        BufferSpace::Host,
        "no GPU reads the samples"
    );
    assert_eq!(plan.edges[MAG.0].space, BufferSpace::PinnedHost(0));
    let mag = plan.edges[MAG.0].mirror.unwrap();
    assert_eq!(
        (
            mag.space,
            mag.transfer.direction,
            mag.transfer.stage,
            mag.transfer.pieces
        ),
        (
            BufferSpace::Device(0),
            Direction::HostToDevice,
            StageId(1),
            1
        )
    );
    // All CPU: nothing crosses.
    let plan = sim_plan(&gpus, "cpu", "cpu", 1, 2, "");
    assert_eq!(plan.transfers().count(), 0);
    assert!(plan.to_string().contains("transfers  none"));
}

#[test]
fn a_gpu_placement_without_a_usable_gpu_fails_at_plan_time_naming_the_stage() {
    let e = Plan::with_gpus(
        graph(""),
        placement("cpu", "gpu:1", 1, 2),
        &SimProvider::new(1),
        PlanMode::Run,
    )
    .unwrap_err();
    assert!(matches!(e, PlanError::NoGpu { .. }), "{e:?}");
    let e = e.to_string();
    assert!(
        e.contains("stage sum is placed on gpu:1 (placement placements/test.yaml:5)")
            && e.contains("no GPU is usable")
            && e.contains("kplace devices"),
        "{e}"
    );
    // This machine's own driver: CI has none, a GPU machine has one.
    if let Err(e) = Plan::new(graph(""), placement("gpu", "cpu", 1, 2)) {
        let e = e.to_string();
        assert!(e.contains("stage magnitude is placed on gpu:0"), "{e}");
    }
}

/// Laying out is pure: a GPU placement's tiles, mirrors and tensor pools come out the same
/// with no device at all; only binding opens the GPU, and there a missing one names the stage.
#[test]
fn a_layout_needs_no_device_and_binding_opens_it() {
    let layout = Layout::new(graph(""), placement("gpu", "cpu", 1, 2)).unwrap();
    assert_eq!(layout.devices(), [Device::Gpu(0), Device::Cpu]);
    let mirrored: Vec<TensorId> = layout
        .edges
        .iter()
        .filter(|e| e.mirror.is_some())
        .map(|e| e.tensor)
        .collect();
    assert_eq!(mirrored, [IQ, MAG], "iq is uploaded and mag downloaded");
    assert_eq!(
        layout.tensor_pools.len(),
        3 + 2,
        "a pool per tensor and per mirror, no workspaces yet"
    );
    let e = bind::open_gpus(&layout, &SimProvider::new(0), PlanMode::Run).unwrap_err();
    assert!(
        e.to_string().contains("stage magnitude is placed on gpu:0"),
        "{e}"
    );
    let opened = bind::open_gpus(&layout, &SimProvider::new(1), PlanMode::Run).unwrap();
    let plan = bind::bind(layout, opened).unwrap();
    assert!(plan.runnable().is_ok());
    assert!(
        plan.pools.len() > 5,
        "the workspaces were added when binding"
    );
}

#[test]
fn a_described_plan_without_a_gpu_shows_its_transfers_but_cannot_run() {
    let plan = Plan::with_gpus(
        graph(""),
        placement("gpu", "cpu", 1, 2),
        &SimProvider::new(0),
        PlanMode::Describe,
    )
    .unwrap();
    assert!(plan.runnable().is_err());
    assert_eq!(plan.stages[0].workspace_bytes, None);
    let text = plan.to_string();
    assert!(text.contains("no GPU is usable here"), "{text}");
    assert!(text.contains("D2H mag"), "{text}");
    let err = executor::run(
        &plan,
        &mut FrameReplay::new(frames(1, 1), 1),
        &mut Collect::default(),
    )
    .unwrap_err();
    assert!(matches!(err, RunError::NotRunnable(_)), "{err:?}");
}

/// Deterministic pseudo-random frames of this test's shape.
fn frames(count: usize, seed: u64) -> Vec<Vec<u8>> {
    kplace_testkit::test_frames(ROWS, COLS, count, seed)
}

fn expected_sums(frame: &[u8]) -> Vec<f32> {
    kplace_testkit::expected_column_sums(frame, ROWS, COLS)
}

/// Every frame's column sums, and the partial frames' ids.
type Collect = kplace_testkit::SumsSink;

/// What one cut enqueues per frame, on each path: `(driver calls, uploads, downloads, host
/// callbacks)`; no event is recorded and no stream waits on either path, since every GPU stage
/// of a slot is on one stream.
fn expected_per_frame(magnitude: &str, sum: &str, packets: bool) -> (u64, u64, u64, u64) {
    let tiles = (ROWS / TILE) as u64;
    match (magnitude, sum, packets) {
        // The staged frame up, then the graph (magnitude's launches, sum's, the sums down, a
        // callback).
        ("gpu", "gpu", false) => (2, 1, 1, 1),
        // magnitude tile by tile (an upload and a launch each), then the graph of sum.
        ("gpu", "gpu", true) => (2 * tiles + 1, tiles, 1, 1),
        // The staged frame up, then the graph (magnitude's launches, the map down, the
        // callback that releases sum).
        ("gpu", "cpu", false) => (2, 1, 1, 1),
        // Tile by tile, then the map down and the callback that releases sum, directly.
        ("gpu", "cpu", true) => (2 * tiles + 2, tiles, 1, 1),
        // The graph of sum: the map up, its launch, the sums down, a callback; the CPU reads
        // the samples, so they are never staged.
        ("cpu", "gpu", _) => (1, 1, 1, 1),
        _ => (0, 0, 0, 0),
    }
}

#[test]
fn every_placement_gives_exact_frames_in_order_through_streams_and_fences() {
    let prepared = frames(5, 11);
    let expected: Vec<Vec<f32>> = prepared.iter().map(|f| expected_sums(f)).collect();
    const FRAMES: u64 = 24;
    for (magnitude, sum) in [
        ("gpu", "gpu"),
        ("gpu", "cpu"),
        ("cpu", "gpu"),
        ("cpu", "cpu"),
    ] {
        for ((workers, slots), packets) in [(1, 1), (2, 3)]
            .into_iter()
            .flat_map(|ws| [(ws, false), (ws, true)])
        {
            // Slow GPU operations: a CPU reader released before its download lands, or a
            // graph launched before its input's upload, reads stale or zeroed bytes.
            let gpus = SimProvider::with_delay(1, Duration::from_micros(300));
            let plan = sim_plan(&gpus, magnitude, sum, workers, slots, "");
            let source = FrameReplay::new(prepared.clone(), FRAMES);
            let mut source = if packets { source.by_packets() } else { source };
            let mut sink = Collect::default();
            let report = executor::run(&plan, &mut source, &mut sink)
                .unwrap_or_else(|e| panic!("{magnitude}->{sum}: {e}"));
            let case = format!(
                "{magnitude}->{sum}, {workers} workers, {slots} slots, {}",
                if packets { "packets" } else { "whole frames" }
            );
            assert_eq!(report.frames, FRAMES, "{case}");
            let ids: Vec<u64> = sink.frames.iter().map(|(id, _)| *id).collect();
            assert_eq!(ids, (0..FRAMES).collect::<Vec<_>>(), "in order: {case}");
            for (id, sums) in &sink.frames {
                assert_eq!(sums, &expected[*id as usize % 5], "frame {id}: {case}");
            }
            let stats = gpus.device(0).unwrap().stats();
            let gpu_stages = [magnitude, sum].iter().filter(|d| **d == "gpu").count() as u64;
            let (calls, uploads, downloads, callbacks) =
                expected_per_frame(magnitude, sum, packets);
            // The pure plan of the path states the same count.
            let delivery = if packets {
                executor::Delivery::Packets
            } else {
                executor::Delivery::Frames
            };
            let path = GpuPath::new(&plan, delivery, false);
            assert_eq!(
                (path.per_frame(&plan, false).driver_calls, path.staged),
                (calls, gpu_stages > 0 && magnitude == "gpu" && !packets),
                "{case}"
            );
            assert_eq!(stats.driver_calls, FRAMES * calls, "{case}");
            assert_eq!(
                stats.graph_launches,
                if stats.graphs > 0 { FRAMES } else { 0 },
                "{case}"
            );
            assert_eq!(stats.uploads, FRAMES * uploads, "{case}");
            assert_eq!(stats.downloads, FRAMES * downloads, "{case}");
            assert_eq!(stats.callbacks, FRAMES * callbacks, "{case}");
            assert_eq!((stats.records, stats.waits), (0, 0), "{case}");
            assert_eq!(
                stats.graphs,
                if calls > 0 && (!packets || sum == "gpu") {
                    slots as u64
                } else {
                    0
                },
                "one graph per slot where a stage needs the frame whole: {case}"
            );
            assert_eq!(
                stats.synchronizations,
                slots as u64 * gpu_stages,
                "no synchronization but the final drain: {case}"
            );
        }
    }
}

/// Without graphs (the placement turns them off, or the run profiles), every GPU stage
/// enqueues its own work on its own stream: its waits, uploads, launches, downloads, its event
/// and its callback, as the plan's path counts them.
#[test]
fn without_graphs_every_gpu_stage_fences_itself_and_frames_stay_exact() {
    let prepared = frames(3, 17);
    let expected: Vec<Vec<f32>> = prepared.iter().map(|f| expected_sums(f)).collect();
    const FRAMES: u64 = 9;
    for (magnitude, sum) in [("gpu", "gpu"), ("gpu", "cpu"), ("cpu", "gpu")] {
        for packets in [false, true] {
            let gpus = SimProvider::with_delay(1, Duration::from_micros(200));
            let mut plan = sim_plan(&gpus, magnitude, sum, 2, 2, "");
            plan.runtime.gpu_graphs = false;
            let source = FrameReplay::new(prepared.clone(), FRAMES);
            let mut source = if packets { source.by_packets() } else { source };
            let mut sink = Collect::default();
            let case = format!("{magnitude}->{sum}, packets {packets}");
            let report = executor::run(&plan, &mut source, &mut sink)
                .unwrap_or_else(|e| panic!("{case}: {e}"));
            assert_eq!(report.frames, FRAMES, "{case}");
            for (id, sums) in &sink.frames {
                assert_eq!(sums, &expected[*id as usize % 3], "frame {id}: {case}");
            }
            let delivery = if packets {
                executor::Delivery::Packets
            } else {
                executor::Delivery::Frames
            };
            let path = GpuPath::new(&plan, delivery, false);
            assert!(path.chain.is_none(), "{case}");
            assert_eq!(
                path.no_graph.as_ref().map(ToString::to_string).as_deref(),
                Some("the placement turns graphs off (runtime.gpu_graphs)")
            );
            let stats = gpus.device(0).unwrap().stats();
            let gpu_stages = [magnitude, sum].iter().filter(|d| **d == "gpu").count() as u64;
            assert_eq!(stats.graphs, 0, "{case}");
            assert_eq!(
                stats.driver_calls,
                FRAMES * path.per_frame(&plan, false).driver_calls,
                "{case}"
            );
            assert_eq!(
                (stats.records, stats.callbacks),
                (FRAMES * gpu_stages, FRAMES * gpu_stages),
                "one fence and one callback per GPU stage: {case}"
            );
            let tiles = (ROWS / TILE) as u64;
            let staged = magnitude == "gpu" && !packets;
            let uploads = match (magnitude, sum) {
                ("gpu", _) if staged => 1,
                ("gpu", _) => tiles,
                _ => 1,
            };
            assert_eq!(stats.uploads, FRAMES * uploads, "{case}");
        }
    }
}

#[test]
fn a_gpu_kernel_failure_stops_the_run_with_its_message() {
    let mut prepared = frames(4, 5);
    prepared[2][0..2].copy_from_slice(&1234i16.to_le_bytes());
    let gpus = SimProvider::with_delay(1, Duration::from_micros(100));
    let plan = sim_plan(&gpus, "gpu", "cpu", 2, 2, ", fail_marker: 1234");
    let mut sink = Collect::default();
    let err = executor::run(&plan, &mut FrameReplay::new(prepared, 100), &mut sink).unwrap_err();
    assert!(err.to_string().contains("marker frame seen"), "{err}");
    assert!(sink.frames.iter().all(|(id, _)| id % 4 != 2));
    // The final drain synchronized the stream of every slot, although the faulted device
    // failed the first one: nothing is left running that could call back into the run.
    assert_eq!(gpus.device(0).unwrap().stats().synchronizations, 2);
}

/// Every third frame loses its last chirp; the tiles already uploaded stay queued on the
/// stream of a slot that is then reused.
struct Lossy {
    frames: Vec<Vec<u8>>,
    count: u64,
}

impl Source for Lossy {
    fn run(&mut self, ingest: &mut Ingest<'_>) -> Result<(), SourceError> {
        let bytes = ingest.packet_bytes();
        for id in 0..self.count {
            let Some(frame) = ingest.begin_frame(id) else {
                return Ok(());
            };
            let src = &self.frames[(id % self.frames.len() as u64) as usize];
            for p in 0..ROWS as u64 {
                if id % 3 == 1 && p == ROWS as u64 - 1 {
                    continue;
                }
                let place = ingest.packet_mut(&frame, p).expect("place");
                place.copy_from_slice(&src[p as usize * bytes..(p as usize + 1) * bytes]);
                ingest.packet_done(&frame, p);
            }
            ingest.finish(frame);
        }
        Ok(())
    }
}

#[test]
fn partial_frames_on_a_gpu_free_their_slots_and_later_frames_stay_exact() {
    let prepared = frames(4, 21);
    let expected: Vec<Vec<f32>> = prepared.iter().map(|f| expected_sums(f)).collect();
    let gpus = SimProvider::with_delay(1, Duration::from_micros(200));
    let plan = sim_plan(&gpus, "gpu", "gpu", 2, 2, "");
    let mut sink = Collect::default();
    let report = executor::run(
        &plan,
        &mut Lossy {
            frames: prepared,
            count: 15,
        },
        &mut sink,
    )
    .unwrap();
    assert_eq!(report.partial_frames, 5);
    assert_eq!(sink.partial, vec![1, 4, 7, 10, 13]);
    assert_eq!(sink.frames.len(), 10);
    for (id, sums) in &sink.frames {
        assert_eq!(sums, &expected[*id as usize % 4], "frame {id}");
    }
}

/// A session of a GPU plan reporting progress: the reports go through the session's GPU
/// readings (each GPU the plan uses, or none without NVML, as here) and still add up to the
/// run.
#[test]
fn a_gpu_sessions_progress_carries_its_gpus_and_adds_up() {
    struct Reports(Collect, Vec<kplace::executor::Progress>);
    impl FrameSink for Reports {
        fn frame(&mut self, frame: &CompletedFrame<'_>) -> Result<(), SinkError> {
            self.0.frame(frame)
        }
        fn partial(&mut self, frame: &PartialFrame) -> Result<(), SinkError> {
            self.0.partial(frame)
        }
        fn progress(&mut self, p: &kplace::executor::Progress) -> Result<(), SinkError> {
            self.1.push(p.clone());
            Ok(())
        }
    }
    let gpus = SimProvider::with_delay(1, Duration::from_micros(100));
    let plan = sim_plan(&gpus, "gpu", "gpu", 1, 2, "");
    let options = executor::RunOptions {
        progress_every: Some(Duration::from_millis(1)),
        ..Default::default()
    };
    let mut sink = Reports(Collect::default(), Vec::new());
    let run = kplace::session::run(
        &plan,
        &mut FrameReplay::new(frames(2, 5), 8),
        &mut sink,
        &options,
    )
    .unwrap();
    let reports = &sink.1;
    assert!(reports.last().is_some_and(|p| p.last));
    let processed: u64 = reports.iter().map(|p| p.interval_frames).sum();
    assert_eq!(processed, run.metrics.frames);
    for p in reports {
        assert!(
            p.gpus.iter().all(|g| g.ordinal == 0),
            "only the plan's GPU: {:?}",
            p.gpus
        );
    }
}

/// A traced all-GPU run fed packet by packet: every tile of magnitude enqueued once on the
/// slot's stream, then the graph of sum (one enqueue, after magnitude's last tile: its fence);
/// the graph's one callback finishes both stages. Fed whole frames, magnitude's one task
/// launches the graph of both.
#[test]
fn a_gpu_trace_orders_enqueues_fences_and_callbacks() {
    use kplace::report::trace::{SpanKind, Track};
    for packets in [true, false] {
        let gpus = SimProvider::with_delay(1, Duration::from_micros(50));
        let plan = sim_plan(&gpus, "gpu", "gpu", 2, 3, "");
        let options = executor::RunOptions {
            trace: true,
            ..Default::default()
        };
        let mut sink = Collect::default();
        let source = FrameReplay::new(frames(2, 5), 6);
        let mut source = if packets { source.by_packets() } else { source };
        let report = executor::run_with(&plan, &mut source, &mut sink, &options).unwrap();
        let trace = report.trace.expect("traced");
        for frame in 0..6u64 {
            let of = |kind, stage: u32| -> Vec<_> {
                trace
                    .spans
                    .iter()
                    .filter(|s| s.kind == kind && s.frame == frame && s.stage == Some(stage))
                    .collect()
            };
            let case = format!("frame {frame}, packets {packets}");
            let (enqueues, graph_stage) = if packets {
                ([ROWS / TILE, 1], 1)
            } else {
                ([1, 0], 0)
            };
            for stage in [0, 1] {
                assert_eq!(
                    of(SpanKind::Enqueue, stage).len(),
                    enqueues[stage as usize],
                    "{case} stage {stage}"
                );
                assert_eq!(
                    of(SpanKind::Launch, stage).len(),
                    0,
                    "a GPU stage only enqueues"
                );
                let callbacks = of(SpanKind::Callback, stage);
                assert_eq!(callbacks.len(), 1, "{case} stage {stage}");
                assert_eq!(callbacks[0].track, Track::Driver);
                let graph_launched = of(SpanKind::Enqueue, graph_stage)
                    .iter()
                    .map(|s| s.start_ns)
                    .max()
                    .unwrap();
                assert!(
                    callbacks[0].start_ns >= graph_launched,
                    "{case} stage {stage}: the graph's callback comes after its launch"
                );
            }
            if packets {
                let magnitude_fenced = of(SpanKind::Fence, 0)[0].end_ns;
                let last_tile = (of(SpanKind::Enqueue, 0).iter())
                    .map(|s| s.end_ns)
                    .max()
                    .unwrap();
                assert!(magnitude_fenced >= last_tile, "{case}");
                assert!(
                    of(SpanKind::Enqueue, 1)[0].start_ns >= magnitude_fenced,
                    "{case}: sum's graph goes after magnitude's last tile"
                );
            }
        }
    }
}

/// A traced, profiled run: what each GPU stream ran, every launch of every frame once and in
/// order on its stream's track, then the downloads, all between the launch's enqueue and the
/// stage's callback; without profiling, no stream track at all.
#[test]
fn a_profiled_trace_shows_what_each_gpu_stream_ran_in_order() {
    use kplace::report::trace::{SpanKind, Track};
    for profile in [true, false] {
        let gpus = SimProvider::with_delay(1, Duration::from_micros(100));
        let plan = sim_plan(&gpus, "gpu", "cpu", 1, 2, "");
        let options = executor::RunOptions {
            trace: true,
            profile_gpu: profile,
            ..Default::default()
        };
        let report = executor::run_with(
            &plan,
            &mut FrameReplay::new(frames(2, 5), 5),
            &mut Collect::default(),
            &options,
        )
        .unwrap();
        let trace = report.trace.expect("traced");
        let on_streams: Vec<_> = trace
            .spans
            .iter()
            .filter(|s| matches!(s.track, Track::Stream { .. }))
            .collect();
        if !profile {
            assert!(on_streams.is_empty(), "timing events only when profiling");
            continue;
        }
        for frame in 0..5u64 {
            let of = |kind| -> Vec<_> {
                trace
                    .spans
                    .iter()
                    .filter(|s| s.kind == kind && s.frame == frame && s.stage == Some(0))
                    .collect()
            };
            let launches = of(SpanKind::GpuLaunch);
            let tiles: Vec<u32> = launches.iter().filter_map(|s| s.launch).collect();
            assert_eq!(
                tiles,
                (0..(ROWS / TILE) as u32).collect::<Vec<_>>(),
                "frame {frame}"
            );
            let downloads = of(SpanKind::Download);
            assert_eq!(downloads.len(), 1, "frame {frame}");
            let callback = of(SpanKind::Callback)[0].start_ns;
            let mut previous_end = 0;
            for (span, enqueue) in launches.iter().zip(of(SpanKind::Enqueue)) {
                assert!(matches!(span.track, Track::Stream { stage: 0, .. }));
                assert!(span.start_ns <= span.end_ns, "frame {frame}: {span:?}");
                // Each launch waits for its upload and runs the simulated delay after it was
                // enqueued, and the stream runs them one after another.
                assert!(
                    span.end_ns >= enqueue.start_ns,
                    "frame {frame}: {span:?} {enqueue:?}"
                );
                assert!(span.start_ns >= previous_end, "frame {frame}: out of order");
                previous_end = span.end_ns;
            }
            assert!(downloads[0].start_ns >= previous_end && downloads[0].end_ns <= callback);
        }
        // The trace file names each stream's track by its stage.
        let mut json = Vec::new();
        trace.write_chrome(&mut json).unwrap();
        let text = String::from_utf8(json).unwrap();
        assert!(text.contains("GPU stream magnitude (slot 0)"), "{text}");
        let back = kplace::report::trace::Trace::read_chrome(&text, "trace").unwrap();
        assert_eq!(
            back.spans
                .iter()
                .filter(|s| s.kind == SpanKind::GpuLaunch)
                .count(),
            5 * ROWS / TILE
        );
    }
}

#[test]
fn profiling_times_gpu_stages_with_timing_events_and_only_when_asked() {
    let prepared = frames(2, 3);
    for profile in [false, true] {
        let gpus = SimProvider::with_delay(1, Duration::from_micros(200));
        let plan = sim_plan(&gpus, "gpu", "cpu", 1, 2, "");
        let options = executor::RunOptions {
            profile_gpu: profile,
            ..Default::default()
        };
        let report = executor::run_with(
            &plan,
            &mut FrameReplay::new(prepared.clone(), 6),
            &mut Collect::default(),
            &options,
        )
        .unwrap();
        let stats = gpus.device(0).unwrap().stats();
        assert_eq!(
            report.stages[1].gpu_per_frame, None,
            "a CPU stage has no GPU time"
        );
        if profile {
            // Per slot: a pair per tile and one around the download.
            assert_eq!(stats.timing_events, 2 * 2 * ((ROWS / TILE) as u64 + 1));
            let gpu = report.stages[0].gpu_per_frame.expect("profiled");
            // Each tile's pair spans at least its upload and its launch, each delayed.
            assert!(
                gpu >= Duration::from_micros(2 * 200 * (ROWS / TILE) as u64),
                "{gpu:?}"
            );
        } else {
            assert_eq!(stats.timing_events, 0, "fences need no timing");
            assert_eq!(report.stages[0].gpu_per_frame, None);
        }
    }
}

/// Data movements the runtime does not do are refused at plan time, naming the tensor and the
/// stages: a host tensor read by two GPU stages, and an edge between two GPUs.
#[test]
fn unsupported_crossings_are_refused_with_the_tensor_and_stages() {
    let graph = || {
        Graph::parse(
            &format!(
                "name: fanout
dims: {{R: {ROWS}, C: {COLS}}}
source: {{tensor: iq, packet_axis: 0}}
tensors:
  - {{name: iq, dtype: ci16, shape: [R, C]}}
  - {{name: mag, dtype: f32, shape: [R, C]}}
  - {{name: a, dtype: f32, shape: [C]}}
  - {{name: b, dtype: f32, shape: [C]}}
stages:
  - {{name: magnitude, kernel: test.magnitude2, inputs: [iq], outputs: [mag]}}
  - {{name: sum_a, kernel: test.column_sum, inputs: [mag], outputs: [a]}}
  - {{name: sum_b, kernel: test.column_sum, inputs: [mag], outputs: [b]}}
sinks: [a, b]
"
            ),
            Path::new("graphs/fanout.yaml"),
            &Overrides::default(),
        )
        .unwrap()
    };
    let lib = build_c_library("test_kernels.c", "test_kernels", &[]);
    let plan = |devices: [&str; 3]| {
        let text = format!(
            "name: p\nlibraries: {{cpu: {lib}, gpu: {lib}}}\nstages: {{magnitude: {}, sum_a: {}, sum_b: {}}}\n",
            devices[0],
            devices[1],
            devices[2],
            lib = lib.display()
        );
        Plan::with_gpus(
            graph(),
            Placement::parse(&text, Path::new("p.yaml")).unwrap(),
            &SimProvider::new(2),
            PlanMode::Run,
        )
    };
    let e = plan(["cpu", "gpu", "gpu"]).unwrap_err().to_string();
    assert!(
        e.contains("tensor mag") && e.contains("read by 2 GPU stages (sum_a, sum_b)"),
        "{e}"
    );
    let e = plan(["gpu:0", "gpu:0", "gpu:1"]).unwrap_err().to_string();
    assert!(
        e.contains("tensor mag")
            && e.contains("written on gpu:0 by magnitude and read on gpu:1 by sum_b"),
        "{e}"
    );
    // One GPU reader and a CPU reader of a GPU tensor: a download for the CPU, a wait for the GPU.
    let ok = plan(["gpu", "gpu", "cpu"]).unwrap();
    assert!(ok.edges[1].mirror.is_some());
    assert_eq!(ok.stages[1].gpu().unwrap().waits, vec![TensorId(1)]);
}

/// Wherever the device runs out of streams, events or memory while a run starts (its pools,
/// then each slot's streams, fences and timing events), the run fails naming the refusal, and
/// everything made before it is released: building is `?` all the way down over owned handles.
#[test]
fn a_device_out_of_resources_at_any_point_fails_the_run_and_leaks_nothing() {
    let prepared = frames(2, 5);
    let options = executor::RunOptions {
        profile_gpu: true,
        ..Default::default()
    };
    let run = |gpus: &SimProvider| {
        let plan = sim_plan(gpus, "gpu", "gpu", 1, 2, "");
        executor::run_with(
            &plan,
            &mut FrameReplay::new(prepared.clone(), 4).by_packets(),
            &mut Collect::default(),
            &options,
        )
    };
    let gpus = SimProvider::new(1);
    let report = run(&gpus).expect("unlimited, the run succeeds");
    assert_eq!(report.frames, 4);
    let sim = gpus.device(0).unwrap();
    assert_eq!(sim.live_handles(), 0, "a finished run releases everything");
    let stats = sim.stats();
    let made = stats.streams + stats.events + stats.device_allocations + stats.pinned_allocations;
    assert!(
        made > 20,
        "pools, streams, fences and timing events: {stats:?}"
    );
    for limit in 0..made as usize {
        let gpus = SimProvider::new(1);
        let sim = gpus.device(0).unwrap();
        sim.limit_handles(limit);
        let err = run(&gpus)
            .expect_err("the device refuses a handle")
            .to_string();
        assert!(err.contains("out of resources"), "limit {limit}: {err}");
        assert_eq!(
            sim.live_handles(),
            0,
            "limit {limit}: everything made was released"
        );
    }
    // A replay that cannot stage its frames (the device refuses the pinned memory once the
    // run is built) writes them packet by packet instead: the run goes on, exact, and
    // releases everything, the frames it staged before the refusal included.
    for graphs in [false, true] {
        let options = executor::RunOptions {
            profile_gpu: !graphs,
            ..Default::default()
        };
        let run = |gpus: &SimProvider, source: &mut FrameReplay, sink: &mut Collect| {
            let mut plan = sim_plan(gpus, "gpu", "gpu", 1, 2, "");
            plan.runtime.gpu_graphs = graphs;
            executor::run_with(&plan, source, sink, &options)
        };
        // What the run makes when it writes its frames packet by packet: the limit then
        // leaves nothing for staging.
        let gpus = SimProvider::new(1);
        let replay = FrameReplay::new(prepared.clone(), 4).by_packets();
        run(&gpus, &mut { replay }, &mut Collect::default()).unwrap();
        let s = gpus.device(0).unwrap().stats();
        let made = s.streams + s.events + s.device_allocations + s.pinned_allocations + s.graphs;
        let gpus = SimProvider::new(1);
        let sim = gpus.device(0).unwrap();
        sim.limit_handles(made as usize);
        let mut sink = Collect::default();
        let report = run(&gpus, &mut FrameReplay::new(prepared.clone(), 4), &mut sink)
            .expect("staging short of pinned memory is not a failure");
        assert_eq!(report.frames, 4);
        assert_eq!(
            report.overhead.source.staging,
            Duration::ZERO,
            "nothing staged"
        );
        for (id, sums) in &sink.frames {
            assert_eq!(
                sums,
                &expected_sums(&prepared[*id as usize % 2]),
                "frame {id}"
            );
        }
        assert_eq!(
            sim.live_handles(),
            0,
            "graphs {graphs}: everything released"
        );
    }
}

/// A slot whose graph cannot be made (here the device refuses the graph's handle) leaves the
/// run to go on without graphs, every GPU stage on its own stream, exact, and leaking nothing.
#[test]
fn a_graph_that_cannot_be_made_leaves_the_run_on_each_stages_own_stream() {
    let prepared = frames(2, 9);
    let run = |gpus: &SimProvider, graphs: bool| {
        let mut plan = sim_plan(gpus, "gpu", "gpu", 1, 2, "");
        plan.runtime.gpu_graphs = graphs;
        let mut sink = Collect::default();
        let source = &mut FrameReplay::new(prepared.clone(), 6).by_packets();
        let report = executor::run(&plan, source, &mut sink).map(|r| r.frames);
        (report, sink)
    };
    // Everything the path without graphs makes, all alive at once, and one more: the first
    // slot's graph is made, the second's refused.
    let gpus = SimProvider::new(1);
    run(&gpus, false).0.unwrap();
    let s = gpus.device(0).unwrap().stats();
    let made = s.streams + s.events + s.device_allocations + s.pinned_allocations;
    let gpus = SimProvider::new(1);
    let sim = gpus.device(0).unwrap();
    sim.limit_handles(made as usize + 1);
    let (frames_run, sink) = run(&gpus, true);
    assert_eq!(frames_run.unwrap(), 6);
    for (id, sums) in &sink.frames {
        assert_eq!(
            sums,
            &expected_sums(&prepared[*id as usize % 2]),
            "frame {id}"
        );
    }
    let stats = sim.stats();
    assert_eq!(
        (stats.graphs, stats.graph_launches),
        (1, 0),
        "the first slot's graph, made and destroyed with the abandoned build; none launched"
    );
    assert_eq!(
        (stats.records, stats.callbacks),
        (6 * 2, 6 * 2),
        "each GPU stage fenced itself"
    );
    assert_eq!(
        sim.live_handles(),
        0,
        "the abandoned first build left nothing"
    );
}

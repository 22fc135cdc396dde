//! What a frame costs the host and the GPU, per placement: the real radar graph and the real
//! placement files, planned and run on the simulated GPU (`kplace::cuda::sim`) with stand-in
//! kernels of the radar kernels' names, ports and shapes (`c/radar_shapes.c`), counting every
//! driver call that enqueues work (a graph launch once, whatever it holds), every host
//! callback, and the work they enqueue: kernel-library launches, copies, event operations,
//! synchronizations and allocations, per frame. Every frame's detections are checked.
//!
//! The counts are the runtime's side of the hot path (`kplace::plan::gpu_path`): in a closed
//! loop (a replay's whole frames, staged once in pinned memory) a placement's GPU work for a
//! frame is the staged frame's upload and one launch of the slot's graph, captured at start
//! with the host callback that releases the CPU's clustering; fed packet by packet (a stream),
//! the range FFT's tiles go up and are launched as their chirps arrive, then the graph.
//! Nothing is allocated or synchronized per frame. What each library launch enqueues on the
//! device (kernels and cuFFT executions) is counted by the GPU library's own tests
//! (`workloads/radar/kernels/gpu/tests/hot_path.rs`); inside a graph it costs the host nothing
//! per frame.

#![allow(clippy::result_large_err)]

use std::path::Path;

use kplace::cuda::sim::{SimProvider, SimStats};
use kplace::executor::{self, CompletedFrame, Delivery, FrameSink, PartialFrame, SinkError};
use kplace::model::graph::{Graph, Overrides};
use kplace::model::placement::Placement;
use kplace::net::replay::FrameReplay;
use kplace::plan::gpu_path::GpuPath;
use kplace::plan::{Plan, PlanMode, TileOrigin};
use kplace_testkit::{build_c_library, workspace};

/// A frame's shape: samples per chirp (range bins) and chirps (Doppler bins).
#[derive(Clone, Copy, Debug)]
struct Cpi {
    n: usize,
    m: usize,
}

const SMALL: Cpi = Cpi { n: 1024, m: 128 };
const LARGE: Cpi = Cpi { n: 4096, m: 512 };
const SLOTS: u64 = 4;

/// The budget for a closed-loop all-gpu frame: what the host may ask of the driver.
const MAX_DRIVER_CALLS: u64 = 4;
const MAX_CALLBACKS: u64 = 1;

fn radar_graph(cpi: Cpi) -> Graph {
    let overrides = Overrides {
        dims: vec![("N".into(), cpi.n as u64), ("M".into(), cpi.m as u64)],
        params: Vec::new(),
    };
    Graph::load(&workspace().join("workloads/radar/graph.yaml"), &overrides)
        .expect("workloads/radar/graph.yaml")
}

/// A placement file of the repository, with the stand-in library for both device kinds.
fn placement(name: &str, tile: Option<u64>) -> Placement {
    let path = workspace().join(format!("workloads/radar/placements/{name}.yaml"));
    let mut text = std::fs::read_to_string(&path).expect("placement file");
    if let Some(tile) = tile {
        text = text.replace(
            "range_fft: gpu",
            &format!("range_fft: {{device: gpu, tile: {tile}}}"),
        );
    }
    let mut placement = Placement::parse(&text, &path).expect("placement parses");
    let lib = build_c_library("radar_shapes.c", "radar_shapes", &[]);
    placement.libraries.insert("cpu".into(), lib.clone());
    placement.libraries.insert("gpu".into(), lib);
    placement.runtime.slots = SLOTS as usize;
    placement
}

/// The same placement without graphs: every GPU stage on its own stream, as before issue 50.
fn without_graphs(name: &str) -> Placement {
    let mut placement = placement(name, None);
    placement.runtime.gpu_graphs = false;
    placement
}

/// `(range bin, Doppler bin)` of detected cells, row-major.
type Cells = Vec<(u32, u32)>;

/// A frame of zeros but for a few samples, and the cells the stand-in CFAR then reports:
/// every non-zero sample's.
fn frame(cpi: Cpi, seed: usize) -> (Vec<u8>, Cells) {
    let Cpi { n, m } = cpi;
    let mut iq = vec![0i16; m * n * 2];
    let mut cells = Vec::new();
    for i in 0..5 {
        let (chirp, sample) = ((seed * 37 + i * 101) % m, (seed * 131 + i * 977) % n);
        iq[2 * (chirp * n + sample)] = (i as i16 + 1) * 3;
        iq[2 * (chirp * n + sample) + 1] = -(seed as i16) - 1;
        cells.push((sample as u32, chirp as u32));
    }
    cells.sort_unstable();
    let bytes = iq.iter().flat_map(|v| v.to_ne_bytes()).collect();
    (bytes, cells)
}

#[derive(Default)]
struct Collect {
    frames: Vec<(u64, Cells)>,
    partial: u64,
}

impl FrameSink for Collect {
    fn frame(&mut self, frame: &CompletedFrame<'_>) -> Result<(), SinkError> {
        let list = frame.sink(0);
        let word = |i: usize| u32::from_ne_bytes(list[i * 4..i * 4 + 4].try_into().unwrap());
        let count = word(0) as usize;
        let cells = (0..count)
            .map(|r| (word(4 + 3 * r), word(5 + 3 * r)))
            .collect();
        self.frames.push((frame.frame_id, cells));
        Ok(())
    }

    fn partial(&mut self, _frame: &PartialFrame) -> Result<(), SinkError> {
        self.partial += 1;
        Ok(())
    }
}

/// Runs `frames` frames of `placement` at `cpi` on a fresh simulated GPU, the replay handing
/// frames over as `delivery` says; checks every frame's cells; returns what the GPU was asked
/// to do and what the plan says a frame costs.
fn run(placement: &Placement, cpi: Cpi, frames: u64, delivery: Delivery) -> (SimStats, u64, u64) {
    let gpus = SimProvider::new(1);
    let plan = Plan::with_gpus(radar_graph(cpi), placement.clone(), &gpus, PlanMode::Run)
        .unwrap_or_else(|e| panic!("{}: {e}", placement.name));
    let prepared: Vec<(Vec<u8>, Cells)> = (0..3).map(|seed| frame(cpi, seed)).collect();
    let replay = FrameReplay::new(
        prepared.iter().map(|(f, _)| f.clone()).collect::<Vec<_>>(),
        frames,
    );
    let mut source = match delivery {
        Delivery::Frames => replay,
        Delivery::Packets => replay.by_packets(),
    };
    let mut sink = Collect::default();
    let report = executor::run(&plan, &mut source, &mut sink)
        .unwrap_or_else(|e| panic!("{}: {e}", placement.name));
    assert_eq!(
        (report.frames, sink.partial),
        (frames, 0),
        "{}",
        placement.name
    );
    for (id, cells) in &sink.frames {
        assert_eq!(
            cells,
            &prepared[*id as usize % 3].1,
            "{}: frame {id}",
            placement.name
        );
    }
    let stated = GpuPath::new(&plan, delivery, false).per_frame(&plan, false);
    (
        gpus.device(0).unwrap().stats(),
        stated.driver_calls,
        stated.callbacks,
    )
}

/// What one frame costs: the difference between a long and a short run, per frame. Anything
/// paid once (pools, kernel states, streams, events, graphs, staging, the final drain)
/// cancels out.
#[derive(Debug, PartialEq, Eq)]
struct PerFrame {
    /// Driver calls that enqueue work (a graph launch one).
    driver_calls: u64,
    /// Host callbacks run.
    callbacks: u64,
    /// Of the driver calls, graph launches.
    graph_launches: u64,
    /// The work enqueued, directly or by the graph: kernel-library launches and copies.
    launches: u64,
    uploads: u64,
    downloads: u64,
    records: u64,
    waits: u64,
    synchronizations: u64,
    allocations: u64,
    events: u64,
}

fn per_frame(placement: &Placement, cpi: Cpi, delivery: Delivery) -> (PerFrame, SimStats) {
    const SHORT: u64 = 2;
    const LONG: u64 = 8;
    let (a, ..) = run(placement, cpi, SHORT, delivery);
    let (b, calls, callbacks) = run(placement, cpi, LONG, delivery);
    let per = |f: fn(&SimStats) -> u64| {
        let delta = f(&b) - f(&a);
        assert_eq!(
            delta % (LONG - SHORT),
            0,
            "{}: a count that is not the same every frame",
            placement.name
        );
        delta / (LONG - SHORT)
    };
    let counts = PerFrame {
        driver_calls: per(|s| s.driver_calls),
        callbacks: per(|s| s.callbacks),
        graph_launches: per(|s| s.graph_launches),
        launches: per(|s| s.launches),
        uploads: per(|s| s.uploads),
        downloads: per(|s| s.downloads),
        records: per(|s| s.records),
        waits: per(|s| s.waits),
        synchronizations: per(|s| s.synchronizations),
        allocations: per(|s| s.device_allocations + s.pinned_allocations),
        events: per(|s| s.events),
    };
    assert_eq!(
        (counts.driver_calls, counts.callbacks),
        (calls, callbacks),
        "{} ({delivery:?}): what the plan's GPU path states per frame",
        placement.name
    );
    (counts, b)
}

/// The budget: a closed-loop all-gpu run asks the driver for at most 4 calls and 1 host
/// callback per frame, at 1024x128 and at 4096x512. It is 2 and 1: the staged frame's upload
/// (its address changes from frame to frame, so it is not in the graph) and the slot's graph
/// (the range FFT's 4 tiles, the Doppler FFT, CFAR, the detection list's download and the
/// callback that releases the CPU's clustering and the frame). The budget catches the path
/// without graphs, each stage on its own stream, as every run took it before: 19 calls and 3
/// callbacks a frame.
#[test]
fn a_closed_loop_all_gpu_frame_costs_at_most_four_driver_calls_and_one_host_callback() {
    for cpi in [SMALL, LARGE] {
        let (counts, total) = per_frame(&placement("all-gpu", None), cpi, Delivery::Frames);
        let at = format!("{}x{}", cpi.n, cpi.m);
        assert!(
            counts.driver_calls <= MAX_DRIVER_CALLS && counts.callbacks <= MAX_CALLBACKS,
            "all-gpu closed loop at {at}: {counts:?}"
        );
        assert_eq!(
            counts,
            PerFrame {
                driver_calls: 2,
                callbacks: 1,
                graph_launches: 1,
                launches: 4 + 1 + 1,
                uploads: 1,
                downloads: 1,
                records: 0,
                waits: 0,
                synchronizations: 0,
                allocations: 0,
                events: 0,
            },
            "all-gpu closed loop at {at}"
        );
        assert_eq!(total.graphs, SLOTS, "one graph per slot, captured at start");

        // Fed packet by packet, as a stream is: each of the range FFT's 4 tiles is uploaded
        // and launched as its chirps complete (2 calls each; a tile's work cannot be in a
        // graph launched before its packets arrive), then the graph of the Doppler FFT and
        // CFAR: 9 calls, the same one callback.
        let (streamed, _) = per_frame(&placement("all-gpu", None), cpi, Delivery::Packets);
        assert_eq!(
            (
                streamed.driver_calls,
                streamed.callbacks,
                streamed.uploads,
                streamed.graph_launches
            ),
            (4 * 2 + 1, 1, 4, 1),
            "all-gpu streamed at {at}"
        );

        // Without graphs (each stage on its own stream), as before: 4 uploads, 6 library
        // launches, 1 download, 3 event records, 2 stream waits and 3 host callbacks.
        let (before, _) = per_frame(&without_graphs("all-gpu"), cpi, Delivery::Packets);
        assert_eq!(
            (before.driver_calls, before.callbacks),
            (4 + 6 + 1 + 3 + 2 + 3, 3),
            "all-gpu without graphs at {at}"
        );
        assert!(
            before.driver_calls > MAX_DRIVER_CALLS && before.callbacks > MAX_CALLBACKS,
            "the budget catches the path without graphs at {at}"
        );
    }
}

#[test]
fn every_gpu_placement_enqueues_little_and_allocates_nothing_per_frame() {
    // (placement, GPU stages, delivery, driver calls, library launches, uploads, downloads)
    // per frame at 4096x512; every placement has one callback a frame (its last GPU stage has
    // a CPU reader), records no event and waits on none (its GPU stages share a stream).
    let cases = [
        // The staged frame up, then the graph: 4 range-FFT tiles of 128 chirps (the GPU's
        // default), Doppler, CFAR, the detection list down.
        ("all-gpu", 3, Delivery::Frames, 2, 4 + 1 + 1, 1, 1),
        // Each tile up and launched as its chirps arrive, then the graph.
        ("all-gpu", 3, Delivery::Packets, 4 * 2 + 1, 4 + 1 + 1, 4, 1),
        // The range map up, Doppler, CFAR and the detection list down, all in the graph: the
        // CPU reads the samples, so the replay writes them into the slot as a stream would.
        ("hybrid", 2, Delivery::Frames, 1, 1 + 1, 1, 1),
        ("hybrid", 2, Delivery::Packets, 1, 1 + 1, 1, 1),
        // The staged frame up, then the graph of the FFTs and the power map's download.
        ("gpu-fft", 2, Delivery::Frames, 2, 4 + 1, 1, 1),
        ("gpu-fft", 2, Delivery::Packets, 4 * 2 + 1, 4 + 1, 4, 1),
        // The graph: the power map up, CFAR, the detection list down.
        ("cfar-gpu", 1, Delivery::Frames, 1, 1, 1, 1),
        ("cfar-gpu", 1, Delivery::Packets, 1, 1, 1, 1),
    ];
    for (name, gpu_stages, delivery, driver_calls, launches, uploads, downloads) in cases {
        let (counts, total) = per_frame(&placement(name, None), LARGE, delivery);
        assert_eq!(
            counts,
            PerFrame {
                driver_calls,
                callbacks: 1,
                graph_launches: 1,
                launches,
                uploads,
                downloads,
                records: 0,
                waits: 0,
                synchronizations: 0,
                allocations: 0,
                events: 0,
            },
            "{name} ({delivery:?}) per frame at 4096x512"
        );
        assert!(
            counts.driver_calls <= MAX_DRIVER_CALLS || delivery == Delivery::Packets,
            "{name}: the budget in a closed loop"
        );
        // The final drain synchronizes each GPU stage's stream of every slot, once.
        assert_eq!(
            total.synchronizations,
            SLOTS * gpu_stages,
            "{name}: only the drain synchronizes"
        );
        // Everything allocated was allocated at start and freed at the end.
        assert_eq!(
            total.events,
            SLOTS * gpu_stages,
            "{name}: one event per GPU stage and slot"
        );
    }
    // Without graphs, what each stage enqueues on its own stream per frame: its waits, its
    // uploads (tile by tile for a streamed stage), its launches, its downloads, its event and
    // its callback.
    for (name, calls, callbacks) in [
        ("all-gpu", 4 + 6 + 1 + 3 + 2 + 3, 3),
        ("hybrid", 1 + 2 + 1 + 2 + 1 + 2, 2),
        ("gpu-fft", 4 + 5 + 1 + 2 + 1 + 2, 2),
        ("cfar-gpu", 1 + 1 + 1 + 1 + 1, 1),
    ] {
        let (counts, _) = per_frame(&without_graphs(name), LARGE, Delivery::Packets);
        assert_eq!(
            (counts.driver_calls, counts.callbacks, counts.graph_launches),
            (calls, callbacks, 0),
            "{name} without graphs"
        );
    }
}

#[test]
fn a_placement_tile_overrides_the_gpu_default() {
    // The graph's own 16-chirp tiles on the GPU: 32 launches, and 32 uploads as a stream's
    // chirps arrive; in a closed loop the whole frame goes up in one copy, and the launches
    // are the graph's, so the host's calls stay 2.
    let tiled = placement("all-gpu", Some(16));
    let (counts, _) = per_frame(&tiled, LARGE, Delivery::Packets);
    assert_eq!(
        (counts.launches, counts.uploads, counts.driver_calls),
        (32 + 2, 32, 32 * 2 + 1)
    );
    let (counts, _) = per_frame(&tiled, LARGE, Delivery::Frames);
    assert_eq!(
        (counts.launches, counts.uploads, counts.driver_calls),
        (32 + 2, 1, 2)
    );
    // The whole frame in one launch, its samples in one upload.
    let (counts, _) = per_frame(
        &placement("gpu-fft", Some(LARGE.m as u64)),
        LARGE,
        Delivery::Packets,
    );
    assert_eq!((counts.launches, counts.uploads), (1 + 1, 1));
}

#[test]
fn the_plan_says_where_each_tile_came_from() {
    let gpus = SimProvider::new(1);
    let plan = Plan::with_gpus(
        radar_graph(LARGE),
        placement("all-gpu", None),
        &gpus,
        PlanMode::Run,
    )
    .unwrap();
    assert_eq!(
        plan.stages[0].tile_origin,
        Some(TileOrigin::GpuDefault { graph_tile: 16 })
    );
    assert_eq!(plan.stages[0].launches, 4);
    assert_eq!(plan.graph.stages[0].split.unwrap().tile, 128);
    assert_eq!(plan.stages[1].tile_origin, None, "Doppler is not split");
    let text = plan.to_string();
    assert!(
        text.contains(
            "4 tiles of 128 along axis 0 (the GPU's default, a quarter of the axis; graph: 16)"
        ) && text.contains("in 4 pieces of 2.0 MiB"),
        "{text}"
    );
    // On the CPU the graph's tile stands.
    let plan = Plan::with_gpus(
        radar_graph(LARGE),
        placement("hybrid", None),
        &gpus,
        PlanMode::Run,
    )
    .unwrap();
    assert_eq!(plan.stages[0].tile_origin, Some(TileOrigin::Graph));
    assert_eq!(plan.stages[0].launches, 32);
    // A placement's tile, on either device.
    let text = std::fs::read_to_string(workspace().join("workloads/radar/placements/hybrid.yaml"))
        .unwrap()
        .replace("range_fft: cpu", "range_fft: {device: cpu, tile: 64}");
    let mut tiled =
        Placement::parse(&text, Path::new("workloads/radar/placements/hybrid.yaml")).unwrap();
    tiled.libraries = placement("hybrid", None).libraries;
    let plan = Plan::with_gpus(radar_graph(LARGE), tiled, &gpus, PlanMode::Run).unwrap();
    assert_eq!(plan.stages[0].tile_origin, Some(TileOrigin::Placement));
    assert_eq!(plan.stages[0].launches, 8);
}

#[test]
fn a_tile_that_does_not_fit_is_refused_naming_the_placement_line() {
    let gpus = SimProvider::new(1);
    let plan = |placement| Plan::with_gpus(radar_graph(LARGE), placement, &gpus, PlanMode::Run);
    let e = plan(placement("all-gpu", Some(100)))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("workloads/radar/placements/all-gpu.yaml:")
            && e.contains(
                "stage range_fft: tile 100 does not divide the 512 indices of axis 0 of iq"
            )
            && e.contains("tiles that do: 1, 2, 4, 8, 16, 32, 64, 128, 256, 512"),
        "{e}"
    );
    let path = workspace().join("workloads/radar/placements/all-gpu.yaml");
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("cfar: gpu", "cfar: {device: gpu, tile: 8}");
    let mut untileable = Placement::parse(&text, &path).unwrap();
    untileable.libraries = placement("all-gpu", None).libraries;
    let e = plan(untileable).unwrap_err().to_string();
    assert!(
        e.contains("stage cfar: tile 8 given, but graph")
            && e.contains("does not split this stage"),
        "{e}"
    );
}

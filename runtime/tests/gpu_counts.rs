//! What a frame costs the GPU, per placement, at 4096x512: the real radar graph and the real
//! placement files, planned and run on the simulated GPU (`kplace::cuda::sim`) with stand-in
//! kernels of the radar kernels' names, ports and shapes (`c/radar_shapes.c`), counting every
//! kernel-library launch, copy, event operation, synchronization and allocation per frame.
//!
//! The counts are the runtime's side of the hot path: a GPU stage's launches are its tiles
//! (the GPU's default tile is a quarter of the axis, `kplace::plan::tiles`), each tile's
//! chirps go up in one copy, and nothing is allocated or synchronized per frame. What each
//! launch enqueues on the device (kernels and cuFFT executions) is counted by the GPU
//! library's own tests (`workloads/radar/kernels/gpu/tests/launches.rs`).

#![allow(clippy::result_large_err)]

use std::path::Path;

use kplace::cuda::sim::{SimProvider, SimStats};
use kplace::executor::{self, CompletedFrame, FrameSink, PartialFrame, SinkError};
use kplace::model::graph::{Graph, Overrides};
use kplace::model::placement::Placement;
use kplace::net::replay::FrameReplay;
use kplace::plan::{Plan, PlanMode, TileOrigin};
use kplace_testkit::{build_c_library, workspace};

/// Samples per chirp (range bins).
const N: usize = 4096;
/// Chirps per frame (Doppler bins).
const M: usize = 512;
const SLOTS: u64 = 4;

fn radar_graph() -> Graph {
    let overrides = Overrides {
        dims: vec![("N".into(), N as u64), ("M".into(), M as u64)],
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

/// `(range bin, Doppler bin)` of detected cells, row-major.
type Cells = Vec<(u32, u32)>;

/// A frame of zeros but for a few samples, and the cells the stand-in CFAR then reports:
/// every non-zero sample's.
fn frame(seed: usize) -> (Vec<u8>, Cells) {
    let mut iq = vec![0i16; M * N * 2];
    let mut cells = Vec::new();
    for i in 0..5 {
        let (chirp, sample) = ((seed * 37 + i * 101) % M, (seed * 131 + i * 977) % N);
        iq[2 * (chirp * N + sample)] = (i as i16 + 1) * 3;
        iq[2 * (chirp * N + sample) + 1] = -(seed as i16) - 1;
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

/// Runs `frames` frames of `placement` on a fresh simulated GPU; checks every frame's cells;
/// returns what the GPU was asked to do.
fn run(placement: &Placement, frames: u64) -> SimStats {
    let gpus = SimProvider::new(1);
    let plan = Plan::with_gpus(radar_graph(), placement.clone(), &gpus, PlanMode::Run)
        .unwrap_or_else(|e| panic!("{}: {e}", placement.name));
    let prepared: Vec<(Vec<u8>, Cells)> = (0..3).map(frame).collect();
    let mut source = FrameReplay::new(
        prepared.iter().map(|(f, _)| f.clone()).collect::<Vec<_>>(),
        frames,
    );
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
    gpus.device(0).unwrap().stats()
}

/// What one frame costs: the difference between a long and a short run, per frame. Anything
/// paid once (pools, kernel states, streams, events, the final drain) cancels out.
#[derive(Debug, PartialEq, Eq)]
struct PerFrame {
    launches: u64,
    uploads: u64,
    downloads: u64,
    records: u64,
    waits: u64,
    callbacks: u64,
    synchronizations: u64,
    allocations: u64,
    events: u64,
}

fn per_frame(placement: &Placement) -> (PerFrame, SimStats) {
    const SHORT: u64 = 2;
    const LONG: u64 = 8;
    let (a, b) = (run(placement, SHORT), run(placement, LONG));
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
        launches: per(|s| s.launches),
        uploads: per(|s| s.uploads),
        downloads: per(|s| s.downloads),
        records: per(|s| s.records),
        waits: per(|s| s.waits),
        callbacks: per(|s| s.callbacks),
        synchronizations: per(|s| s.synchronizations),
        allocations: per(|s| s.device_allocations + s.pinned_allocations),
        events: per(|s| s.events),
    };
    (counts, b)
}

#[test]
fn every_gpu_placement_launches_and_copies_little_and_allocates_nothing_per_frame() {
    // (placement, GPU stages, ABI launches, uploads, downloads, stream waits)
    let cases = [
        // 4 range-FFT tiles of 128 chirps (the GPU's default), Doppler, CFAR; the chirps go
        // up in the 4 tiles, only the detection list comes down.
        ("all-gpu", 3, 4 + 1 + 1, 4, 1, 2),
        // The range map up once, the detection list down.
        ("hybrid", 2, 1 + 1, 1, 1, 1),
        // The chirps up in 4 tiles, the power map down.
        ("gpu-fft", 2, 4 + 1, 4, 1, 1),
        // The power map up, the detection list down.
        ("cfar-gpu", 1, 1, 1, 1, 0),
    ];
    for (name, gpu_stages, launches, uploads, downloads, waits) in cases {
        let (counts, total) = per_frame(&placement(name, None));
        assert_eq!(
            counts,
            PerFrame {
                launches,
                uploads,
                downloads,
                records: gpu_stages,
                waits,
                callbacks: gpu_stages,
                synchronizations: 0,
                allocations: 0,
                events: 0,
            },
            "{name} per frame at {N}x{M}"
        );
        assert!(
            counts.uploads <= 8 && counts.launches <= 16,
            "{name}: the issue's bound"
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
}

#[test]
fn a_placement_tile_overrides_the_gpu_default() {
    // The graph's own 16-chirp tiles on the GPU: 32 launches and uploads per frame.
    let (counts, _) = per_frame(&placement("all-gpu", Some(16)));
    assert_eq!((counts.launches, counts.uploads), (32 + 2, 32));
    // The whole frame in one launch, its samples in one upload.
    let (counts, _) = per_frame(&placement("gpu-fft", Some(M as u64)));
    assert_eq!((counts.launches, counts.uploads), (1 + 1, 1));
}

#[test]
fn the_plan_says_where_each_tile_came_from() {
    let gpus = SimProvider::new(1);
    let plan = Plan::with_gpus(
        radar_graph(),
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
        radar_graph(),
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
    let plan = Plan::with_gpus(radar_graph(), tiled, &gpus, PlanMode::Run).unwrap();
    assert_eq!(plan.stages[0].tile_origin, Some(TileOrigin::Placement));
    assert_eq!(plan.stages[0].launches, 8);
}

#[test]
fn a_tile_that_does_not_fit_is_refused_naming_the_placement_line() {
    let gpus = SimProvider::new(1);
    let plan = |placement| Plan::with_gpus(radar_graph(), placement, &gpus, PlanMode::Run);
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

//! Constant tensors: a graph's `.npy` array handed to every frame's launches as an input, on the
//! CPU and on the simulated GPU (uploaded once, before the first frame), exactly, whatever the
//! workers and slots.
//!
//! The C test library's `test.weigh` multiplies each column of a frame's magnitudes by the
//! constant's value for it; the reference computes the same products and sums in the same
//! order, so the comparison is exact. A constant missing from a slot, not uploaded, or uploaded
//! after the launch that reads it changes the sums.

// Plan errors carry the names and places a user needs; their size does not matter here.
#![allow(clippy::result_large_err)]

use std::path::Path;
use std::time::Duration;

use kplace::cuda::sim::SimProvider;
use kplace::executor;
use kplace::model::graph::{Graph, Overrides};
use kplace::model::placement::Placement;
use kplace::net::replay::FrameReplay;
use kplace::plan::{Lifetime, Plan, PlanMode};
use kplace_testkit::{build_c_library, test_frames};

const ROWS: usize = 16;
const COLS: usize = 8;
const FRAMES: u64 = 24;

/// The weights, one per column: varied signs and magnitudes, so that a zeroed or stale mirror
/// shows.
fn weights() -> Vec<f32> {
    (0..COLS).map(|c| (c as f32 - 2.5) * 0.75 + 0.125).collect()
}

/// Writes the graph and its constant `w.npy` into `dir`, as NumPy would write the array.
fn graph(dir: &Path) -> Graph {
    let data: Vec<u8> = weights().iter().flat_map(|v| v.to_le_bytes()).collect();
    let npy = kplace_testkit::npy::bytes("<f4", &format!("({COLS},)"), &data);
    std::fs::write(dir.join("w.npy"), npy).unwrap();
    let text = format!(
        "name: constant
dims: {{R: {ROWS}, C: {COLS}}}
source: {{tensor: iq, packet_axis: 0}}
tensors:
  - {{name: iq, dtype: ci16, shape: [R, C]}}
  - {{name: w, dtype: f32, shape: [C], npy: w.npy}}
  - {{name: mag, dtype: f32, shape: [R, C]}}
  - {{name: weighed, dtype: f32, shape: [R, C]}}
  - {{name: sums, dtype: f32, shape: [C]}}
stages:
  - name: magnitude
    kernel: test.magnitude2
    inputs: [iq]
    outputs: [mag]
    split: {{axis: 0, tile: 4}}
    params: {{scale: 0.25}}
  - {{name: weigh, kernel: test.weigh, inputs: [mag, w], outputs: [weighed], split: {{axis: 0, tile: 8}}}}
  - {{name: sum, kernel: test.column_sum, inputs: [weighed], outputs: [sums]}}
sinks: [sums]
"
    );
    let path = dir.join("constant.yaml");
    std::fs::write(&path, text).unwrap();
    Graph::load(&path, &Overrides::default()).unwrap()
}

fn plan(gpus: &SimProvider, devices: [&str; 3], workers: usize, slots: usize) -> Plan {
    let dir = tempfile::tempdir().unwrap();
    let lib = build_c_library("test_kernels.c", "test_kernels", &[]);
    let [magnitude, weigh, sum] = devices;
    let placement = Placement::parse(
        &format!(
            "name: p\nlibraries: {{cpu: {lib}, gpu: {lib}}}\nstages: {{magnitude: {magnitude}, weigh: {weigh}, sum: {sum}}}\nruntime: {{workers: {workers}, slots: {slots}}}\n",
            lib = lib.display()
        ),
        Path::new("p.yaml"),
    )
    .unwrap();
    Plan::with_gpus(graph(dir.path()), placement, gpus, PlanMode::Run).unwrap()
}

/// The sums `frame` must give: each magnitude `0.25 (I^2 + Q^2)` in f32, times its column's
/// weight in f32, summed over rows in f64 and rounded once, as the kernels compute.
fn expected(frame: &[u8]) -> Vec<f32> {
    let iq: Vec<f32> = frame
        .chunks_exact(2)
        .map(|b| f32::from(i16::from_le_bytes([b[0], b[1]])))
        .collect();
    let w = weights();
    (0..COLS)
        .map(|c| {
            let sum: f64 = (0..ROWS)
                .map(|r| {
                    let k = r * COLS + c;
                    let mag = 0.25f32 * (iq[2 * k] * iq[2 * k] + iq[2 * k + 1] * iq[2 * k + 1]);
                    f64::from(mag * w[c])
                })
                .sum();
            sum as f32
        })
        .collect()
}

#[test]
fn every_frame_reads_the_constant_on_the_cpu_and_on_the_gpu() {
    let prepared = test_frames(ROWS, COLS, 5, 7);
    let want: Vec<Vec<f32>> = prepared.iter().map(|f| expected(f)).collect();
    for devices in [
        ["cpu", "cpu", "cpu"],
        ["cpu", "gpu", "cpu"],
        ["gpu", "gpu", "gpu"],
        ["gpu", "cpu", "gpu"],
    ] {
        for ((workers, slots), packets) in [(1, 1), (2, 3)]
            .into_iter()
            .flat_map(|ws| [(ws, false), (ws, true)])
        {
            let case = format!("{devices:?}, {workers} workers, {slots} slots, packets {packets}");
            // Slow GPU operations: a launch enqueued before the constant's upload has landed
            // reads a zeroed mirror.
            let gpus = SimProvider::with_delay(1, Duration::from_micros(200));
            let plan = plan(&gpus, devices, workers, slots);
            let w = &plan.edges[1];
            assert_eq!(w.lifetime, Lifetime::Run, "{case}");
            let constant_pools: Vec<usize> = plan
                .pools
                .iter()
                .filter(|p| p.name == "w" || p.name == "w.mirror")
                .map(|p| p.blocks)
                .collect();
            let on_gpu = devices[1] == "gpu";
            assert_eq!(
                constant_pools,
                if on_gpu { vec![1, 1] } else { vec![1] },
                "{case}"
            );
            let shown = plan.to_string();
            assert_eq!(
                shown.contains("constant w (32 B) uploaded once"),
                on_gpu,
                "{case}: {shown}"
            );

            // A CPU stage between two GPU stages keeps every GPU stage on its own stream: a
            // graph cannot wait for the host mid-frame.
            let path = kplace::plan::gpu_path::GpuPath::new(
                &plan,
                kplace::executor::Delivery::Frames,
                false,
            );
            if devices == ["gpu", "cpu", "gpu"] {
                assert_eq!(
                    path.no_graph,
                    Some(kplace::plan::gpu_path::NoGraph::CpuBetween {
                        cpu: "weigh".into(),
                        before: "magnitude".into(),
                        after: "sum".into(),
                    }),
                    "{case}"
                );
            } else if devices.contains(&"gpu") {
                assert!(path.chain.is_some(), "{case}: {:?}", path.no_graph);
            }
            let mut sink = kplace_testkit::SumsSink::default();
            let source = FrameReplay::new(prepared.clone(), FRAMES);
            let mut source = if packets { source.by_packets() } else { source };
            let report = executor::run(&plan, &mut source, &mut sink)
                .unwrap_or_else(|e| panic!("{case}: {e}"));
            assert_eq!(report.frames, FRAMES, "{case}");
            assert_eq!(
                sink.partial,
                Vec::<u64>::new(),
                "no frame of a replay ends partial: {case}"
            );
            for (id, sums) in &sink.frames {
                assert_eq!(sums, &want[*id as usize % 5], "frame {id}: {case}");
            }
            assert_eq!(sink.frames.len() as u64, FRAMES, "{case}");
            if devices.contains(&"gpu") {
                let stats = gpus.device(0).unwrap().stats();
                // Per frame: the samples in magnitude's 4 tiles as their packets arrive, or
                // whole from the staged frame when the replay hands frames over whole; the
                // magnitudes in weigh's 2 tiles; the weighed frame whole for a GPU sum after a
                // CPU weigh; and the constant's one upload for the run.
                let samples = if packets { 4 } else { 1 };
                let per_frame = match devices {
                    ["gpu", "cpu", "gpu"] => samples + 1,
                    ["gpu", _, _] => samples,
                    ["cpu", "gpu", _] => 2,
                    _ => 1,
                };
                let once = u64::from(on_gpu);
                assert_eq!(stats.uploads, FRAMES * per_frame + once, "{case}");
                assert_eq!(stats.upload_bytes % 4, 0, "{case}");
            }
        }
    }
}

//! Stateful stages: a kernel that carries state from frame to frame sees the whole stream in
//! order, one frame at a time, whatever the workers and slots, with lost frames zero-filled or
//! resetting its carry as it declares, and the loss counted.
//!
//! The kernels are the C test library's leaky integrators (`y = 0.999 y + x` over the whole
//! stream), whose output depends on every earlier sample, so any frame run out of order, twice,
//! concurrently, or with another frame's carry changes it; they also check the runtime's account
//! of lost frames against the frame numbers they saw. The reference integrates the same samples
//! in the same order in double precision, so the comparison is exact.

// Plan errors carry the names and places a user needs; their size does not matter here.
#![allow(clippy::result_large_err)]

use std::path::Path;
use std::time::Duration;

use kplace::cuda::sim::SimProvider;
use kplace::executor::{
    self, CompletedFrame, FrameSink, Ingest, PartialFrame, SinkError, Source, SourceError,
};
use kplace::model::graph::{Graph, Overrides};
use kplace::model::placement::Placement;
use kplace::plan::{Plan, PlanError, PlanMode};
use kplace_testkit::build_c_library;

const ROWS: usize = 16;
const COLS: usize = 12;
const ALPHA: f64 = 0.999;

fn graph_text(kernel: &str, split: &str) -> String {
    format!(
        "name: stateful
dims: {{R: {ROWS}, C: {COLS}}}
source: {{tensor: iq, packet_axis: 0}}
tensors:
  - {{name: iq, dtype: ci16, shape: [R, C]}}
  - {{name: mag, dtype: f32, shape: [R, C]}}
  - {{name: y, dtype: f64, shape: [R, C]}}
stages:
  - name: magnitude
    kernel: test.magnitude2
    inputs: [iq]
    outputs: [mag]
    split: {{axis: 0, tile: 4}}
    params: {{scale: 0.25}}
  - {{name: integrate, kernel: {kernel}, inputs: [mag], outputs: [y]{split}}}
sinks: [y]
"
    )
}

fn plan(kernel: &str, device: &str, workers: usize, slots: usize) -> Result<Plan, PlanError> {
    plan_with(&graph_text(kernel, ""), device, workers, slots)
}

fn plan_with(graph: &str, device: &str, workers: usize, slots: usize) -> Result<Plan, PlanError> {
    let lib = build_c_library("test_kernels.c", "test_kernels", &[]);
    let graph = Graph::parse(graph, Path::new("stateful.yaml"), &Overrides::default()).unwrap();
    let placement = Placement::parse(
        &format!(
            "name: t\nlibraries: {{cpu: {lib}, gpu: {lib}}}\nstages: {{magnitude: cpu, integrate: {device}}}\nruntime: {{workers: {workers}, slots: {slots}}}\n",
            lib = lib.display()
        ),
        Path::new("p.yaml"),
    )
    .unwrap();
    // A simulated GPU slow enough (100 us before every operation) that a launch enqueued
    // without waiting for the frame before would read a carry not yet written.
    let gpus = SimProvider::with_delay(1, Duration::from_micros(100));
    Plan::with_gpus(graph, placement, &gpus, PlanMode::Run)
}

/// One frame the source sends: its number, its samples, and whether a packet is missing.
#[derive(Clone)]
struct Sent {
    id: u64,
    data: Vec<u8>,
    partial: bool,
}

/// The stream: numbers with gaps (frames never begun), partial frames, and a restart where
/// the numbers go back to 0.
fn stream(seed: u64) -> Vec<Sent> {
    let ids: Vec<u64> = (0..12).chain(15..30).chain(0..8).collect();
    let holes = [3u64, 4, 17, 22, 23, 24, 5];
    let data = kplace_testkit::test_frames(ROWS, COLS, ids.len(), seed);
    ids.iter()
        .zip(data)
        .enumerate()
        .map(|(i, (&id, data))| Sent {
            id,
            data,
            // Only the second frame 5, after the restart, is partial.
            partial: holes.contains(&id) && (id != 5 || i > 30),
        })
        .collect()
}

/// Sends the stream two frames at a time, packets interleaved, ending the second first, so
/// that a later frame's stages are often ready before an earlier one's.
struct Interleaved {
    frames: Vec<Sent>,
}

impl Source for Interleaved {
    fn run(&mut self, ingest: &mut Ingest<'_>) -> Result<(), SourceError> {
        let bytes = ingest.packet_bytes();
        for pair in self.frames.chunks(2) {
            let open: Vec<_> = pair
                .iter()
                .map(|f| {
                    ingest
                        .begin_frame(f.id)
                        .ok_or(SourceError::failed("stopping"))
                })
                .collect::<Result<_, _>>()?;
            for p in 0..ROWS {
                for (sent, frame) in pair.iter().zip(&open) {
                    if sent.partial && p == 9 {
                        continue;
                    }
                    let place = ingest.packet_mut(frame, p as u64).expect("place");
                    place.copy_from_slice(&sent.data[p * bytes..(p + 1) * bytes]);
                    ingest.packet_done(frame, p as u64);
                }
            }
            for frame in open.into_iter().rev() {
                ingest.finish(frame);
            }
        }
        Ok(())
    }
}

#[derive(Default)]
struct Collect {
    /// Every frame in delivery order: its number, and its output if it was processed.
    frames: Vec<(u64, Option<Vec<f64>>)>,
}

impl FrameSink for Collect {
    fn frame(&mut self, frame: &CompletedFrame<'_>) -> Result<(), SinkError> {
        let y = frame
            .sink(0)
            .chunks_exact(8)
            .map(|b| f64::from_ne_bytes(b.try_into().expect("8 bytes")))
            .collect();
        self.frames.push((frame.frame_id, Some(y)));
        Ok(())
    }

    fn partial(&mut self, frame: &PartialFrame) -> Result<(), SinkError> {
        self.frames.push((frame.frame_id, None));
        Ok(())
    }
}

/// The magnitudes the first stage computes, as the integrator reads them.
fn magnitudes(data: &[u8]) -> Vec<f32> {
    data.chunks_exact(4)
        .map(|b| {
            let i = f32::from(i16::from_le_bytes([b[0], b[1]]));
            let q = f32::from(i16::from_le_bytes([b[2], b[3]]));
            0.25f32 * (i * i + q * q)
        })
        .collect()
}

/// What the integrator must output for each processed frame, by the rules it declares.
fn reference(stream: &[Sent], reset_on_gap: bool) -> Vec<(u64, Option<Vec<f64>>)> {
    let n = ROWS * COLS;
    let mut y = 0.0f64;
    let mut last: Option<u64> = None;
    stream
        .iter()
        .map(|sent| {
            if sent.partial {
                return (sent.id, None);
            }
            match last {
                Some(last) if sent.id > last => {
                    let missing = sent.id - last - 1;
                    if missing > 0 && reset_on_gap {
                        y = 0.0;
                    }
                    if !reset_on_gap {
                        for _ in 0..missing as usize * n {
                            y *= ALPHA;
                        }
                    }
                }
                _ => y = 0.0,
            }
            last = Some(sent.id);
            let out = magnitudes(&sent.data)
                .into_iter()
                .map(|x| {
                    y = ALPHA * y + f64::from(x);
                    y
                })
                .collect();
            (sent.id, Some(out))
        })
        .collect()
}

#[test]
fn a_stateful_stage_sees_the_stream_in_order_for_any_workers_and_slots() {
    sees_the_stream_in_order("cpu");
}

/// On a GPU (simulated) the carry is device memory, and each frame's stream waits for the
/// stage's event in the frame before: the same stream, the same output.
#[test]
fn a_stateful_gpu_stage_sees_the_stream_in_order_for_any_workers_and_slots() {
    sees_the_stream_in_order("gpu:0");
}

fn sees_the_stream_in_order(device: &str) {
    let sent = stream(7);
    for (kernel, reset_on_gap) in [("test.leaky", false), ("test.leaky_reset", true)] {
        let want = reference(&sent, reset_on_gap);
        for workers in [1, 2, 4] {
            for slots in [2, 4] {
                let plan = plan(kernel, device, workers, slots).unwrap();
                let mut sink = Collect::default();
                let mut source = Interleaved {
                    frames: sent.clone(),
                };
                let metrics = executor::run(&plan, &mut source, &mut sink)
                    .unwrap_or_else(|e| panic!("{kernel}, {workers} workers, {slots} slots: {e}"));
                assert!(
                    sink.frames == want,
                    "{kernel}, {workers} workers, {slots} slots: the output differs from one \
                     integration of the stream"
                );
                let carry = metrics.stages[1].carry.expect("the stage is stateful");
                // Lost between launches: 3 and 4 (partial), 12 to 14 (never begun), 17, 22 to
                // 24, and after the restart 3 to 5: five gaps.
                assert_eq!(carry.frames_missing, 2 + 3 + 1 + 3 + 3, "{kernel}");
                assert_eq!(carry.restarts, 1);
                assert_eq!(carry.resets, if reset_on_gap { 5 } else { 0 });
                assert_eq!(
                    carry.launches,
                    want.iter().filter(|f| f.1.is_some()).count() as u64
                );
                assert_eq!(
                    metrics.stages[0].carry, None,
                    "the first stage is stateless"
                );
            }
        }
    }
}

#[test]
fn a_stateful_stage_is_not_split() {
    let split = graph_text("test.leaky", ", split: {axis: 0, tile: 4}");
    for device in ["cpu", "gpu:0"] {
        let e = plan_with(&split, device, 1, 2).unwrap_err();
        let text = e.to_string();
        assert!(
            matches!(e, PlanError::StatefulSplit { .. })
                && text.contains("stage integrate (graph stateful.yaml:")
                && text.contains("remove its `split`"),
            "{text}"
        );
    }
}

#[test]
fn a_stateful_stage_has_its_carry_where_its_kernel_runs() {
    let cpu = plan("test.leaky", "cpu", 1, 2).unwrap();
    let gpu = plan("test.leaky", "gpu:0", 1, 2).unwrap();
    let pools = |p: &Plan| -> Vec<(String, String, u64)> {
        p.pools
            .iter()
            .filter(|pool| pool.name.starts_with("carry."))
            .map(|pool| (pool.name.clone(), pool.space.to_string(), pool.block_bytes))
            .collect()
    };
    assert_eq!(pools(&cpu), [("carry.integrate".into(), "host".into(), 16)]);
    assert_eq!(
        pools(&gpu),
        [
            ("carry.integrate".into(), "device(gpu:0)".into(), 16),
            ("carry.integrate.zeros".into(), "pinned(gpu:0)".into(), 16),
            ("carry.integrate.staging".into(), "pinned(gpu:0)".into(), 16),
        ]
    );
    let shown = gpu.to_string();
    assert!(
        shown.contains("stateful: one frame at a time, in frame order (carry 16 B;"),
        "{shown}"
    );
    // Its stream waits for the stage of the frame before, in another slot: no graph can hold
    // that, so every GPU stage keeps its own stream, and the plan says why.
    let path =
        kplace::plan::gpu_path::GpuPath::new(&gpu, kplace::executor::Delivery::Frames, false);
    assert_eq!(
        path.no_graph,
        Some(kplace::plan::gpu_path::NoGraph::Stateful(
            "integrate".into()
        ))
    );
    assert!(
        shown.contains("no graph: stage integrate is stateful"),
        "{shown}"
    );
}

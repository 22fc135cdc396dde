//! Parameters changed while a run goes on (`RunOptions::control`): a change applies from one
//! frame on, every frame before it computed wholly with the old values and every frame from it
//! wholly with the new, whatever the workers and slots; a change the kernel refuses, one naming
//! no stage, and one for a GPU stage are refused and recorded, and the run goes on.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crossbeam::channel::Sender;
use kplace::cuda::sim::SimProvider;
use kplace::executor::{
    self, CompletedFrame, FrameSink, Ingest, ParamUpdate, PartialFrame, RunOptions, SinkError,
    Source, SourceError,
};
use kplace::model::graph::{Graph, Overrides};
use kplace::model::placement::Placement;
use kplace::plan::{Plan, PlanMode};
use kplace_testkit::build_c_library;

const ROWS: usize = 16;
const COLS: usize = 8;

fn plan(sum_on: &str, workers: usize, slots: usize) -> Plan {
    let lib = build_c_library("test_kernels.c", "test_kernels", &[]);
    let graph = format!(
        "name: t
dims: {{R: {ROWS}, C: {COLS}}}
source: {{tensor: iq, packet_axis: 0}}
tensors:
  - {{name: iq, dtype: ci16, shape: [R, C]}}
  - {{name: mag, dtype: f32, shape: [R, C]}}
  - {{name: sums, dtype: f32, shape: [C]}}
stages:
  - {{name: magnitude, kernel: test.magnitude2, inputs: [iq], outputs: [mag], split: {{axis: 0, tile: 4}}, params: {{scale: 0.25}}}}
  - {{name: sum, kernel: test.column_sum, inputs: [mag], outputs: [sums]}}
sinks: [sums]
"
    );
    let graph = Graph::parse(&graph, Path::new("t.yaml"), &Overrides::default()).unwrap();
    let placement = Placement::parse(
        &format!(
            "name: p\nlibraries: {{cpu: {lib}, gpu: {lib}}}\nstages: {{magnitude: cpu, sum: {sum_on}}}\nruntime: {{workers: {workers}, slots: {slots}}}\n",
            lib = lib.display()
        ),
        Path::new("p.yaml"),
    )
    .unwrap();
    Plan::with_gpus(graph, placement, &SimProvider::new(1), PlanMode::Run).unwrap()
}

/// Sends one frame (the same samples every time) after another; after frame `at` it asks for
/// the changes, then goes on until the sink has seen a frame with new values (or a bound).
struct Changing {
    frame: Vec<u8>,
    at: u64,
    updates: Option<(Sender<ParamUpdate>, Vec<ParamUpdate>)>,
    seen_new: Arc<AtomicBool>,
}

impl Source for Changing {
    fn run(&mut self, ingest: &mut Ingest<'_>) -> Result<(), SourceError> {
        let bytes = ingest.packet_bytes();
        let mut id = 0;
        while id < 5000 && !(id > self.at && self.seen_new.load(Ordering::Acquire)) {
            let Some(frame) = ingest.begin_frame(id) else {
                return Ok(());
            };
            for p in 0..ROWS {
                let place = ingest.packet_mut(&frame, p as u64).expect("place");
                place.copy_from_slice(&self.frame[p * bytes..(p + 1) * bytes]);
                ingest.packet_done(&frame, p as u64);
            }
            ingest.finish(frame);
            if id == self.at
                && let Some((tx, updates)) = self.updates.take()
            {
                for update in updates {
                    tx.send(update).expect("the control thread listens");
                }
                // The control thread creates the states while frames keep coming.
                std::thread::sleep(Duration::from_millis(20));
            }
            id += 1;
        }
        // Ten more frames after the change was seen, all of them with the new values.
        for _ in 0..10 {
            let Some(frame) = ingest.begin_frame(id) else {
                return Ok(());
            };
            for p in 0..ROWS {
                let place = ingest.packet_mut(&frame, p as u64).expect("place");
                place.copy_from_slice(&self.frame[p * bytes..(p + 1) * bytes]);
                ingest.packet_done(&frame, p as u64);
            }
            ingest.finish(frame);
            id += 1;
        }
        Ok(())
    }
}

/// Each frame's first column sum, in order; flags when one with the new scale arrives.
struct Sums {
    old: f32,
    sums: Vec<f32>,
    seen_new: Arc<AtomicBool>,
}

impl FrameSink for Sums {
    fn frame(&mut self, frame: &CompletedFrame<'_>) -> Result<(), SinkError> {
        let b = &frame.sink(0)[..4];
        let sum = f32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
        if sum != self.old {
            self.seen_new.store(true, Ordering::Release);
        }
        self.sums.push(sum);
        Ok(())
    }

    fn partial(&mut self, _: &PartialFrame) -> Result<(), SinkError> {
        Err(SinkError::failed("no frame is partial here"))
    }
}

fn update(stage: &str, params: &[(&str, &str)], origin: &str) -> ParamUpdate {
    ParamUpdate {
        stage: stage.into(),
        params: params
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect(),
        origin: origin.into(),
    }
}

/// Runs `plan`, asking for `updates` after frame 5; returns each frame's first column sum,
/// the sum with the graph's scale, and the run's metrics.
fn run(
    plan: &Plan,
    updates: Vec<ParamUpdate>,
) -> (Vec<f32>, f32, kplace::report::metrics::RunMetrics) {
    let frame = kplace_testkit::test_frames(ROWS, COLS, 1, 3).remove(0);
    let old = kplace_testkit::expected_column_sums(&frame, ROWS, COLS)[0];
    let (tx, rx) = crossbeam::channel::unbounded();
    let seen_new = Arc::new(AtomicBool::new(false));
    let mut source = Changing {
        frame,
        at: 5,
        updates: Some((tx, updates)),
        seen_new: Arc::clone(&seen_new),
    };
    let mut sink = Sums {
        old,
        sums: Vec::new(),
        seen_new,
    };
    let options = RunOptions {
        control: Some(rx),
        ..RunOptions::default()
    };
    let metrics = executor::run_with(plan, &mut source, &mut sink, &options).unwrap();
    (sink.sums, old, metrics)
}

#[test]
fn a_change_applies_from_one_frame_on_for_any_workers_and_slots() {
    for (workers, slots) in [(1, 1), (1, 4), (2, 2), (4, 8)] {
        let plan = plan("cpu", workers, slots);
        let (sums, old, metrics) = run(
            &plan,
            vec![update("magnitude", &[("scale", "1.0")], "test, line 1")],
        );
        // The scale goes from 0.25 to 1: every sum four times larger, exactly (powers of 2).
        let new = 4.0 * old;
        let change = &metrics.changes[0];
        assert_eq!(change.refused, None, "{change:?}");
        let from = change.from_sequence.expect("a frame began after it") as usize;
        assert!(
            from > 5,
            "{workers} workers, {slots} slots: from frame {from}"
        );
        assert!(
            sums[..from].iter().all(|&s| s == old) && sums[from..].iter().all(|&s| s == new),
            "{workers} workers, {slots} slots: frames before {from} old, from it new: {sums:?}"
        );
        assert!(sums.len() >= from + 10);
    }
}

#[test]
fn refused_changes_are_recorded_and_the_run_goes_on() {
    let plan = plan("gpu:0", 2, 2);
    let (sums, old, metrics) = run(
        &plan,
        vec![
            update("magnitude", &[("scale", "plenty")], "test, line 1"),
            update("nowhere", &[("scale", "2")], "test, line 2"),
            update("sum", &[("x", "1")], "test, line 3"),
            update("magnitude", &[("scale", "0.5")], "test, line 4"),
        ],
    );
    let refused: Vec<Option<&str>> = metrics
        .changes
        .iter()
        .map(|c| c.refused.as_deref())
        .collect();
    assert!(
        refused[0].is_some_and(|r| r.contains("scale") && r.contains("create failed")),
        "{refused:?}"
    );
    assert!(
        refused[1]
            .is_some_and(|r| r.contains("unknown stage nowhere; the graph has magnitude, sum")),
        "{refused:?}"
    );
    assert!(
        refused[2].is_some_and(|r| r.contains("runs on gpu:0") && r.contains("only on the CPU")),
        "{refused:?}"
    );
    assert_eq!(refused[3], None, "the valid change still applies");
    let from = metrics.changes[3].from_sequence.unwrap() as usize;
    assert!(sums[..from].iter().all(|&s| s == old));
    assert!(sums[from..].iter().all(|&s| s == 2.0 * old), "{sums:?}");
    let shown = metrics.to_string();
    assert!(
        shown.contains(&format!(
            "test, line 4: stage magnitude took scale=0.5 from frame {from} on"
        )) && shown.contains("test, line 2: refused: unknown stage nowhere"),
        "{shown}"
    );
}

//! A stream that loses frames, judged against a reference of the stream without them: the
//! frames a stateful stage's loss rule changed pass when the stage followed its rule (they are
//! judged again against the stream replayed with the same frames lost), and fail when it did
//! not; a lost frame is counted once, as lost, never also as a frame that differs.
//!
//! The graph is the C test library's leaky integrator (`y = 0.999 y + x` over the stream; a
//! lost frame decays y as zeros would), over a recording of 16 frames replayed in cycles, so a
//! loss changes every later frame of its cycle and none of the next.

// Plan errors carry the names and places a user needs; their size does not matter here.
#![allow(clippy::result_large_err)]

use std::path::Path;
use std::sync::Arc;

use kplace::executor::{
    self, CompletedFrame, FrameSink, Ingest, PartialFrame, SinkError, Source, SourceError,
};
use kplace::model::graph::{Graph, Overrides};
use kplace::model::placement::Placement;
use kplace::plan::Plan;
use kplace::workload::Workload;
use kplace::workload::generic::RecordingWorkload;
use kplace::workload::recording::Recording;
use kplace::workload::reference::{Check, Replay, reference_outputs};
use kplace::workload::{Judge, Verdict};
use kplace_testkit::build_c_library;

const ROWS: usize = 8;
const COLS: usize = 6;
const RECORDING: usize = 16;

fn graph(kernel: &str) -> Graph {
    let text = format!(
        "name: lossy
dims: {{R: {ROWS}, C: {COLS}}}
source: {{tensor: iq, packet_axis: 0}}
tensors:
  - {{name: iq, dtype: ci16, shape: [R, C]}}
  - {{name: mag, dtype: f32, shape: [R, C]}}
  - {{name: y, dtype: f64, shape: [R, C]}}
stages:
  - {{name: magnitude, kernel: test.magnitude2, inputs: [iq], outputs: [mag], params: {{scale: 0.25}}}}
  - {{name: integrate, kernel: {kernel}, inputs: [mag], outputs: [y]}}
sinks: [y]
checks: {{y: {{rtol: 1e-12, atol: 1e-9}}}}
"
    );
    Graph::parse(&text, Path::new("lossy.yaml"), &Overrides::default()).unwrap()
}

/// The graph on the CPU with the test library built with `defines`; `workers` and `slots`.
fn plan(kernel: &str, defines: &[&str], name: &str, workers: usize) -> Plan {
    let lib = build_c_library("test_kernels.c", name, defines);
    let placement = Placement::parse(
        &format!(
            "name: {name}\nlibraries: {{cpu: {lib}}}\nstages: {{magnitude: cpu, integrate: cpu}}\nruntime: {{workers: {workers}, slots: 6}}\n",
            lib = lib.display()
        ),
        Path::new("p.yaml"),
    )
    .unwrap();
    Plan::new(graph(kernel), placement).unwrap()
}

/// The frames of the stream, in order: each id, and whether it arrives whole. Ids not listed
/// never began.
struct Lossy {
    frames: Arc<[Vec<u8>]>,
    stream: Vec<(u64, bool)>,
}

impl Source for Lossy {
    fn run(&mut self, ingest: &mut Ingest<'_>) -> Result<(), SourceError> {
        let bytes = ingest.packet_bytes();
        for &(id, whole) in &self.stream {
            let data = &self.frames[(id % self.frames.len() as u64) as usize];
            let open = ingest
                .begin_frame(id)
                .ok_or(SourceError::failed("stopping"))?;
            for p in 0..ROWS {
                if !whole && p == 3 {
                    continue;
                }
                let place = ingest.packet_mut(&open, p as u64).expect("place");
                place.copy_from_slice(&data[p * bytes..(p + 1) * bytes]);
                ingest.packet_done(&open, p as u64);
            }
            ingest.finish(open);
        }
        Ok(())
    }
}

/// Hands every frame to the judge, as a run does.
struct Judging(Box<dyn Judge>);

impl FrameSink for Judging {
    fn frame(&mut self, frame: &CompletedFrame<'_>) -> Result<(), SinkError> {
        self.0
            .frame(frame)
            .map_err(|e| SinkError::failed(e.to_string()))
    }

    fn partial(&mut self, frame: &PartialFrame) -> Result<(), SinkError> {
        self.0.partial(frame.frame_id);
        Ok(())
    }
}

/// 40 frames (two and a half cycles of the recording) with frames lost: 5 never begun, 7
/// partial, 17 (in the second cycle) never begun, and 32 (the third cycle's first) partial.
fn lossy_stream() -> Vec<(u64, bool)> {
    (0..40u64)
        .filter(|&id| id != 5 && id != 17)
        .map(|id| (id, id != 7 && id != 32))
        .collect()
}

/// Runs `run` on `stream`, judged against `reference` (its outputs, and the replay of the
/// stream on it); the verdict.
fn judge(run: &Plan, reference: Plan, stream: Vec<(u64, bool)>, golden: bool) -> Verdict {
    let frames: Arc<[Vec<u8>]> = kplace_testkit::test_frames(ROWS, COLS, RECORDING, 7).into();
    let outputs = reference_outputs(&reference, &frames).unwrap();
    let replay = if golden {
        // Golden files hold the stream without a loss; the frames a loss changed are judged
        // against the run's own placement replayed with it.
        let own = plan("test.leaky", &[], "lost_frames_own", 1);
        Replay::of_stateful("placement own".into(), own)
    } else {
        Replay::of_stateful("reference placement ref".into(), reference)
    };
    assert!(replay.is_some(), "the graph is stateful");
    let recording = Recording {
        path: "frames in memory".into(),
        frames: Arc::clone(&frames),
        sample_rate: None,
        channels: 1,
    };
    let check = Check::Outputs {
        against: if golden {
            "golden files".into()
        } else {
            "reference placement ref".into()
        },
        outputs,
        replay,
    };
    let workload = RecordingWorkload::new(&run.graph, recording, check);
    let expected = stream.iter().map(|&(id, _)| id + 1).max().unwrap_or(0);
    let judge = workload.judge(expected, None).unwrap();
    let mut sink = Judging(judge);
    let mut source = Lossy { frames, stream };
    // As a run of a recording does: the stream starts again at each cycle.
    let options = executor::RunOptions {
        cycle: Some(RECORDING as u64),
        ..Default::default()
    };
    executor::run_with(run, &mut source, &mut sink, &options).unwrap();
    sink.0.finish().unwrap()
}

#[test]
fn frames_after_a_loss_pass_when_the_stage_follows_its_rule() {
    for workers in [1, 2] {
        let run = plan("test.leaky", &[], "lost_frames_run", workers);
        let reference = plan("test.leaky", &[], "lost_frames_ref", 1);
        let verdict = judge(&run, reference, lossy_stream(), false);
        let v = &verdict.verification;
        // 40 frames: 2 never began, 2 partial, 36 reported, all of them passed.
        assert_eq!(
            (v.frames_reported, v.frames_passed, v.frames_failed),
            (36, 36, 0),
            "{}",
            verdict.text
        );
        assert_eq!(v.frames_missing, 4, "{}", verdict.text);
        assert_eq!(v.lost_frames, [5, 7, 17, 32]);
        // Changed by a loss: 6..=15 but 7 (after 5 and 7), 18..=31 (after 17), and 33..=39,
        // whose cycle starts afresh at 33 since 32 was lost.
        assert_eq!(v.frames_rejudged, 9 + 14 + 7, "{}", verdict.text);
        assert!(v.mismatches.is_empty(), "{:?}", v.mismatches);
        assert_eq!(
            v.reasons,
            ["4 of 40 frames were never reported (lost, partial or not sent)"],
            "the loss counts once"
        );
        assert!(
            verdict.text.contains(
                "frames lost: 4 (first: 5, 7, 17, 32); a stateful stage filled each as its rule says, and the 30 frames after them that differ from reference placement ref were judged against reference placement ref replayed with the same frames lost: 30 passed"
            ),
            "{}",
            verdict.text
        );
    }
}

#[test]
fn frames_after_a_loss_fail_when_the_stage_breaks_its_rule() {
    let run = plan(
        "test.leaky",
        &["LEAKY_FORGETS_LOSSES"],
        "lost_frames_forgets",
        2,
    );
    let reference = plan("test.leaky", &[], "lost_frames_ref", 1);
    let verdict = judge(&run, reference, lossy_stream(), false);
    let v = &verdict.verification;
    assert!(!v.passed);
    // Every frame a zero-filled loss changed differs from the replay too (9 in the first
    // cycle, 14 in the second); the third cycle starts afresh after its lost first frame,
    // which no rule fills, and passes.
    assert_eq!(
        (v.frames_passed, v.frames_failed),
        (36 - 23, 23),
        "{}",
        verdict.text
    );
    assert_eq!(v.frames_rejudged, 30);
    assert_eq!(
        v.mismatches.first().map(|m| m.frame),
        Some(6),
        "{:?}",
        v.mismatches
    );
    assert!(
        v.reasons[1].starts_with("23 frames differ from reference placement ref"),
        "{:?}",
        v.reasons
    );
}

#[test]
fn a_stream_without_a_loss_replays_nothing_and_golden_files_judge_through_the_own_placement() {
    let run = plan("test.leaky", &[], "lost_frames_run", 2);
    let whole: Vec<(u64, bool)> = (0..40).map(|id| (id, true)).collect();
    let verdict = judge(
        &run,
        plan("test.leaky", &[], "lost_frames_ref", 1),
        whole,
        false,
    );
    let v = &verdict.verification;
    assert!(v.passed, "{}", verdict.text);
    assert_eq!((v.frames_passed, v.frames_rejudged), (40, 0));
    assert!(v.lost_frames.is_empty());
    let verdict = judge(
        &run,
        plan("test.leaky", &[], "lost_frames_ref", 1),
        lossy_stream(),
        true,
    );
    let v = &verdict.verification;
    assert_eq!(
        (v.frames_passed, v.frames_failed, v.frames_rejudged),
        (36, 0, 30)
    );
    assert!(
        verdict
            .text
            .contains("judged against placement own replayed with the same frames lost"),
        "{}",
        verdict.text
    );
}

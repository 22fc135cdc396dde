//! A pipeline fed from memory (`kplace::workload::feed`): frames handed over in batches of any
//! size give, frame for frame, the stream's output, a stateful stage carrying across batches;
//! wrong sizes are refused naming the tensor, and the report counts every frame fed.
//!
//! The kernels are the C test library's: magnitudes, then a leaky integrator (`y = 0.999 y +
//! x` over the whole stream, in double precision), whose every output depends on every earlier
//! sample, so a batch that restarted the carry, ran a frame twice or out of order would show.
//! The reference integrates the same samples in the same order in double precision.

use std::path::Path;

use kplace::model::graph::{Graph, Overrides};
use kplace::model::placement::Placement;
use kplace::plan::Plan;
use kplace::workload::feed::{Feed, FeedError};
use kplace_testkit::build_c_library;

const ROWS: usize = 16;
const COLS: usize = 12;
const ALPHA: f64 = 0.999;

fn plan(workers: usize, slots: usize) -> Plan {
    plan_failing_at(workers, slots, None)
}

/// [`plan`], its first stage failing a launch on a frame whose first I sample is `marker`.
fn plan_failing_at(workers: usize, slots: usize, marker: Option<i16>) -> Plan {
    let marker = marker.map_or_else(String::new, |m| format!(", fail_marker: {m}"));
    let lib = build_c_library("test_kernels.c", "test_kernels", &[]);
    let graph = format!(
        "name: fed
dims: {{R: {ROWS}, C: {COLS}}}
source: {{tensor: iq, packet_axis: 0}}
tensors:
  - {{name: iq, dtype: ci16, shape: [R, C]}}
  - {{name: mag, dtype: f32, shape: [R, C]}}
  - {{name: y, dtype: f64, shape: [R, C]}}
stages:
  - {{name: magnitude, kernel: test.magnitude2, inputs: [iq], outputs: [mag], split: {{axis: 0, tile: 4}}, params: {{scale: 0.25{marker}}}}}
  - {{name: integrate, kernel: test.leaky, inputs: [mag], outputs: [y]}}
sinks: [mag, y]
"
    );
    let graph = Graph::parse(&graph, Path::new("fed.yaml"), &Overrides::default()).unwrap();
    let placement = Placement::parse(
        &format!(
            "name: t\nlibraries: {{cpu: {}}}\nstages: {{magnitude: cpu, integrate: cpu}}\nruntime: {{workers: {workers}, slots: {slots}}}\n",
            lib.display()
        ),
        Path::new("p.yaml"),
    )
    .unwrap();
    Plan::new(graph, placement).unwrap()
}

/// Each frame's magnitudes and integrated stream, computed here.
fn reference(frames: &[Vec<u8>]) -> (Vec<f32>, Vec<f64>) {
    let mut y = 0.0f64;
    let mut mags = Vec::new();
    let mut ys = Vec::new();
    for frame in frames {
        for b in frame.chunks_exact(4) {
            let i = f32::from(i16::from_le_bytes([b[0], b[1]]));
            let q = f32::from(i16::from_le_bytes([b[2], b[3]]));
            let m = 0.25f32 * (i * i + q * q);
            y = ALPHA * y + f64::from(m);
            mags.push(m);
            ys.push(y);
        }
    }
    (mags, ys)
}

#[test]
fn batches_of_any_size_give_the_streams_output_the_carry_crossing_them() {
    let frames = kplace_testkit::test_frames(ROWS, COLS, 23, 5);
    let (want_mag, want_y) = reference(&frames);
    let frame_bytes = ROWS * COLS * 4;
    for (workers, slots) in [(1, 1), (2, 4)] {
        let mut feed = Feed::start(plan(workers, slots)).unwrap();
        assert_eq!(feed.source().name, "iq");
        let mut mag = Vec::new();
        let mut y = Vec::new();
        let mut at = 0;
        // Batches of 1, 5, 0, 10 and 7 frames.
        for n in [1usize, 5, 0, 10, 7] {
            let input: Vec<u8> = frames[at..at + n].concat();
            at += n;
            let mut m = vec![0u8; n * frame_bytes];
            let mut o = vec![0u8; n * ROWS * COLS * 8];
            feed.process(&input, &mut [&mut m, &mut o]).unwrap();
            mag.extend(
                m.chunks_exact(4)
                    .map(|b| f32::from_ne_bytes(b.try_into().unwrap())),
            );
            y.extend(
                o.chunks_exact(8)
                    .map(|b| f64::from_ne_bytes(b.try_into().unwrap())),
            );
        }
        assert_eq!(feed.frames_fed(), 23);
        assert_eq!(mag, want_mag, "workers {workers}, slots {slots}");
        assert_eq!(y, want_y, "workers {workers}, slots {slots}");
        let report = feed.finish().unwrap();
        assert_eq!(report.frames, 23);
        assert_eq!(report.frames_expected, 23);
        assert!(report.verification.passed);
        assert_eq!(report.source, "memory");
        assert_eq!(report.frame_shape.to_string(), format!("{COLS}x{ROWS}"));
        let integrate = report
            .stages
            .iter()
            .find(|s| s.name == "integrate")
            .unwrap();
        assert_eq!(integrate.launches, 23);
        // Ended: the same report again, and no more frames.
        assert_eq!(feed.finish().unwrap().frames, 23);
        let e = feed
            .process(&frames[0], &mut [&mut [0u8; 0][..], &mut [0u8; 0][..]])
            .unwrap_err();
        assert!(matches!(e, FeedError::Ended), "{e}");
    }
}

#[test]
fn wrong_sizes_are_refused_naming_the_tensor_and_the_stream_goes_on() {
    let frames = kplace_testkit::test_frames(ROWS, COLS, 2, 9);
    let (_, want_y) = reference(&frames);
    let mut feed = Feed::start(plan(1, 2)).unwrap();
    let frame_bytes = ROWS * COLS * 4;
    let e = feed
        .process(
            &frames[0][..frame_bytes - 4],
            &mut [&mut [][..], &mut [][..]],
        )
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("is not a whole number of iq frames of 768 bytes"),
        "{e}"
    );
    let mut m = vec![0u8; frame_bytes];
    let mut short = vec![0u8; 8];
    let e = feed
        .process(&frames[0], &mut [&mut m, &mut short])
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("sink y: 8 bytes for 1 frames of 1536 bytes"),
        "{e}"
    );
    // Nothing of the refused batches ran: the stream starts with frame 0.
    let mut o = vec![0u8; 2 * ROWS * COLS * 8];
    let mut m = vec![0u8; 2 * frame_bytes];
    feed.process(&frames.concat(), &mut [&mut m, &mut o])
        .unwrap();
    let y: Vec<f64> = o
        .chunks_exact(8)
        .map(|b| f64::from_ne_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(y, want_y);
    assert_eq!(feed.finish().unwrap().frames, 2);
}

#[test]
fn a_kernel_failing_mid_batch_fails_that_batch_and_every_later_call() {
    let mut frames = kplace_testkit::test_frames(ROWS, COLS, 3, 11);
    // The last frame of the batch fails: by then the source has handed over the whole batch
    // (it has a slot for each frame) and waits for the next one.
    frames[2][..2].copy_from_slice(&7777i16.to_le_bytes());
    let (done, finished) = std::sync::mpsc::channel();
    // The feed runs on a thread of its own, so that a batch waiting forever fails the test.
    std::thread::spawn(move || {
        let mut feed = Feed::start(plan_failing_at(2, 4, Some(7777))).unwrap();
        let mut m = vec![0u8; 3 * ROWS * COLS * 4];
        let mut o = vec![0u8; 3 * ROWS * COLS * 8];
        let first = feed.process(&frames.concat(), &mut [&mut m, &mut o]);
        let again = feed.process(
            &frames[0],
            &mut [&mut m[..ROWS * COLS * 4], &mut o[..ROWS * COLS * 8]],
        );
        let _ = done.send((
            first.map_err(|e| e.to_string()),
            again.map_err(|e| e.to_string()),
        ));
    });
    let (first, again) = finished
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("a batch whose kernel failed never returned");
    let first = first.unwrap_err();
    assert!(
        first.contains("test.magnitude2: launch failed: marker frame seen"),
        "{first}"
    );
    assert_eq!(again.unwrap_err(), first);
}

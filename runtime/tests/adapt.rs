//! Re-placement while the stream runs (`executor::run_adaptive`), on the simulated GPU with its
//! timing model: a paced stream on a GPU placement, a co-tenant that slows the GPU's kernels
//! three times mid-stream, and a CPU placement to move to. Every frame is checked, in order,
//! exactly once, whichever placement ran it; the run moves to the CPU under the co-tenant and
//! back once it leaves; a stateful stage's carry moves with the stream. Times are the
//! simulation's and the CPU kernel's sleeps, with wide margins: nothing here asserts a
//! measured time.

#![allow(clippy::result_large_err)]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use kplace::adapt::{Reason, Rule, RuleError};
use kplace::cuda::sim::{KernelTime, SimProvider, SimTiming};
use kplace::executor::{
    self, CompletedFrame, FrameSink, NotAdaptable, PartialFrame, RunError, RunOptions, SinkError,
};
use kplace::model::graph::{Graph, Overrides};
use kplace::model::placement::Placement;
use kplace::net::replay::FrameReplay;
use kplace::plan::{Plan, PlanMode};
use kplace::report::metrics::RunMetrics;

const ROWS: usize = 16;
const COLS: usize = 8;
/// One frame every 4 ms.
const PERIOD: Duration = Duration::from_millis(4);
/// The GPU's kernel alone: 2 ms, 6 ms beside the co-tenant.
const GPU_MS: u64 = 2;
/// The CPU kernel sleeps 1.5 ms per frame, with two workers.
const CPU_US: u32 = 1500;

fn graph() -> Graph {
    let text = format!(
        "name: timed
dims: {{R: {ROWS}, C: {COLS}}}
source: {{tensor: x, packet_axis: 0}}
tensors:
  - {{name: x, dtype: f32, shape: [R, C]}}
  - {{name: y, dtype: f32, shape: [R, C]}}
stages:
  - name: work
    kernel: timed.middle
    inputs: [x]
    outputs: [y]
    params: {{cpu_us: {CPU_US}}}
sinks: [y]
"
    );
    Graph::parse(&text, Path::new("graphs/timed.yaml"), &Overrides::default()).unwrap()
}

fn placement(name: &str, device: &str, workers: usize) -> Placement {
    let lib = kplace_testkit::build_c_library("lab/tests/c/timed_kernels.c", "timed_kernels", &[]);
    let text = format!(
        "name: {name}\nlibraries: {{cpu: {lib}, gpu: {lib}}}\nstages: {{work: {device}}}\nruntime: {{workers: {workers}, slots: 4}}\n",
        lib = lib.display()
    );
    Placement::parse(&text, Path::new(&format!("placements/{name}.yaml"))).unwrap()
}

fn timing() -> SimTiming {
    SimTiming {
        kernels: vec![KernelTime {
            kernel: "timed.middle".into(),
            fixed: Duration::from_millis(GPU_MS),
            per_index: Duration::ZERO,
        }],
        ..SimTiming::default()
    }
}

/// The GPU placement first, then the CPU one.
fn plans(gpus: &SimProvider) -> Vec<Plan> {
    ["gpu", "cpu"]
        .into_iter()
        .map(|device| {
            let workers = if device == "gpu" { 1 } else { 2 };
            let placement = placement(device, device, workers);
            Plan::with_gpus(graph(), placement, gpus, PlanMode::Run).unwrap()
        })
        .collect()
}

/// Frame `i`'s samples: distinct per frame, so a frame delivered in another's place shows.
fn frames(count: usize) -> Vec<Vec<u8>> {
    (0..count)
        .map(|i| {
            (0..ROWS * COLS)
                .flat_map(|k| ((i * 1000 + k) as f32).to_le_bytes())
                .collect()
        })
        .collect()
}

/// Checks every frame: `y = x + 1`, in order, once each.
struct Checked {
    frames: Arc<[Vec<u8>]>,
    next: u64,
}

impl FrameSink for Checked {
    fn frame(&mut self, frame: &CompletedFrame<'_>) -> Result<(), SinkError> {
        if frame.sequence != self.next || frame.frame_id != self.next {
            return Err(SinkError::failed(format!(
                "frame {} (sequence {}) where frame {} was due",
                frame.frame_id, frame.sequence, self.next
            )));
        }
        let x = &self.frames[(frame.frame_id % self.frames.len() as u64) as usize];
        for (k, (y, x)) in frame
            .sink(0)
            .chunks_exact(4)
            .zip(x.chunks_exact(4))
            .enumerate()
        {
            let (y, x) = (
                f32::from_le_bytes(y.try_into().unwrap()),
                f32::from_le_bytes(x.try_into().unwrap()),
            );
            if y != x + 1.0 {
                return Err(SinkError::failed(format!(
                    "frame {}: element {k} is {y}, not {x} + 1",
                    frame.frame_id
                )));
            }
        }
        self.next += 1;
        Ok(())
    }

    fn partial(&mut self, frame: &PartialFrame) -> Result<(), SinkError> {
        Err(SinkError::failed(format!(
            "frame {} ended partial",
            frame.frame_id
        )))
    }
}

/// A rule scaled to the test: late past 10 ms (the GPU alone delivers in about 2 ms, a loaded
/// host adds a few), windows of 8 frames (32 ms), holds from 250 ms to 1 s.
fn rule() -> Rule {
    Rule {
        window: 8,
        hold: Duration::from_millis(250),
        max_hold: Duration::from_secs(1),
        ..Rule::for_budget(Duration::from_millis(20))
    }
}

/// Sets the co-tenant's factor on the GPU from `from` to `to` after the run starts, then
/// takes it away; stops early once `done` is set.
fn cotenant(
    gpus: &SimProvider,
    from: Duration,
    to: Duration,
    done: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    let gpu = Arc::clone(gpus.device(0).unwrap());
    std::thread::spawn(move || {
        let start = Instant::now();
        let wait_until = |t: Duration| {
            while start.elapsed() < t && !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(5));
            }
        };
        wait_until(from);
        gpu.set_cotenant(3.0);
        wait_until(to);
        gpu.set_cotenant(1.0);
    })
}

/// When the co-tenant arrives and leaves, from the run's start.
const ARRIVES: Duration = Duration::from_millis(500);
const LEAVES: Duration = Duration::from_millis(1500);

/// Runs `plans` adaptively under [`rule`], traced, with the co-tenant on the GPU from
/// [`ARRIVES`] to [`LEAVES`].
fn traced_beside_cotenant(
    gpus: &SimProvider,
    plans: &[Plan],
    source: &mut FrameReplay,
    sink: &mut dyn FrameSink,
) -> Result<RunMetrics, RunError> {
    let done = Arc::new(AtomicBool::new(false));
    let hog = cotenant(gpus, ARRIVES, LEAVES, Arc::clone(&done));
    let options = RunOptions {
        trace: true,
        ..RunOptions::default()
    };
    let run = executor::run_adaptive(plans, rule(), source, sink, &options);
    done.store(true, Ordering::Relaxed);
    hog.join().unwrap();
    run
}

#[test]
fn a_gpu_cotenant_moves_the_stream_to_the_cpu_and_its_leaving_brings_it_back() {
    let gpus = SimProvider::with_timing(1, timing());
    let plans = plans(&gpus);
    let count = 750; // 3 s at 4 ms
    let prepared: Arc<[Vec<u8>]> = frames(7).into();
    let mut source = FrameReplay::new(Arc::clone(&prepared), count).paced(PERIOD);
    let mut sink = Checked {
        frames: prepared,
        next: 0,
    };
    let (arrives, leaves) = (ARRIVES, LEAVES);
    let metrics = traced_beside_cotenant(&gpus, &plans, &mut source, &mut sink)
        .expect("every frame is checked and delivered");
    assert_eq!(sink.next, count, "every frame, once, in order");
    assert_eq!(
        (
            metrics.frames,
            metrics.partial_frames,
            metrics.dropped_frames
        ),
        (count, 0, 0)
    );

    let adaptation = metrics
        .adaptation
        .expect("an adaptive run says what it did");
    assert_eq!(adaptation.placements, ["gpu", "cpu"]);
    assert_eq!(adaptation.frames.iter().sum::<u64>(), count);
    let switches = &adaptation.switches;
    let text = format!("{adaptation}");
    eprintln!("{text}");
    // Under the co-tenant the GPU needs 6 ms a frame for a frame every 4 ms: it falls behind,
    // and the run moves to the CPU.
    let pressure = switches
        .iter()
        .find(|s| s.reason == Reason::Pressure && s.at_s >= arrives.as_secs_f64())
        .unwrap_or_else(|| panic!("no move to the CPU under the co-tenant:\n{text}"));
    assert_eq!((pressure.from, pressure.to), (0, 1), "{text}");
    let e = &pressure.evidence;
    assert!(
        e.late > e.late_allowed || e.occupancy >= 0.75 || e.slot_misses > 0,
        "the evidence shows the pressure:\n{text}"
    );
    assert!(adaptation.frames[1] > 0, "{text}");
    // Once it leaves, a probe of the GPU lasts, and the run ends there.
    let last = switches.last().unwrap();
    assert_eq!(
        (last.from, last.to, last.reason),
        (1, 0, Reason::Relief),
        "{text}"
    );
    assert!(last.at_s >= leaves.as_secs_f64(), "{text}");
    // Switches alternate between the two placements.
    for pair in switches.windows(2) {
        assert_eq!(pair[0].to, pair[1].from, "{text}");
    }

    // The trace has every switch, and says which placement ran each frame.
    let trace = metrics.trace.expect("traced");
    assert_eq!(trace.placements, ["gpu", "cpu"]);
    let marks = trace
        .spans
        .iter()
        .filter(|s| s.kind == kplace::report::trace::SpanKind::Switch)
        .count();
    assert_eq!(marks, switches.len());
    let delivered_on_cpu = trace
        .spans
        .iter()
        .filter(|s| s.kind == kplace::report::trace::SpanKind::Deliver && s.lane == Some(1))
        .count() as u64;
    assert_eq!(delivered_on_cpu, adaptation.frames[1]);
}

#[test]
fn placements_that_cannot_be_switched_between_are_refused_naming_why() {
    let gpus = SimProvider::with_timing(1, timing());
    let prepared: Arc<[Vec<u8>]> = frames(1).into();
    let refused = |plans: &[Plan], rule: Rule| {
        let mut source = FrameReplay::new(Arc::clone(&prepared), 4);
        let mut sink = Checked {
            frames: Arc::clone(&prepared),
            next: 0,
        };
        match executor::run_adaptive(plans, rule, &mut source, &mut sink, &RunOptions::default()) {
            Err(RunError::NotAdaptable(why)) => *why,
            other => panic!("not refused: {other:?}"),
        }
    };
    assert!(matches!(refused(&[], rule()), NotAdaptable::NoPlacement));
    let zero = Rule {
        budget: Duration::ZERO,
        ..rule()
    };
    let why = refused(&plans(&gpus), zero);
    assert!(
        matches!(why, NotAdaptable::Rule(RuleError::Budget)) && why.to_string().contains("budget"),
        "{why}"
    );
    // The same stateful kernel from two libraries whose carries differ: it cannot move.
    let padded = kplace_testkit::build_c_library(
        "test_kernels.c",
        "test_kernels_padded",
        &["LEAKY_CARRY_PAD"],
    );
    let plans = [integrator_plan("w1", "cpu", 1, &gpus), {
        let text = format!(
            "name: padded\nlibraries: {{cpu: {}}}\nstages: {{work: cpu}}\nruntime: {{workers: 2}}\n",
            padded.display()
        );
        let placement = Placement::parse(&text, Path::new("placements/padded.yaml")).unwrap();
        Plan::with_gpus(integrator_graph(), placement, &gpus, PlanMode::Run).unwrap()
    }];
    let why = refused(&plans, rule());
    let NotAdaptable::CarryDiffers {
        stage,
        first,
        other,
    } = &why
    else {
        panic!("not refused for its carries: {why}");
    };
    assert_eq!(
        (
            stage.as_str(),
            first.placement.as_str(),
            other.placement.as_str()
        ),
        ("work", "w1", "padded")
    );
    assert_eq!(
        (first.carry.map(|c| c.bytes), other.carry.map(|c| c.bytes)),
        (Some(16), Some(32))
    );
    let text = why.to_string();
    assert!(
        text.contains("stage work's kernels differ in what they carry")
            && text.contains("placement w1 carries 16 B")
            && text.contains("placement padded carries 32 B"),
        "{text}"
    );
}

/// A graph of one stateful stage: `test.leaky` integrates the stream, `y = 0.999 y + x`.
fn integrator_graph() -> Graph {
    let text = format!(
        "name: integrate
dims: {{R: {ROWS}, C: {COLS}}}
source: {{tensor: x, packet_axis: 0}}
tensors:
  - {{name: x, dtype: f32, shape: [R, C]}}
  - {{name: y, dtype: f64, shape: [R, C]}}
stages:
  - {{name: work, kernel: test.leaky, inputs: [x], outputs: [y]}}
sinks: [y]
"
    );
    Graph::parse(
        &text,
        Path::new("graphs/integrate.yaml"),
        &Overrides::default(),
    )
    .unwrap()
}

fn integrator_plan(name: &str, device: &str, workers: usize, gpus: &SimProvider) -> Plan {
    let lib = kplace_testkit::build_c_library("test_kernels.c", "test_kernels", &[]);
    let text = format!(
        "name: {name}\nlibraries: {{cpu: {lib}, gpu: {lib}}}\nstages: {{work: {device}}}\nruntime: {{workers: {workers}, slots: 4}}\n",
        lib = lib.display()
    );
    let placement = Placement::parse(&text, Path::new(&format!("placements/{name}.yaml"))).unwrap();
    Plan::with_gpus(integrator_graph(), placement, gpus, PlanMode::Run).unwrap()
}

/// Checks every frame against one integration of the whole stream, in order, once each.
struct Integrated {
    /// Per frame, what the integrator must output.
    want: Vec<Vec<f64>>,
    next: u64,
}

impl FrameSink for Integrated {
    fn frame(&mut self, frame: &CompletedFrame<'_>) -> Result<(), SinkError> {
        let id = frame.frame_id;
        if frame.sequence != self.next || id != self.next {
            return Err(SinkError::failed(format!(
                "frame {id} where {} was due",
                self.next
            )));
        }
        let y: Vec<f64> = frame
            .sink(0)
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
            .collect();
        if y != self.want[id as usize] {
            return Err(SinkError::failed(format!(
                "frame {id} differs from one integration of the stream"
            )));
        }
        self.next += 1;
        Ok(())
    }

    fn partial(&mut self, frame: &PartialFrame) -> Result<(), SinkError> {
        Err(SinkError::failed(format!(
            "frame {} ended partial",
            frame.frame_id
        )))
    }
}

/// The stateful stage moves with the stream: from the GPU (its carry in device memory) to the
/// CPU under the co-tenant and back once it leaves, every frame equal to one integration of
/// the whole stream (the kernel itself fails a launch whose carry is not the frame before's).
#[test]
fn a_stateful_stage_carries_its_state_across_every_switch() {
    let timing = SimTiming {
        kernels: vec![KernelTime {
            kernel: "test.leaky".into(),
            fixed: Duration::from_millis(GPU_MS),
            per_index: Duration::ZERO,
        }],
        ..SimTiming::default()
    };
    let gpus = SimProvider::with_timing(1, timing);
    let plans = [
        integrator_plan("gpu", "gpu", 1, &gpus),
        integrator_plan("cpu", "cpu", 2, &gpus),
    ];
    let count = 750u64;
    let prepared: Arc<[Vec<u8>]> = frames(7).into();
    let mut y = 0.0f64;
    let want = (0..count as usize)
        .map(|i| {
            let x = &prepared[i % prepared.len()];
            x.chunks_exact(4)
                .map(|b| {
                    y = 0.999 * y + f64::from(f32::from_le_bytes(b.try_into().unwrap()));
                    y
                })
                .collect()
        })
        .collect();
    let mut source = FrameReplay::new(Arc::clone(&prepared), count).paced(PERIOD);
    let mut sink = Integrated { want, next: 0 };
    let metrics = traced_beside_cotenant(&gpus, &plans, &mut source, &mut sink)
        .expect("every frame equals one integration of the stream");
    assert_eq!(sink.next, count);
    let adaptation = metrics.adaptation.expect("adapted");
    let text = format!("{adaptation}");
    assert!(
        adaptation.switches.len() >= 2 && adaptation.frames.iter().all(|&n| n > 0),
        "to the CPU and back:\n{text}"
    );
    // The carry moved each time the next frame ran in another placement than the one before.
    let trace = metrics.trace.expect("traced");
    let mut lanes: Vec<(u64, u32)> = trace
        .spans
        .iter()
        .filter(|s| s.kind == kplace::report::trace::SpanKind::Deliver)
        .map(|s| (s.frame, s.lane.expect("a lane")))
        .collect();
    lanes.sort_unstable();
    assert_eq!(lanes.len() as u64, count);
    let changes = lanes.windows(2).filter(|w| w[0].1 != w[1].1).count() as u64;
    let carry = metrics.stages[0].carry.expect("stateful");
    assert!(changes >= 2, "{text}");
    assert_eq!(
        (
            carry.moves,
            carry.launches,
            carry.frames_missing,
            carry.restarts
        ),
        (changes, count, 0, 0),
        "{text}"
    );
}

#[test]
fn one_placement_that_keeps_up_runs_every_frame_without_a_switch() {
    let gpus = SimProvider::with_timing(1, timing());
    let plans = plans(&gpus);
    let prepared: Arc<[Vec<u8>]> = frames(3).into();
    let mut source = FrameReplay::new(Arc::clone(&prepared), 100).paced(PERIOD);
    let mut sink = Checked {
        frames: prepared,
        next: 0,
    };
    // A generous budget: the GPU placement keeps up throughout.
    let rule = Rule {
        budget: Duration::from_millis(500),
        occupancy: 1.0,
        ..rule()
    };
    let metrics =
        executor::run_adaptive(&plans, rule, &mut source, &mut sink, &RunOptions::default())
            .unwrap();
    let adaptation = metrics.adaptation.unwrap();
    assert!(adaptation.switches.is_empty(), "{adaptation}");
    assert_eq!(adaptation.frames, [100, 0]);
    assert_eq!(sink.next, 100);
}

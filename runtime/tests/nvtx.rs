//! NVTX ranges around a traced run's launches, through a fake NVTX library that counts them:
//! one range per launch, named by its stage, balanced on every thread, none nested; none at
//! all untraced. Its own test binary: the library is named by an environment variable.

use std::ffi::{CString, c_char, c_int};
use std::path::Path;

use kplace::executor::{self, CompletedFrame, FrameSink, PartialFrame, SinkError};
use kplace::model::graph::{Graph, Overrides};
use kplace::model::placement::Placement;
use kplace::net::replay::FrameReplay;
use kplace::plan::Plan;
use kplace::report::nvtx::LIBRARY_ENV;

const ROWS: usize = 64;
const COLS: usize = 24;

struct Count(u64);

impl FrameSink for Count {
    fn frame(&mut self, _frame: &CompletedFrame<'_>) -> Result<(), SinkError> {
        self.0 += 1;
        Ok(())
    }
    fn partial(&mut self, _frame: &PartialFrame) -> Result<(), SinkError> {
        Ok(())
    }
}

fn plan(workers: usize) -> Plan {
    let lib = kplace_testkit::build_c_library("test_kernels.c", "test_kernels", &[]);
    let graph = Graph::parse(
        &format!(
            "name: test\ndims: {{R: {ROWS}, C: {COLS}}}\nsource: {{tensor: iq, packet_axis: 0}}\n\
             tensors:\n  - {{name: iq, dtype: ci16, shape: [R, C]}}\n  - {{name: mag, dtype: f32, shape: [R, C]}}\n  - {{name: sums, dtype: f32, shape: [C]}}\n\
             stages:\n  - {{name: magnitude, kernel: test.magnitude2, inputs: [iq], outputs: [mag], split: {{axis: 0, tile: 8}}, params: {{scale: 0.25}}}}\n  - {{name: sum, kernel: test.column_sum, inputs: [mag], outputs: [sums]}}\nsinks: [sums]\n"
        ),
        Path::new("test.yaml"),
        &Overrides::default(),
    )
    .unwrap();
    let placement = Placement::parse(
        &format!(
            "name: t\nlibraries: {{cpu: {}}}\nstages: {{magnitude: cpu, sum: cpu}}\nruntime: {{workers: {workers}, slots: 3}}\n",
            lib.display()
        ),
        Path::new("p.yaml"),
    )
    .unwrap();
    Plan::new(graph, placement).unwrap()
}

fn counts(fake: &libloading::Library) -> [c_int; 5] {
    let mut out = [0; 5];
    // SAFETY: fake_nvtx.c's function, writing five ints.
    unsafe {
        let f = fake
            .get::<unsafe extern "C" fn(*mut c_int)>(b"fake_nvtx_counts\0")
            .unwrap();
        f(out.as_mut_ptr());
    }
    out
}

#[test]
fn a_traced_run_opens_one_balanced_range_per_launch_named_by_its_stage() {
    let path = kplace_testkit::build_c_library("fake_nvtx.c", "fake_nvtx", &[]);
    // SAFETY: set before any thread of this test binary reads the environment; the binary's
    // only test.
    unsafe { std::env::set_var(LIBRARY_ENV, &path) };
    // SAFETY: the fake's initialisers are empty; loaded by path, it is the library the run
    // loads (one handle, one set of counters).
    let fake = unsafe { libloading::Library::new(&path) }.unwrap();
    // SAFETY: fake_nvtx.c's function, taking a NUL-terminated name it copies.
    unsafe {
        let watch = fake
            .get::<unsafe extern "C" fn(*const c_char)>(b"fake_nvtx_watch\0")
            .unwrap();
        let name = CString::new("sum").unwrap();
        watch(name.as_ptr());
    }
    let frames = kplace_testkit::test_frames(ROWS, COLS, 3, 1);
    let run = |trace: bool, workers: usize| {
        let options = executor::RunOptions {
            trace,
            ..Default::default()
        };
        let mut sink = Count(0);
        executor::run_with(
            &plan(workers),
            &mut FrameReplay::new(frames.clone(), 10),
            &mut sink,
            &options,
        )
        .unwrap();
        assert_eq!(sink.0, 10);
    };
    run(false, 2);
    assert_eq!(counts(&fake), [0; 5], "untraced: no range");
    run(true, 2);
    // 8 tiles of `magnitude` and one `sum` per frame, each a range of its own, never nested.
    let [pushes, pops, unbalanced, deepest, sums] = counts(&fake);
    assert_eq!((pushes, pops, unbalanced), (90, 90, 0));
    assert_eq!((deepest, sums), (1, 10));
}

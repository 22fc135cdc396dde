//! Planning: every invalid combination of graph, placement and library is an error before
//! anything runs, naming the file and line; a valid plan has the pools the executor needs.

#![allow(clippy::result_large_err)]

use std::path::{Path, PathBuf};

use kplace::cuda::sim::SimProvider;
use kplace::model::graph::{Graph, Overrides};
use kplace::model::placement::Placement;
use kplace::plan::{Lifetime, Plan, PlanError, PlanMode, PoolPurpose};
use kplace_testkit::build_c_library;

const GRAPH: &str = "name: test
dims: {R: 32, C: 8}
source: {tensor: iq, packet_axis: 0}
tensors:
  - {name: iq, dtype: ci16, shape: [R, C]}
  - {name: mag, dtype: f32, shape: [R, C]}
  - {name: sums, dtype: f32, shape: [C]}
stages:
  - {name: magnitude, kernel: test.magnitude2, inputs: [iq], outputs: [mag], split: {axis: 0, tile: 8}}
  - {name: sum, kernel: test.column_sum, inputs: [mag], outputs: [sums]}
sinks: [sums]
";

fn library() -> PathBuf {
    build_c_library("test_kernels.c", "test_kernels", &[])
}

fn plan_with(graph: &str, placement: &str, overrides: &Overrides) -> Result<Plan, PlanError> {
    let graph = Graph::parse(graph, Path::new("graphs/test.yaml"), overrides).unwrap();
    let placement = Placement::parse(placement, Path::new("placements/test.yaml")).unwrap();
    Plan::new(graph, placement)
}

fn placement(stages: &str) -> String {
    format!(
        "name: p\nlibraries: {{cpu: {}}}\nstages:\n{stages}runtime: {{slots: 3}}\n",
        library().display()
    )
}

#[test]
fn a_valid_plan_sizes_every_pool_from_slots_and_launches() {
    let plan = plan_with(
        GRAPH,
        &placement("  magnitude: cpu\n  sum: cpu\n"),
        &Overrides::default(),
    )
    .unwrap();
    assert_eq!(plan.stages[0].launches, 4);
    assert_eq!(plan.stages[1].launches, 1);
    let pool = |purpose| plan.pools.iter().find(|p| p.purpose == purpose).unwrap();
    let iq = pool(PoolPurpose::Tensor(kplace::model::graph::TensorId(0)));
    assert_eq!((iq.blocks, iq.block_bytes), (3, 32 * 8 * 4));
    let sums = pool(PoolPurpose::Tensor(kplace::model::graph::TensorId(2)));
    assert_eq!((sums.blocks, sums.block_bytes), (3, 8 * 4));
    let ws = pool(PoolPurpose::Workspace(kplace::model::graph::StageId(0)));
    assert_eq!(ws.blocks, 1, "a CPU stage's workspace per worker");
    let lifetimes: Vec<Lifetime> = plan.edges.iter().map(|e| e.lifetime).collect();
    assert_eq!(
        lifetimes,
        [Lifetime::Slot, Lifetime::Stages, Lifetime::Slot],
        "the source and the sink are the slot's; mag lives only while the stages run"
    );
    let mag = pool(PoolPurpose::Tensor(kplace::model::graph::TensorId(1)));
    assert_eq!(mag.blocks, 3, "one set per slot");
    let text = plan.to_string();
    for want in [
        "magnitude",
        "test.magnitude2",
        "4 tiles of 8 along axis 0",
        "iq",
        "ci16[32, 8]",
        "source -> magnitude",
        "sums",
        "sink",
        "transfers  none",
        "3 slots",
    ] {
        assert!(text.contains(want), "plan lacks {want:?}:\n{text}");
    }
}

#[test]
fn a_stage_without_placement_is_named_with_its_graph_line() {
    let e = plan_with(
        GRAPH,
        &placement("  magnitude: cpu\n"),
        &Overrides::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("stage sum (graph graphs/test.yaml:10) has no placement")
            && e.contains("placements/test.yaml"),
        "{e}"
    );
}

#[test]
fn a_placement_naming_an_unknown_stage_is_refused_with_its_line() {
    let e = plan_with(
        GRAPH,
        &placement("  magnitude: cpu\n  sum: cpu\n  summ: cpu\n"),
        &Overrides::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("placements/test.yaml:6")
            && e.contains("unknown stage summ")
            && e.contains("magnitude, sum"),
        "{e}"
    );
}

#[test]
fn a_gpu_placement_without_gpu_kernels_is_a_clear_plan_error() {
    // A GPU is usable (simulated), but the library offers the kernel for the CPU only: the
    // C test library built with its first two kernels, the CPU ones.
    let cpu_only = build_c_library(
        "test_kernels.c",
        "cpu_only_kernels",
        &["TEST_KERNEL_COUNT=2"],
    );
    let p = format!(
        "name: p\nlibraries: {{cpu: {lib}, gpu: {lib}}}\nstages: {{magnitude: cpu, sum: gpu:1}}\n",
        lib = cpu_only.display()
    );
    let graph = Graph::parse(GRAPH, Path::new("graphs/test.yaml"), &Overrides::default()).unwrap();
    let placement = Placement::parse(&p, Path::new("placements/test.yaml")).unwrap();
    let e = Plan::with_gpus(graph, placement, &SimProvider::new(2), PlanMode::Run)
        .unwrap_err()
        .to_string();
    assert!(e.contains("stage sum is placed on gpu:1"), "{e}");
    assert!(e.contains("offers no cuda kernel test.column_sum"), "{e}");
    assert!(
        e.contains("test.magnitude2 (cpu)"),
        "the message lists what the library offers: {e}"
    );
}

#[test]
fn a_missing_library_file_names_the_stage_and_file() {
    let p = "name: p\nlibraries: {cpu: /nonexistent/libk.so}\nstages: {magnitude: cpu, sum: cpu}\n";
    let e = plan_with(GRAPH, p, &Overrides::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("stage magnitude") && e.contains("/nonexistent/libk.so does not exist"),
        "{e}"
    );
}

#[test]
fn a_kernel_no_library_provides_is_named() {
    let graph = GRAPH.replace("kernel: test.column_sum", "kernel: test.column_max");
    let e = plan_with(
        &graph,
        &placement("  magnitude: cpu\n  sum: cpu\n"),
        &Overrides::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("offers no cpu kernel test.column_max"), "{e}");
}

#[test]
fn a_kernel_given_the_wrong_number_of_tensors_is_refused() {
    let graph = GRAPH.replace(
        "inputs: [mag], outputs: [sums]",
        "inputs: [mag, iq], outputs: [sums]",
    );
    let e = plan_with(
        &graph,
        &placement("  magnitude: cpu\n  sum: cpu\n"),
        &Overrides::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("takes 1 inputs and 1 outputs, but the graph gives it 2 and 1"),
        "{e}"
    );
}

#[test]
fn kernels_validate_parameters_and_shapes_at_plan_time() {
    let o = Overrides {
        params: vec![("magnitude".into(), "gain".into(), "2".into())],
        ..Default::default()
    };
    let e = plan_with(GRAPH, &placement("  magnitude: cpu\n  sum: cpu\n"), &o)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("stage magnitude") && e.contains("unknown parameter gain"),
        "{e}"
    );
    let graph = GRAPH.replace(
        "{name: sums, dtype: f32, shape: [C]}",
        "{name: sums, dtype: f32, shape: [R]}",
    );
    let e = plan_with(
        &graph,
        &placement("  magnitude: cpu\n  sum: cpu\n"),
        &Overrides::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("output 0 must be f32 [cols]"), "{e}");
}

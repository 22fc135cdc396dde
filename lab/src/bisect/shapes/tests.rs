use std::path::{Path, PathBuf};
use std::time::Duration;

use kplace::model::graph::{Graph, Overrides};
use kplace::model::shape::FrameShape;
use kplace::workload::kind::{
    KindError, KindOptions, OptionSpec, Prepared, Registry, Request, ResultsFiles, SweepWords,
    WorkloadKind,
};

use super::{SearchShape, ShapeError};

/// A graph of a `ci16` source `[M, N]` (N 8, M 4), written into `dir` as `g.yaml`, naming
/// `workload` if any.
pub(in crate::bisect) fn graph_file(dir: &Path, workload: Option<&str>) -> PathBuf {
    let named = workload.map_or(String::new(), |w| format!("workload: {w}\n"));
    let text = format!(
        "name: g\n{named}dims: {{N: 8, M: 4}}\nsource: {{tensor: x, packet_axis: 0}}\n\
         tensors:\n  - {{name: x, dtype: ci16, shape: [M, N]}}\n  - {{name: y, dtype: f32, shape: [M, N]}}\n\
         stages:\n  - {{name: s, kernel: k, inputs: [x], outputs: [y]}}\nsinks: [y]\n"
    );
    let path = dir.join("g.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

/// A recording of 2 frames of `graph`'s source bound with N 16 (so `16x4`), at
/// `sample_rate`, written into `dir`.
pub(in crate::bisect) fn recording(dir: &Path, graph: &Path, sample_rate: Option<f64>) -> PathBuf {
    let overrides = Overrides {
        dims: vec![("N".into(), 16)],
        params: Vec::new(),
    };
    let bound = Graph::load(graph, &overrides).unwrap();
    let bytes = bound.tensor(bound.source.tensor).bytes as usize;
    let path = dir.join("tones.sigmf-data");
    let frames = vec![vec![0u8; bytes]; 2];
    kplace::workload::recording::write(&path, &bound, &frames, sample_rate, "test").unwrap();
    path
}

/// A workload kind whose frame lasts 1 ms at every shape, with a `frames` option a sweep sets
/// to 8 unless told otherwise.
pub(in crate::bisect) struct Ticks;

impl KindOptions for Ticks {
    fn name(&self) -> &'static str {
        "ticks"
    }
    fn about(&self) -> &'static str {
        "a test kind"
    }
    fn options(&self) -> &'static [OptionSpec] {
        &[OptionSpec {
            name: "frames",
            value: "N",
            help: "",
            repeatable: false,
            flag: false,
        }]
    }
}

impl ResultsFiles for Ticks {}

impl SweepWords for Ticks {
    fn sweep_options(&self) -> &'static [(&'static str, &'static str)] {
        &[("frames", "8")]
    }
}

impl WorkloadKind for Ticks {
    fn frame_period(&self, _: &Graph) -> Option<Duration> {
        Some(Duration::from_millis(1))
    }
    fn prepare(&self, _: &Request<'_>) -> Result<Box<dyn Prepared>, KindError> {
        Err(KindError::Kind("not preparable".into()))
    }
}

fn shape(text: &str) -> FrameShape {
    text.parse().unwrap()
}

#[test]
fn a_workload_sweep_runs_at_each_shape_asked_or_the_graphs_own() {
    let dir = tempfile::tempdir().unwrap();
    let graph = graph_file(dir.path(), Some("ticks"));
    let registry = Registry::new().register(Ticks);
    let (shapes, kind) = SearchShape::for_workload(&registry, &graph, &[]).unwrap();
    assert_eq!(kind.name(), "ticks");
    assert_eq!(
        shapes,
        [SearchShape {
            shape: shape("8x4"),
            frame_period: Some(Duration::from_millis(1)),
            frame_bytes: 8 * 4 * 4,
        }]
    );
    let asked = [shape("16x4"), shape("8x2")];
    let (shapes, _) = SearchShape::for_workload(&registry, &graph, &asked).unwrap();
    let found: Vec<_> = shapes
        .iter()
        .map(|s| (s.shape.clone(), s.frame_bytes))
        .collect();
    assert_eq!(found, [(shape("16x4"), 256), (shape("8x2"), 64)]);
}

#[test]
fn a_workload_sweep_names_the_option_to_fix() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::new().register(Ticks);
    let missing = dir.path().join("none.yaml");
    let error = SearchShape::for_workload(&registry, &missing, &[]).unwrap_err();
    assert!(matches!(error, ShapeError::Graph { .. }), "{error:?}");
    assert!(
        error
            .to_string()
            .starts_with(&format!("--graph {}: cannot read graph", missing.display())),
        "{error}"
    );
    let unnamed = graph_file(dir.path(), None);
    let error = SearchShape::for_workload(&registry, &unnamed, &[]).unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("names no workload")
            && text.ends_with("; bisect-rate runs it with --recording FILE --check CHECK"),
        "{text}"
    );
    let graph = graph_file(dir.path(), Some("ticks"));
    let error = SearchShape::for_workload(&registry, &graph, &[shape("8x4x2")]).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with(&format!("--shape 8x4x2: graph {}: ", graph.display())),
        "{error}"
    );
}

#[test]
fn a_recording_sweep_runs_at_the_recordings_shape_and_pace() {
    let dir = tempfile::tempdir().unwrap();
    let graph = graph_file(dir.path(), None);
    // 64 samples a frame at 64 kHz: 1 ms.
    let paced = recording(dir.path(), &graph, Some(64e3));
    let shapes = SearchShape::for_recording(&graph, &[], &paced, None).unwrap();
    assert_eq!(
        shapes,
        [SearchShape {
            shape: shape("16x4"),
            frame_period: Some(Duration::from_millis(1)),
            frame_bytes: 16 * 4 * 4,
        }]
    );
    let asked = SearchShape::for_recording(&graph, &[shape("16x4")], &paced, None).unwrap();
    assert_eq!(asked, shapes);
    let unpaced = recording(dir.path(), &graph, None);
    let shapes = SearchShape::for_recording(&graph, &[], &unpaced, Some(100.0)).unwrap();
    assert_eq!(shapes[0].frame_period, None);
}

#[test]
fn a_recording_sweep_names_the_option_to_fix() {
    let dir = tempfile::tempdir().unwrap();
    let graph = graph_file(dir.path(), None);
    let unpaced = recording(dir.path(), &graph, None);
    let error = SearchShape::for_recording(&graph, &[], &unpaced, None).unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "--recording {}: it states no sample rate, so its real-time pace is unknown: give --start-rate (frames/s), or record it with one",
            unpaced.display()
        )
    );
    let two = [shape("16x4"), shape("8x4")];
    let error = SearchShape::for_recording(&graph, &two, &unpaced, Some(1.0)).unwrap_err();
    assert_eq!(
        error.to_string(),
        "--shape: a sweep on a recording runs at the recording's one shape"
    );
    // The graph bound at another shape than the recording's frames.
    let error =
        SearchShape::for_recording(&graph, &[shape("8x4")], &unpaced, Some(1.0)).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with(&format!("--recording {}: ", unpaced.display())),
        "{error}"
    );
}

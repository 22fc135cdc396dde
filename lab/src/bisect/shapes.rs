//! The frame shapes a sweep runs at, resolved before it starts: from the graph file, the
//! shapes asked for (`--shape`), a recording's SigMF metadata, and the workload kind's
//! real-time frame period at each shape. [`SearchShape::for_workload`] resolves a sweep of the
//! graph's own workload, [`SearchShape::for_recording`] one that streams a recording; each
//! error names the option (`--graph`, `--shape`, `--recording`, `--start-rate`) to fix.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use kplace::model::graph::{Graph, GraphError, Overrides};
use kplace::model::shape::FrameShape;
use kplace::workload::kind::{KindError, Registry, WorkloadKind};
use kplace::workload::recording::{Recording, RecordingError};

use super::config::SearchShape;

/// Why the shapes of a sweep cannot be resolved, naming the option to fix.
#[derive(Debug, thiserror::Error)]
pub enum ShapeError {
    /// The graph file cannot be loaded.
    #[error("--graph {}: {error}", path.display())]
    Graph {
        /// The graph file.
        path: PathBuf,
        /// Why, in the message (so not the error's source as well).
        error: GraphError,
    },
    /// The graph file cannot be loaded with the dimensions a shape binds.
    #[error(transparent)]
    Bound(GraphError),
    /// The graph names no workload this program runs.
    #[error("{0}; bisect-rate runs it with --recording FILE --check CHECK")]
    Kind(KindError),
    /// A shape asked for does not fit the graph's source.
    #[error("--shape {shape}: graph {}: {why}", graph.display())]
    Shape {
        /// The shape asked for.
        shape: FrameShape,
        /// The graph file.
        graph: PathBuf,
        /// Why it does not fit.
        why: kplace::model::graph::SourceShapeError,
    },
    /// More than one shape asked for a recording's sweep.
    #[error("--shape: a sweep on a recording runs at the recording's one shape")]
    RecordingShapes,
    /// The recording's metadata cannot be read.
    #[error(transparent)]
    Described(RecordingError),
    /// The recording does not hold frames of the graph's source.
    #[error("--recording {}: {error}", path.display())]
    Recording {
        /// The recording.
        path: PathBuf,
        /// Why, in the message.
        error: RecordingError,
    },
    /// The recording states no sample rate and no start rate was given.
    #[error(
        "--recording {}: it states no sample rate, so its real-time pace is unknown: give --start-rate (frames/s), or record it with one",
        .0.display()
    )]
    NoPace(PathBuf),
    /// What the registry or a bound graph guarantees did not hold (a bug, never an input's).
    #[error("{0}")]
    Broken(&'static str),
}

impl SearchShape {
    /// The shapes a sweep of `graph`'s own workload runs at: each of `asked`, or the graph
    /// file's own; with the workload's real-time frame period at each, and its kind (found in
    /// `registry` by the name the graph gives).
    pub fn for_workload(
        registry: &Registry,
        graph: &Path,
        asked: &[FrameShape],
    ) -> Result<(Vec<SearchShape>, Arc<dyn WorkloadKind>), ShapeError> {
        let file = load(graph)?;
        let name = registry
            .for_graph(&file, false)
            .map(|k| k.name())
            .map_err(ShapeError::Kind)?;
        let kind = registry.shared(name).ok_or(ShapeError::Broken(
            "a kind the registry found is registered",
        ))?;
        let shapes = at_shapes(&file, graph, asked)?
            .into_iter()
            .map(|bound| SearchShape::of_graph(&bound, kind.frame_period(&bound)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok((shapes, kind))
    }

    /// The shape a sweep streaming `recording` runs at: `graph` bound by the one shape
    /// `asked`, else by the recording's metadata; with its real-time period from the
    /// recording's sample rate. One that states no sample rate needs a `start_rate`.
    pub fn for_recording(
        graph: &Path,
        asked: &[FrameShape],
        recording: &Path,
        start_rate: Option<f64>,
    ) -> Result<Vec<SearchShape>, ShapeError> {
        let file = load(graph)?;
        let graphs = match asked {
            [] => {
                let described =
                    Recording::described_shape(recording).map_err(ShapeError::Described)?;
                let dims = described
                    .and_then(|shape| FrameShape::of_tensor(&shape))
                    .and_then(|shape| file.bind_source_shape(shape.extents()).ok())
                    .unwrap_or_default();
                vec![bound(graph, dims)?]
            }
            [_] => at_shapes(&file, graph, asked)?,
            _ => return Err(ShapeError::RecordingShapes),
        };
        let mut shapes = Vec::new();
        for bound in graphs {
            let frames =
                Recording::load(recording, &bound).map_err(|error| ShapeError::Recording {
                    path: recording.to_path_buf(),
                    error,
                })?;
            let frame_period = frames.frame_period(bound.tensor(bound.source.tensor));
            if frame_period.is_none() && start_rate.is_none() {
                return Err(ShapeError::NoPace(recording.to_path_buf()));
            }
            shapes.push(SearchShape::of_graph(&bound, frame_period)?);
        }
        Ok(shapes)
    }

    /// What a sweep at `graph`'s source shape needs to know of it, with the workload's
    /// real-time `frame_period` there.
    fn of_graph(graph: &Graph, frame_period: Option<Duration>) -> Result<SearchShape, ShapeError> {
        let source = graph.tensor(graph.source.tensor);
        Ok(SearchShape {
            shape: FrameShape::of_tensor(&source.shape)
                .ok_or(ShapeError::Broken("a bound source has a shape"))?,
            frame_period,
            frame_bytes: source.bytes,
        })
    }
}

/// The graph file at `path`, as it is (`--graph`).
fn load(path: &Path) -> Result<Graph, ShapeError> {
    Graph::load(path, &Overrides::default()).map_err(|error| ShapeError::Graph {
        path: path.to_path_buf(),
        error,
    })
}

/// The graph file at `path` with `dims` bound.
fn bound(path: &Path, dims: Vec<(String, u64)>) -> Result<Graph, ShapeError> {
    Graph::load(
        path,
        &Overrides {
            dims,
            params: Vec::new(),
        },
    )
    .map_err(ShapeError::Bound)
}

/// `file` bound at each of `asked` (loaded again from `path`), or as it is.
fn at_shapes(file: &Graph, path: &Path, asked: &[FrameShape]) -> Result<Vec<Graph>, ShapeError> {
    if asked.is_empty() {
        return Ok(vec![file.clone()]);
    }
    asked
        .iter()
        .map(|shape| {
            let dims =
                file.bind_source_shape(shape.extents())
                    .map_err(|why| ShapeError::Shape {
                        shape: shape.clone(),
                        graph: path.to_path_buf(),
                        why,
                    })?;
            bound(path, dims)
        })
        .collect()
}

#[cfg(test)]
pub(super) mod tests;

//! The graph model: stages, the tensors between them, the source that fills a frame, and the
//! sinks a frame's results are read from.
//!
//! A graph file (YAML) names its dimensions symbolically (`N`, `M`; any names), so one file
//! serves every frame shape; [`Graph::load`] binds the symbols (the file's values, then the
//! command line's), and checks the whole graph before anything is planned (in `bind`). What it guarantees: every tensor has exactly one
//! producer (the source or one stage) and a known size; stages are in an order where every
//! input is produced before it is read; a split stage's tile divides its axis. Every error
//! names the file, and the line and column where the file has one.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use kplace_abi::{Dtype, Scalar};

/// An index into [`Graph::tensors`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TensorId(pub usize);

/// An index into [`Graph::stages`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StageId(pub usize);

/// A graph whose symbols are bound and whose structure has been checked.
#[derive(Clone, Debug)]
pub struct Graph {
    /// The graph's name.
    pub name: String,
    /// The file it came from.
    pub path: PathBuf,
    /// Dimension symbols and their values.
    pub dims: BTreeMap<String, u64>,
    /// Every tensor, in file order.
    pub tensors: Vec<TensorSpec>,
    /// Every stage, in an order where producers precede consumers (the file's order).
    pub stages: Vec<StageSpec>,
    /// Where frames come from.
    pub source: SourceSpec,
    /// The dimension each axis of the source tensor's shape names in the graph file, outermost
    /// first; `None` for an axis written as a number. What a frame shape given innermost first
    /// (`--shape 1024x128`, a recording's metadata) binds: [`Graph::bind_source_shape`].
    pub source_dims: Vec<Option<String>>,
    /// The tensors a completed frame hands to the application.
    pub sinks: Vec<TensorId>,
    /// How each sink, in [`Graph::sinks`] order, is compared with a reference.
    pub tolerances: Vec<Tolerance>,
    /// The workload that feeds and judges this graph (`fmcw-radar`), if it names one; a
    /// graph that names none runs on a recording, checked against a reference.
    pub workload: Option<String>,
    /// The constant tensors' contents, in tensor order ([`Producer::Constant`]).
    pub constants: Vec<Constant>,
}

/// The most bytes a graph file may hold: far more than a graph of thousands of stages needs
/// (arrays belong in `.npy` files it names), and read whole before it is parsed.
pub const MAX_GRAPH_BYTES: u64 = 4 << 20;

/// The most bytes a constant tensor may hold: it is read whole when the graph is loaded, and
/// held for the run in host memory (and in each GPU's memory that reads it).
pub const MAX_CONSTANT_BYTES: u64 = 256 << 20;

/// A tensor whose contents are the same in every frame, read from an `.npy` file when the graph
/// is loaded (beam weights, a filter's taps as a tensor): stages read it like any input, and no
/// stage writes it.
#[derive(Clone, PartialEq)]
pub struct Constant {
    /// The tensor.
    pub tensor: TensorId,
    /// The file it was read from.
    pub path: PathBuf,
    /// Its bytes, the tensor's size, shared by every copy of the graph.
    pub data: std::sync::Arc<[u8]>,
}

impl fmt::Debug for Constant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Constant")
            .field("tensor", &self.tensor)
            .field("path", &self.path)
            .field("bytes", &self.data.len())
            .finish()
    }
}

/// How a sink tensor's elements are compared with a reference's (the graph's `checks:`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Tolerance {
    /// Bit for bit: the default for integer tensors and record lists, and the only choice
    /// for them.
    Exact,
    /// A float element passes when `|got - want| <= atol + rtol * |want|` (for complex
    /// elements, the modulus of the difference and of `want`); NaN never passes.
    Close {
        /// Relative to the reference element.
        rtol: f64,
        /// Absolute, in the tensor's units.
        atol: f64,
    },
}

impl Tolerance {
    /// The tolerance of a float tensor whose graph declares none.
    pub const DEFAULT_FLOAT: Tolerance = Tolerance::Close {
        rtol: 1e-5,
        atol: 0.0,
    };

    /// The tolerance of a half-precision tensor whose graph declares none: two of binary16's
    /// 2^-10 steps.
    pub const DEFAULT_HALF: Tolerance = Tolerance::Close {
        rtol: 2e-3,
        atol: 0.0,
    };

    /// The tolerance of a bfloat16 tensor whose graph declares none: two of its 2^-7 steps.
    pub const DEFAULT_BFLOAT: Tolerance = Tolerance::Close {
        rtol: 1.6e-2,
        atol: 0.0,
    };

    /// The tolerance a tensor of `dtype` gets when the graph declares none: floats within a
    /// relative bound, everything else exactly.
    pub fn default_for(dtype: Dtype) -> Tolerance {
        match dtype.element().map(|e| e.scalar) {
            Some(Scalar::F16) => Tolerance::DEFAULT_HALF,
            Some(Scalar::BF16) => Tolerance::DEFAULT_BFLOAT,
            Some(Scalar::F32 | Scalar::F64) => Tolerance::DEFAULT_FLOAT,
            _ => Tolerance::Exact,
        }
    }
}

impl fmt::Display for Tolerance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tolerance::Exact => f.write_str("exact"),
            Tolerance::Close { rtol, atol } => write!(f, "rtol {rtol:e}, atol {atol:e}"),
        }
    }
}

/// One tensor: a buffer per frame slot.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorSpec {
    /// Its name in the graph file.
    pub name: String,
    /// Element type.
    pub dtype: Dtype,
    /// Bound shape.
    pub shape: Vec<u64>,
    /// Size of one frame's buffer.
    pub bytes: u64,
    /// Who writes it.
    pub producer: Producer,
}

/// The writer of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Producer {
    /// The frame source (packets).
    Source,
    /// A stage.
    Stage(StageId),
    /// Nobody: its contents are the graph's, the same in every frame ([`Graph::constant`]).
    Constant,
}

/// One stage: a kernel applied to tensors.
#[derive(Clone, Debug, PartialEq)]
pub struct StageSpec {
    /// Its name in the graph file (what placement files refer to).
    pub name: String,
    /// The logical kernel name, e.g. `radar.range_fft`.
    pub kernel: String,
    /// Tensors read.
    pub inputs: Vec<TensorId>,
    /// Tensors written.
    pub outputs: Vec<TensorId>,
    /// Parameters as text, symbols substituted, overrides applied, sorted by name.
    pub params: Vec<(String, String)>,
    /// Tiling of launches along an axis of input 0.
    pub split: Option<Split>,
    /// Line of the stage's entry in the graph file.
    pub line: u64,
}

/// A stage launched per tile of an axis of its first input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Split {
    /// Axis of input 0.
    pub axis: usize,
    /// Indices per tile; divides the axis.
    pub tile: u64,
}

/// The frame source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourceSpec {
    /// The tensor the source fills.
    pub tensor: TensorId,
    /// One packet fills one index along this axis.
    pub packet_axis: usize,
    /// The axis that indexes the stream's channels (an array's elements, sampled at once),
    /// if the graph states one: a frame then lasts its samples per channel at the
    /// per-channel sample rate, not all its elements one after another.
    pub channel_axis: Option<usize>,
}

impl SourceSpec {
    /// Packets per frame.
    pub fn packets(&self, graph: &Graph) -> u64 {
        graph.tensor(self.tensor).shape[self.packet_axis]
    }

    /// Bytes of one packet's payload in the source tensor.
    pub fn packet_bytes(&self, graph: &Graph) -> u64 {
        let t = graph.tensor(self.tensor);
        t.bytes / t.shape[self.packet_axis]
    }

    /// Channels in a frame: the channel axis's extent, or 1 without one.
    pub fn channels(&self, graph: &Graph) -> u64 {
        self.channel_axis
            .map_or(1, |axis| graph.tensor(self.tensor).shape[axis])
    }

    /// Samples of each channel in a frame: every element of the source tensor when it has
    /// one channel. What a frame lasts is this many samples at the per-channel rate.
    pub fn samples_per_channel(&self, graph: &Graph) -> u64 {
        let elements: u64 = graph.tensor(self.tensor).shape.iter().product();
        elements / self.channels(graph)
    }
}

/// Why a frame shape does not fit a graph's source tensor ([`Graph::bind_source_shape`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SourceShapeError {
    /// The frame shape has another number of axes than the source tensor.
    #[error(
        "a frame shape of {given} dimensions for the source {tensor}, which has {} ([{}])",
        .written.len(),
        .written.join(", ")
    )]
    Rank {
        /// Axes the frame shape gives.
        given: usize,
        /// The source tensor.
        tensor: String,
        /// Its axes as the graph file writes them, outermost first.
        written: Vec<String>,
    },
    /// Two axes named by one dimension are given two extents.
    #[error("the frame shape gives dimension {dim} both {first} and {then}")]
    Twice {
        /// The dimension.
        dim: String,
        /// The extent it got first.
        first: u64,
        /// The other.
        then: u64,
    },
    /// An axis the graph file writes as a number is given another extent.
    #[error("axis {axis} of the source {tensor} is {written} in the graph file, not {extent}")]
    Fixed {
        /// The axis, innermost 0.
        axis: usize,
        /// The source tensor.
        tensor: String,
        /// The extent the file writes.
        written: u64,
        /// The extent given.
        extent: u64,
    },
}

impl Graph {
    /// The tensor `id`.
    pub fn tensor(&self, id: TensorId) -> &TensorSpec {
        &self.tensors[id.0]
    }

    /// The shape of a source frame, innermost axis first (`1024x128` for a source of shape
    /// `[128, 1024]`). A bound graph's source has its packet axis and no zero extent, so the
    /// shape always has one; the fallback, one element, is never reached.
    pub fn frame_shape(&self) -> super::shape::FrameShape {
        super::shape::FrameShape::of_tensor(&self.tensor(self.source.tensor).shape)
            .unwrap_or_else(super::shape::FrameShape::one)
    }

    /// The dimension values that give the source tensor the frame shape `extents`, innermost
    /// axis first (`[1024, 128]` for a source of shape `[M, N]` binds `N = 1024, M = 128`).
    /// An axis the file writes as a number must already have its extent; the error says which
    /// axis does not fit, and how the shape was written.
    pub fn bind_source_shape(
        &self,
        extents: &[u64],
    ) -> Result<Vec<(String, u64)>, SourceShapeError> {
        let tensor = self.tensor(self.source.tensor);
        let written: Vec<String> = self
            .source_dims
            .iter()
            .zip(&tensor.shape)
            .map(|(d, n)| d.clone().unwrap_or_else(|| n.to_string()))
            .collect();
        if extents.len() != tensor.shape.len() {
            return Err(SourceShapeError::Rank {
                given: extents.len(),
                tensor: tensor.name.clone(),
                written,
            });
        }
        let mut dims: Vec<(String, u64)> = Vec::new();
        for (axis, &extent) in extents.iter().rev().enumerate() {
            match &self.source_dims.get(axis).cloned().flatten() {
                Some(name) => match dims.iter().find(|(n, _)| n == name) {
                    Some((_, bound)) if *bound != extent => {
                        return Err(SourceShapeError::Twice {
                            dim: name.clone(),
                            first: *bound,
                            then: extent,
                        });
                    }
                    Some(_) => {}
                    None => dims.push((name.clone(), extent)),
                },
                None if tensor.shape[axis] != extent => {
                    return Err(SourceShapeError::Fixed {
                        axis,
                        tensor: tensor.name.clone(),
                        written: tensor.shape[axis],
                        extent,
                    });
                }
                None => {}
            }
        }
        Ok(dims)
    }

    /// The stage `id`.
    pub fn stage(&self, id: StageId) -> &StageSpec {
        &self.stages[id.0]
    }

    /// Launches per frame of stage `id`: the tiles of its split axis, else 1.
    pub fn launches(&self, id: StageId) -> u64 {
        let stage = self.stage(id);
        stage
            .split
            .map_or(1, |s| self.tensor(stage.inputs[0]).shape[s.axis] / s.tile)
    }

    /// Whether stage `id` is *streamed*: launched tile by tile as the source delivers the
    /// packets of each tile, because it reads only the source tensor and is split along the
    /// packet axis. Every other stage starts once its inputs are complete.
    pub fn is_streamed(&self, id: StageId) -> bool {
        let stage = self.stage(id);
        let source = self.source.tensor;
        !stage.inputs.is_empty()
            && stage.inputs.iter().all(|&t| t == source)
            && stage
                .split
                .is_some_and(|s| s.axis == self.source.packet_axis)
    }

    /// The stage named `name`, if any.
    pub fn stage_by_name(&self, name: &str) -> Option<StageId> {
        self.stages.iter().position(|s| s.name == name).map(StageId)
    }

    /// The tensor named `name`, if any.
    pub fn tensor_by_name(&self, name: &str) -> Option<TensorId> {
        self.tensors
            .iter()
            .position(|t| t.name == name)
            .map(TensorId)
    }

    /// The contents of tensor `id` when it is a constant.
    pub fn constant(&self, id: TensorId) -> Option<&Constant> {
        self.constants.iter().find(|c| c.tensor == id)
    }

    /// Stages that read tensor `id`.
    pub fn consumers(&self, id: TensorId) -> impl Iterator<Item = StageId> + '_ {
        self.stages
            .iter()
            .enumerate()
            .filter(move |(_, s)| s.inputs.contains(&id))
            .map(|(i, _)| StageId(i))
    }

    /// Stages whose outputs stage `id` reads (each once).
    pub fn predecessors(&self, id: StageId) -> Vec<StageId> {
        let mut preds: Vec<StageId> = self
            .stage(id)
            .inputs
            .iter()
            .filter_map(|&t| match self.tensor(t).producer {
                Producer::Stage(s) => Some(s),
                Producer::Source | Producer::Constant => None,
            })
            .collect();
        preds.sort();
        preds.dedup();
        preds
    }

    /// Reads, binds and checks a graph file ([`GraphSource::read`], then
    /// [`GraphSource::bind`]).
    pub fn load(path: &Path, overrides: &Overrides) -> Result<Graph, GraphError> {
        GraphSource::read(path)?.bind(overrides)
    }

    /// Binds and checks graph text; `path` names it in errors.
    pub fn parse(text: &str, path: &Path, overrides: &Overrides) -> Result<Graph, GraphError> {
        GraphSource::parse(text.to_string(), path)?.bind(overrides)
    }
}

/// A graph file read and parsed once, to be bound as often as a run needs (the shape first,
/// then each pipeline's overrides) without reading or parsing it again. Cloning shares it.
#[derive(Clone)]
pub struct GraphSource {
    parsed: std::sync::Arc<ParsedGraph>,
}

/// What [`GraphSource`] shares: the file's text (errors quote it) and its parse.
struct ParsedGraph {
    path: PathBuf,
    text: String,
    file: bind::GraphFile,
}

impl GraphSource {
    /// Reads a graph file (at most [`MAX_GRAPH_BYTES`]) and parses it.
    pub fn read(path: &Path) -> Result<GraphSource, GraphError> {
        let text = crate::os::files::read_text_bounded(path, MAX_GRAPH_BYTES, "graph")?;
        Self::parse(text, path)
    }

    /// Parses graph text; `path` names it in errors.
    pub fn parse(text: String, path: &Path) -> Result<GraphSource, GraphError> {
        let file: bind::GraphFile =
            serde_saphyr::from_str(&text).map_err(|source| GraphError::Syntax {
                path: path.to_path_buf(),
                cause: super::yaml::syntax_error(&source, path, "a graph"),
            })?;
        Ok(GraphSource {
            parsed: std::sync::Arc::new(ParsedGraph {
                path: path.to_path_buf(),
                text,
                file,
            }),
        })
    }

    /// The file it was read from.
    pub fn path(&self) -> &Path {
        &self.parsed.path
    }

    /// Binds the file's symbols (its own values, then `overrides`) and checks the graph.
    pub fn bind(&self, overrides: &Overrides) -> Result<Graph, GraphError> {
        bind::Binder {
            path: &self.parsed.path,
            source: &self.parsed.text,
            overrides,
        }
        .bind(self.parsed.file.clone())
    }
}

impl fmt::Debug for GraphSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GraphSource")
            .field("path", &self.parsed.path)
            .finish_non_exhaustive()
    }
}

/// Values given on the command line that replace the graph file's.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// `symbol = value`: replaces a dimension (`--set DIM=VALUE`, and `--shape` for the source's dimensions).
    pub dims: Vec<(String, u64)>,
    /// `(stage, param, value)`: replaces or adds a stage parameter.
    pub params: Vec<(String, String, String)>,
}

/// Why a graph could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum GraphError {
    /// The file could not be read, or holds more than [`MAX_GRAPH_BYTES`].
    #[error(transparent)]
    Read(#[from] crate::os::files::ReadBoundedError),
    /// The file is not valid YAML for a graph (the message has line and column).
    #[error("graph {}: {cause}", path.display())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The parser's error, with line, column and a snippet naming the file.
        cause: String,
    },
    /// The file parses but describes an invalid graph.
    #[error("graph {}{}: {message}", path.display(), at.map(|(l, c)| format!(":{l}:{c}")).unwrap_or_default())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Line and column, where the problem has one.
        at: Option<(u64, u64)>,
        /// What is wrong.
        message: String,
    },
}

impl fmt::Display for TensorSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}{:?}",
            self.name,
            self.dtype.name().unwrap_or("?"),
            self.shape
        )
    }
}

mod bind;
mod expr;
mod params;

#[cfg(test)]
mod tests;

//! The graph model: stages, the tensors between them, the source that fills a frame, and the
//! sinks a frame's results are read from.
//!
//! A graph file (YAML) names its dimensions symbolically (`N`, `M`), so one file serves every
//! CPI size; [`Graph::load`] binds the symbols, applies command-line overrides, and checks the
//! whole graph before anything is planned. What it guarantees: every tensor has exactly one
//! producer (the source or one stage) and a known size; stages are in an order where every
//! input is produced before it is read; a split stage's tile divides its axis. Every error
//! names the file, and the line and column where the file has one.
//!
//! Long (599 lines of code, 198 of tests): parsing, binding and every structural check of a
//! graph file, each with the file, line and field in its error.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use kplace_abi::{Dtype, MAX_RANK};
use serde::Deserialize;
use serde_saphyr::Spanned;

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
}

/// How a sink tensor's elements are compared with a reference's (the graph's `checks:`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Tolerance {
    /// Bit for bit: the default for integer tensors and detection lists, and the only choice
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

    /// The tolerance a tensor of `dtype` gets when the graph declares none.
    pub fn default_for(dtype: Dtype) -> Tolerance {
        match dtype {
            Dtype::CF32 | Dtype::F32 => Tolerance::DEFAULT_FLOAT,
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
}

impl Graph {
    /// The tensor `id`.
    pub fn tensor(&self, id: TensorId) -> &TensorSpec {
        &self.tensors[id.0]
    }

    /// The dimension values that give the source tensor the frame shape `extents`, innermost
    /// axis first (`[1024, 128]` for a source of shape `[M, N]` binds `N = 1024, M = 128`).
    /// An axis the file writes as a number must already have its extent; the error says which
    /// axis does not fit, and how the shape was written.
    pub fn bind_source_shape(&self, extents: &[u64]) -> Result<Vec<(String, u64)>, String> {
        let tensor = self.tensor(self.source.tensor);
        let written: Vec<String> = self
            .source_dims
            .iter()
            .zip(&tensor.shape)
            .map(|(d, n)| d.clone().unwrap_or_else(|| n.to_string()))
            .collect();
        if extents.len() != tensor.shape.len() {
            return Err(format!(
                "a frame shape of {} dimensions for the source {}, which has {} ([{}])",
                extents.len(),
                tensor.name,
                tensor.shape.len(),
                written.join(", ")
            ));
        }
        let mut dims: Vec<(String, u64)> = Vec::new();
        for (axis, &extent) in extents.iter().rev().enumerate() {
            match &self.source_dims.get(axis).cloned().flatten() {
                Some(name) => match dims.iter().find(|(n, _)| n == name) {
                    Some((_, bound)) if *bound != extent => {
                        return Err(format!(
                            "the frame shape gives dimension {name} both {bound} and {extent}"
                        ));
                    }
                    Some(_) => {}
                    None => dims.push((name.clone(), extent)),
                },
                None if tensor.shape[axis] != extent => {
                    return Err(format!(
                        "axis {axis} of the source {} is {} in the graph file, not {extent}",
                        tensor.name, tensor.shape[axis]
                    ));
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
                Producer::Source => None,
            })
            .collect();
        preds.sort();
        preds.dedup();
        preds
    }

    /// Reads, binds and checks a graph file.
    pub fn load(path: &Path, overrides: &Overrides) -> Result<Graph, GraphError> {
        let text = std::fs::read_to_string(path).map_err(|source| GraphError::Io {
            path: path.to_path_buf(),
            cause: source,
        })?;
        Self::parse(&text, path, overrides)
    }

    /// Binds and checks graph text; `path` names it in errors.
    pub fn parse(text: &str, path: &Path, overrides: &Overrides) -> Result<Graph, GraphError> {
        let file: GraphFile =
            serde_saphyr::from_str(text).map_err(|source| GraphError::Syntax {
                path: path.to_path_buf(),
                cause: Box::new(source),
            })?;
        Binder { path, overrides }.bind(file)
    }
}

/// Values given on the command line that replace the graph file's.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// `symbol = value`: replaces a dimension (the `--cpi NxM` flag sets `N` and `M`).
    pub dims: Vec<(String, u64)>,
    /// `(stage, param, value)`: replaces or adds a stage parameter.
    pub params: Vec<(String, String, String)>,
}

/// Why a graph could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum GraphError {
    /// The file could not be read.
    #[error("cannot read graph {}: {cause}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        cause: std::io::Error,
    },
    /// The file is not valid YAML for a graph (the message has line and column).
    #[error("graph {}: {cause}", path.display())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The parser's error, with line, column and a snippet.
        cause: Box<serde_saphyr::Error>,
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

// ---- the file as written --------------------------------------------------------------------

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GraphFile {
    name: String,
    #[serde(default)]
    dims: BTreeMap<String, u64>,
    source: SourceFile,
    tensors: Vec<Spanned<TensorFile>>,
    stages: Vec<Spanned<StageFile>>,
    sinks: Vec<Spanned<String>>,
    #[serde(default)]
    checks: BTreeMap<String, Spanned<CheckFile>>,
    #[serde(default)]
    workload: Option<String>,
}

/// A sink's tolerance as written: `{rtol, atol}`, each 0 when absent (`{}` is exact).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckFile {
    #[serde(default)]
    rtol: f64,
    #[serde(default)]
    atol: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SourceFile {
    tensor: Spanned<String>,
    packet_axis: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TensorFile {
    name: String,
    dtype: Spanned<String>,
    shape: Vec<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StageFile {
    name: String,
    kernel: String,
    inputs: Vec<Spanned<String>>,
    outputs: Vec<Spanned<String>>,
    #[serde(default)]
    params: BTreeMap<String, Spanned<String>>,
    split: Option<Spanned<SplitFile>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SplitFile {
    axis: usize,
    tile: u64,
}

fn at<T>(s: &Spanned<T>) -> Option<(u64, u64)> {
    Some((s.referenced.line(), s.referenced.column()))
}

/// Turns the file as written into a [`Graph`], one check at a time.
struct Binder<'a> {
    path: &'a Path,
    overrides: &'a Overrides,
}

impl Binder<'_> {
    fn invalid(&self, at: Option<(u64, u64)>, message: impl Into<String>) -> GraphError {
        GraphError::Invalid {
            path: self.path.to_path_buf(),
            at,
            message: message.into(),
        }
    }

    fn bind(&self, file: GraphFile) -> Result<Graph, GraphError> {
        let dims = self.bind_dims(file.dims)?;
        let mut tensors = Vec::with_capacity(file.tensors.len());
        for t in &file.tensors {
            if tensors.iter().any(|x: &TensorSpec| x.name == t.value.name) {
                return Err(
                    self.invalid(at(t), format!("tensor {} is declared twice", t.value.name))
                );
            }
            tensors.push(self.bind_tensor(t, &dims)?);
        }
        let find = |name: &Spanned<String>, tensors: &[TensorSpec]| {
            tensors
                .iter()
                .position(|t| t.name == name.value)
                .map(TensorId)
                .ok_or_else(|| {
                    let known: Vec<&str> = tensors.iter().map(|t| t.name.as_str()).collect();
                    self.invalid(
                        at(name),
                        format!(
                            "unknown tensor {} (declared: {})",
                            name.value,
                            known.join(", ")
                        ),
                    )
                })
        };

        let source_tensor = find(&file.source.tensor, &tensors)?;
        if file.source.packet_axis != 0 {
            return Err(self.invalid(
                at(&file.source.tensor),
                format!(
                    "source packet_axis must be 0: a packet fills one index of the outermost axis of {}, \
                     contiguously (got {})",
                    file.source.tensor.value, file.source.packet_axis
                ),
            ));
        }
        tensors[source_tensor.0].producer = Producer::Source;
        let mut produced = vec![false; tensors.len()];
        produced[source_tensor.0] = true;

        let mut stages: Vec<StageSpec> = Vec::with_capacity(file.stages.len());
        for (index, s) in file.stages.iter().enumerate() {
            let spec = &s.value;
            if stages.iter().any(|x| x.name == spec.name) {
                return Err(self.invalid(at(s), format!("stage {} is declared twice", spec.name)));
            }
            let mut inputs = Vec::new();
            for name in &spec.inputs {
                let id = find(name, &tensors)?;
                if !produced[id.0] {
                    return Err(self.invalid(
                        at(name),
                        format!(
                            "stage {} reads tensor {} before any earlier stage or the source writes it \
                             (list stages so that producers come first)",
                            spec.name, name.value
                        ),
                    ));
                }
                inputs.push(id);
            }
            let mut outputs = Vec::new();
            for name in &spec.outputs {
                let id = find(name, &tensors)?;
                if produced[id.0] {
                    return Err(self.invalid(
                        at(name),
                        format!(
                            "tensor {} has a second writer: stage {}",
                            name.value, spec.name
                        ),
                    ));
                }
                produced[id.0] = true;
                tensors[id.0].producer = Producer::Stage(StageId(index));
                outputs.push(id);
            }
            if inputs.is_empty() || outputs.is_empty() {
                return Err(self.invalid(
                    at(s),
                    format!(
                        "stage {} needs at least one input and one output",
                        spec.name
                    ),
                ));
            }
            let split = match &spec.split {
                None => None,
                Some(split) => Some(self.bind_split(split, &spec.name, &tensors[inputs[0].0])?),
            };
            stages.push(StageSpec {
                name: spec.name.clone(),
                kernel: spec.kernel.clone(),
                inputs,
                outputs,
                params: self.bind_params(&spec.name, &spec.params, &dims)?,
                split,
                line: s.referenced.line(),
            });
        }

        if let Some((i, _)) = produced.iter().enumerate().find(|(_, p)| !**p) {
            let decl = &file.tensors[i];
            return Err(self.invalid(
                at(decl),
                format!("tensor {} is never written", tensors[i].name),
            ));
        }
        for (stage, param, _) in &self.overrides.params {
            if !stages.iter().any(|s| &s.name == stage) {
                return Err(self.invalid(
                    None,
                    format!("--set {stage}.{param}: the graph has no stage {stage}"),
                ));
            }
        }
        let mut sinks = Vec::new();
        for name in &file.sinks {
            sinks.push(find(name, &tensors)?);
        }
        if sinks.is_empty() {
            return Err(self.invalid(None, "the graph names no sinks"));
        }
        let source_dims = source_dims(&file.tensors, &file.source.tensor.value);
        let tolerances = self.bind_checks(&file.checks, &sinks, &tensors)?;
        Ok(Graph {
            name: file.name,
            path: self.path.to_path_buf(),
            dims,
            tensors,
            stages,
            source: SourceSpec {
                tensor: source_tensor,
                packet_axis: file.source.packet_axis,
            },
            source_dims,
            sinks,
            tolerances,
            workload: file.workload,
        })
    }

    /// Each sink's tolerance: the one `checks:` declares, or its type's default. A check on a
    /// tensor that is not a sink, a negative or non-finite bound, or a bound on an integer
    /// tensor (compared exactly) is an error.
    fn bind_checks(
        &self,
        checks: &BTreeMap<String, Spanned<CheckFile>>,
        sinks: &[TensorId],
        tensors: &[TensorSpec],
    ) -> Result<Vec<Tolerance>, GraphError> {
        for (name, check) in checks {
            if !sinks.iter().any(|&TensorId(t)| tensors[t].name == *name) {
                return Err(self.invalid(
                    at(check),
                    format!("checks: {name} is not a sink; only sinks are compared"),
                ));
            }
        }
        let mut tolerances = Vec::with_capacity(sinks.len());
        for &TensorId(t) in sinks {
            let tensor = &tensors[t];
            let Some(check) = checks.get(&tensor.name) else {
                tolerances.push(Tolerance::default_for(tensor.dtype));
                continue;
            };
            let CheckFile { rtol, atol } = check.value;
            for (field, value) in [("rtol", rtol), ("atol", atol)] {
                if !(value.is_finite() && value >= 0.0) {
                    return Err(self.invalid(
                        at(check),
                        format!(
                            "checks: {}.{field} is {value}; give a finite number >= 0",
                            tensor.name
                        ),
                    ));
                }
            }
            let float = matches!(tensor.dtype, Dtype::CF32 | Dtype::F32);
            tolerances.push(match (float, rtol == 0.0 && atol == 0.0) {
                (_, true) => Tolerance::Exact,
                (true, false) => Tolerance::Close { rtol, atol },
                (false, false) => {
                    return Err(self.invalid(
                        at(check),
                        format!(
                            "checks: {} is {}, compared exactly; a tolerance applies to f32 and cf32 sinks only",
                            tensor.name,
                            tensor.dtype.name().unwrap_or("?")
                        ),
                    ));
                }
            });
        }
        Ok(tolerances)
    }

    fn bind_dims(
        &self,
        mut dims: BTreeMap<String, u64>,
    ) -> Result<BTreeMap<String, u64>, GraphError> {
        for (name, value) in &self.overrides.dims {
            match dims.get_mut(name) {
                Some(slot) => *slot = *value,
                None => {
                    let known: Vec<&str> = dims.keys().map(String::as_str).collect();
                    return Err(self.invalid(
                        None,
                        format!(
                            "the graph has no dimension {name} to set (it has: {})",
                            known.join(", ")
                        ),
                    ));
                }
            }
        }
        if let Some((name, _)) = dims.iter().find(|(_, v)| **v == 0) {
            return Err(self.invalid(None, format!("dimension {name} is zero")));
        }
        Ok(dims)
    }

    fn bind_tensor(
        &self,
        t: &Spanned<TensorFile>,
        dims: &BTreeMap<String, u64>,
    ) -> Result<TensorSpec, GraphError> {
        let spec = &t.value;
        let dtype = Dtype::from_name(&spec.dtype.value).ok_or_else(|| {
            let known: Vec<&str> = Dtype::ALL.iter().map(|(_, n)| *n).collect();
            self.invalid(
                at(&spec.dtype),
                format!(
                    "tensor {}: unknown dtype {} (known: {})",
                    spec.name,
                    spec.dtype.value,
                    known.join(", ")
                ),
            )
        })?;
        if spec.shape.is_empty() || spec.shape.len() > MAX_RANK {
            return Err(self.invalid(
                at(t),
                format!(
                    "tensor {}: shape must have 1 to {MAX_RANK} dimensions",
                    spec.name
                ),
            ));
        }
        let mut shape = Vec::with_capacity(spec.shape.len());
        for d in &spec.shape {
            let value = match d.value.parse::<u64>() {
                Ok(v) => v,
                Err(_) => *dims.get(&d.value).ok_or_else(|| {
                    self.invalid(
                        at(d),
                        format!(
                            "tensor {}: {} is neither a number nor a declared dimension",
                            spec.name, d.value
                        ),
                    )
                })?,
            };
            if value == 0 {
                return Err(
                    self.invalid(at(d), format!("tensor {}: a dimension is zero", spec.name))
                );
            }
            shape.push(value);
        }
        let bytes = dtype
            .bytes_for(&shape)
            .ok_or_else(|| self.invalid(at(t), format!("tensor {}: size overflows", spec.name)))?;
        Ok(TensorSpec {
            name: spec.name.clone(),
            dtype,
            shape,
            bytes,
            producer: Producer::Source,
        })
    }

    fn bind_split(
        &self,
        split: &Spanned<SplitFile>,
        stage: &str,
        input: &TensorSpec,
    ) -> Result<Split, GraphError> {
        let SplitFile { axis, tile } = split.value;
        let Some(&extent) = input.shape.get(axis) else {
            return Err(self.invalid(
                at(split),
                format!(
                    "stage {stage}: split axis {axis} is out of range for {} of rank {}",
                    input.name,
                    input.shape.len()
                ),
            ));
        };
        if tile == 0 || extent % tile != 0 {
            return Err(self.invalid(
                at(split),
                format!(
                    "stage {stage}: tiles of {tile} must divide axis {axis} of {} ({extent}); \
                     this shape does not match the graph",
                    input.name
                ),
            ));
        }
        Ok(Split { axis, tile })
    }

    /// A parameter written `$SYMBOL` takes the dimension's value, so kernels that need sizes
    /// their tensors do not carry (clustering's map size) get them from the one place they are
    /// defined.
    fn bind_params(
        &self,
        stage: &str,
        params: &BTreeMap<String, Spanned<String>>,
        dims: &BTreeMap<String, u64>,
    ) -> Result<Vec<(String, String)>, GraphError> {
        let mut bound = BTreeMap::new();
        for (name, value) in params {
            let text = match value.value.strip_prefix('$') {
                Some(symbol) => dims
                    .get(symbol)
                    .ok_or_else(|| {
                        self.invalid(
                            at(value),
                            format!(
                                "stage {stage}: parameter {name} names unknown dimension {symbol}"
                            ),
                        )
                    })?
                    .to_string(),
                None => value.value.clone(),
            };
            bound.insert(name.clone(), text);
        }
        for (s, name, value) in &self.overrides.params {
            if s == stage {
                bound.insert(name.clone(), value.clone());
            }
        }
        Ok(bound.into_iter().collect())
    }
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

/// The dimension each axis of the source tensor `source` names in the file (`None` for a
/// number).
fn source_dims(tensors: &[Spanned<TensorFile>], source: &str) -> Vec<Option<String>> {
    tensors
        .iter()
        .find(|t| t.value.name == source)
        .map(|t| {
            t.value
                .shape
                .iter()
                .map(|d| d.value.parse::<u64>().is_err().then(|| d.value.clone()))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "name: g
dims: {N: 64, M: 16}
source: {tensor: iq, packet_axis: 0}
tensors:
  - {name: iq, dtype: ci16, shape: [M, N]}
  - {name: map, dtype: cf32, shape: [N, M]}
  - {name: out, dtype: detections, shape: [32]}
stages:
  - name: first
    kernel: k.first
    inputs: [iq]
    outputs: [map]
    split: {axis: 0, tile: 4}
  - name: second
    kernel: k.second
    inputs: [map]
    outputs: [out]
    params: {rows: $N, alpha: 1.5e-3}
sinks: [out]
";

    fn parse(text: &str, overrides: &Overrides) -> Result<Graph, GraphError> {
        Graph::parse(text, Path::new("graphs/test.yaml"), overrides)
    }

    fn error(text: &str) -> String {
        parse(text, &Overrides::default()).unwrap_err().to_string()
    }

    #[test]
    fn binds_symbols_sizes_producers_and_params() {
        let g = parse(GOOD, &Overrides::default()).unwrap();
        assert_eq!(g.tensors[0].shape, [16, 64]);
        assert_eq!(g.tensors[0].bytes, 16 * 64 * 4);
        assert_eq!(g.tensors[2].bytes, 16 + 32 * 12);
        assert_eq!(g.tensors[1].producer, Producer::Stage(StageId(0)));
        assert_eq!(g.tensors[0].producer, Producer::Source);
        assert_eq!(g.stages[0].split, Some(Split { axis: 0, tile: 4 }));
        assert_eq!(
            g.stages[1].params,
            [
                ("alpha".to_string(), "1.5e-3".to_string()),
                ("rows".into(), "64".into())
            ]
        );
        assert_eq!(g.predecessors(StageId(1)), [StageId(0)]);
        assert_eq!(g.source.packets(&g), 16);
        assert_eq!(g.source.packet_bytes(&g), 64 * 4);
        assert_eq!(g.stages[1].line, 14);
    }

    #[test]
    fn overrides_replace_dims_and_params() {
        let o = Overrides {
            dims: vec![("N".into(), 128), ("M".into(), 32)],
            params: vec![("second".into(), "alpha".into(), "2".into())],
        };
        let g = parse(GOOD, &o).unwrap();
        assert_eq!(g.tensors[0].shape, [32, 128]);
        assert_eq!(
            g.stages[1].params[0],
            ("alpha".to_string(), "2".to_string())
        );
        assert_eq!(
            g.stages[1].params[1],
            ("rows".to_string(), "128".to_string()),
            "symbols bind after overrides"
        );

        let e = parse(
            GOOD,
            &Overrides {
                dims: vec![("K".into(), 1)],
                ..Default::default()
            },
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("no dimension K") && e.to_string().contains("M, N"),
            "{e}"
        );
        let e = parse(
            GOOD,
            &Overrides {
                params: vec![("third".into(), "x".into(), "1".into())],
                ..Default::default()
            },
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("--set third.x") && e.to_string().contains("no stage third"),
            "{e}"
        );
    }

    #[test]
    fn a_cpi_the_tiles_do_not_divide_is_refused() {
        let o = Overrides {
            dims: vec![("M".into(), 18)],
            ..Default::default()
        };
        let e = parse(GOOD, &o).unwrap_err().to_string();
        assert!(
            e.contains("graphs/test.yaml:13:")
                && e.contains("tiles of 4 must divide")
                && e.contains("(18)"),
            "{e}"
        );
    }

    #[test]
    fn unknown_fields_are_named_with_line_and_column() {
        let e = error(&GOOD.replace("    params: {", "    parms: {"));
        assert!(
            e.contains("graphs/test.yaml") && e.contains("line 18") && e.contains("parms"),
            "{e}"
        );
        let e = error(&GOOD.replace("name: g\n", "name: g\ncolour: blue\n"));
        assert!(e.contains("line 2") && e.contains("colour"), "{e}");
    }

    #[test]
    fn malformed_yaml_is_reported_with_its_place() {
        let e = error("name: g\nstages: [\n");
        assert!(e.contains("graphs/test.yaml") && e.contains("line"), "{e}");
    }

    #[test]
    fn structural_errors_name_their_place() {
        let e = error(&GOOD.replace("inputs: [map]", "inputs: [mapp]"));
        assert!(
            e.contains("graphs/test.yaml:16:14") && e.contains("unknown tensor mapp"),
            "{e}"
        );
        let e = error(&GOOD.replace("dtype: cf32", "dtype: c64"));
        assert!(
            e.contains("graphs/test.yaml:6:")
                && e.contains("unknown dtype c64")
                && e.contains("ci16"),
            "{e}"
        );
        let e = error(&GOOD.replace("shape: [N, M]", "shape: [N, K]"));
        assert!(
            e.contains("K is neither a number nor a declared dimension"),
            "{e}"
        );
        let e = error(&GOOD.replace("name: second", "name: first"));
        assert!(e.contains("stage first is declared twice"), "{e}");
        let e = error(&GOOD.replace("outputs: [out]", "outputs: [map]"));
        assert!(
            e.contains("tensor map has a second writer: stage second"),
            "{e}"
        );
        let e = error(
            &GOOD
                .replace("sinks: [out]", "sinks: [iq]")
                .replace("outputs: [out]", "outputs: [map2]"),
        );
        assert!(e.contains("unknown tensor map2"), "{e}");
        let e = error(&GOOD.replace("split: {axis: 0, tile: 4}", "split: {axis: 2, tile: 4}"));
        assert!(e.contains("split axis 2 is out of range"), "{e}");
        let e = error(&GOOD.replace("packet_axis: 0", "packet_axis: 1"));
        assert!(e.contains("packet_axis must be 0"), "{e}");
        let e = error(&GOOD.replace("rows: $N", "rows: $Q"));
        assert!(e.contains("unknown dimension Q"), "{e}");
    }

    #[test]
    fn stages_must_follow_their_producers() {
        let swapped = "name: g
dims: {N: 8}
source: {tensor: a, packet_axis: 0}
tensors:
  - {name: a, dtype: f32, shape: [N]}
  - {name: b, dtype: f32, shape: [N]}
  - {name: c, dtype: f32, shape: [N]}
stages:
  - {name: late, kernel: k, inputs: [b], outputs: [c]}
  - {name: early, kernel: k, inputs: [a], outputs: [b]}
sinks: [c]
";
        let e = error(swapped);
        assert!(e.contains("stage late reads tensor b before"), "{e}");
        let unwritten = swapped
            .replace(
                "  - {name: late, kernel: k, inputs: [b], outputs: [c]}\n",
                "",
            )
            .replace("sinks: [c]", "sinks: [b]");
        let e = error(&unwritten);
        assert!(e.contains("tensor c is never written"), "{e}");
    }

    #[test]
    fn a_frame_shape_binds_the_dimensions_the_source_names_innermost_first() {
        let text = "name: g
dims: {C: 8, S: 4}
source: {tensor: x, packet_axis: 0}
tensors:
  - {name: x, dtype: f32, shape: [S, 2, C]}
  - {name: y, dtype: f32, shape: [C]}
stages:
  - {name: s, kernel: k, inputs: [x], outputs: [y]}
sinks: [y]
";
        let graph = parse(text, &Overrides::default()).unwrap();
        assert_eq!(
            graph.source_dims,
            [Some("S".to_string()), None, Some("C".to_string())]
        );
        assert_eq!(
            graph.bind_source_shape(&[64, 2, 12]).unwrap(),
            [("S".to_string(), 12), ("C".to_string(), 64)]
        );
        let e = graph.bind_source_shape(&[64, 3, 12]).unwrap_err();
        assert_eq!(e, "axis 1 of the source x is 2 in the graph file, not 3");
        let e = graph.bind_source_shape(&[64, 12]).unwrap_err();
        assert_eq!(
            e,
            "a frame shape of 2 dimensions for the source x, which has 3 ([S, 2, C])"
        );
        let square = parse(
            &text.replace("[S, 2, C]", "[C, 2, C]"),
            &Overrides::default(),
        )
        .unwrap();
        assert_eq!(
            square.bind_source_shape(&[5, 2, 6]).unwrap_err(),
            "the frame shape gives dimension C both 6 and 5"
        );
        assert_eq!(
            square.bind_source_shape(&[5, 2, 5]).unwrap(),
            [("C".to_string(), 5)]
        );
    }
}

//! The graph file as written (serde, every field checked for unknown names) and its binding
//! into a [`Graph`]: dimensions bound, tensors sized, stages ordered and checked, one check at
//! a time, each error naming the file's line and column.

use std::collections::BTreeMap;
use std::path::Path;

use kplace_abi::{Dtype, MAX_RANK};
use serde::Deserialize;
use serde_saphyr::Spanned;

use super::expr::{self, Expr};
use super::params::{ParamFile, ParamText};
use super::*;
use crate::os::files::{EXCERPT_CHARS, excerpt};

#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct GraphFile {
    name: String,
    /// Each a number, or an expression of others ([`expr`]).
    #[serde(default)]
    dims: BTreeMap<String, Spanned<String>>,
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
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckFile {
    #[serde(default)]
    rtol: f64,
    #[serde(default)]
    atol: f64,
}

#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct SourceFile {
    tensor: Spanned<String>,
    packet_axis: usize,
    #[serde(default)]
    channel_axis: Option<usize>,
}

#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct TensorFile {
    name: String,
    dtype: Spanned<String>,
    shape: Vec<Spanned<String>>,
    /// A constant tensor's contents: an `.npy` file, relative to the graph file.
    #[serde(default)]
    npy: Option<Spanned<String>>,
}

#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct StageFile {
    name: String,
    kernel: String,
    inputs: Vec<Spanned<String>>,
    outputs: Vec<Spanned<String>>,
    #[serde(default)]
    params: BTreeMap<String, Spanned<ParamFile>>,
    split: Option<Spanned<SplitFile>>,
}

#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct SplitFile {
    axis: usize,
    tile: u64,
}

fn at<T>(s: &Spanned<T>) -> Option<(u64, u64)> {
    Some((s.referenced.line(), s.referenced.column()))
}

/// Turns the file as written into a [`Graph`], one check at a time.
pub(super) struct Binder<'a> {
    pub(super) path: &'a Path,
    /// The file's text, for the spelling of plain parameter values.
    pub(super) source: &'a str,
    pub(super) overrides: &'a Overrides,
}

impl Binder<'_> {
    fn invalid(&self, at: Option<(u64, u64)>, message: impl Into<String>) -> GraphError {
        GraphError::Invalid {
            path: self.path.to_path_buf(),
            at,
            message: message.into(),
        }
    }

    pub(super) fn bind(&self, file: GraphFile) -> Result<Graph, GraphError> {
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

        let constants = self.bind_constants(&file.tensors, &mut tensors)?;
        let source_tensor = find(&file.source.tensor, &tensors)?;
        self.check_source(&file.source, &tensors[source_tensor.0])?;
        tensors[source_tensor.0].producer = Producer::Source;
        let mut produced: Vec<bool> = tensors
            .iter()
            .map(|t| t.producer == Producer::Constant)
            .collect();
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
                    let why = match tensors[id.0].producer {
                        Producer::Constant => "is a constant (its npy file's contents)",
                        _ => "has a second writer:",
                    };
                    return Err(self.invalid(
                        at(name),
                        format!("tensor {} {why} stage {} writes it", name.value, spec.name),
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
        let sinks = file
            .sinks
            .iter()
            .map(|name| self.bind_sink(find(name, &tensors)?, name, &tensors))
            .collect::<Result<Vec<_>, _>>()?;
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
                channel_axis: file.source.channel_axis,
            },
            source_dims,
            sinks,
            tolerances,
            workload: file.workload,
            constants,
        })
    }

    /// Sink `id` (written `name`), which must be a frame's result, not a constant.
    fn bind_sink(
        &self,
        id: TensorId,
        name: &Spanned<String>,
        tensors: &[TensorSpec],
    ) -> Result<TensorId, GraphError> {
        match tensors[id.0].producer {
            Producer::Constant => Err(self.invalid(
                at(name),
                format!(
                    "sink {} is a constant: a sink is a frame's result",
                    name.value
                ),
            )),
            _ => Ok(id),
        }
    }

    /// Reads every constant tensor's `.npy` file (relative to the graph file), each checked
    /// against its tensor's element type and shape and bounded by [`MAX_CONSTANT_BYTES`]
    /// before it is read, and marks those tensors [`Producer::Constant`].
    fn bind_constants(
        &self,
        files: &[Spanned<TensorFile>],
        tensors: &mut [TensorSpec],
    ) -> Result<Vec<Constant>, GraphError> {
        let mut constants = Vec::new();
        for (index, (file, tensor)) in files.iter().zip(tensors.iter_mut()).enumerate() {
            let Some(npy) = &file.value.npy else { continue };
            let name = &tensor.name;
            if tensor.dtype.element().is_none() {
                return Err(self.invalid(
                    at(npy),
                    format!("tensor {name}: a constant tensor has a numeric element type"),
                ));
            }
            if tensor.bytes > MAX_CONSTANT_BYTES {
                return Err(self.invalid(
                    at(npy),
                    format!(
                        "tensor {name}: a constant holds at most {} MiB; this one is {} bytes",
                        MAX_CONSTANT_BYTES >> 20,
                        tensor.bytes
                    ),
                ));
            }
            let dir = self.path.parent().unwrap_or(Path::new(""));
            let path = dir.join(&npy.value);
            let data =
                crate::model::npy::read_array(&path, tensor.dtype, &tensor.shape, tensor.bytes)
                    .map_err(|why| {
                        self.invalid(
                            at(npy),
                            format!(
                                "tensor {name} ({} {:?}): {}: {why}",
                                tensor.dtype.name().unwrap_or("?"),
                                tensor.shape,
                                path.display()
                            ),
                        )
                    })?;
            tensor.producer = Producer::Constant;
            constants.push(Constant {
                tensor: TensorId(index),
                path,
                data: data.into(),
            });
        }
        Ok(constants)
    }

    /// Checks the source's axes against its tensor: packets along axis 0, and a channel axis
    /// (if any) within the tensor's rank.
    fn check_source(&self, source: &SourceFile, tensor: &TensorSpec) -> Result<(), GraphError> {
        if tensor.producer == Producer::Constant {
            return Err(self.invalid(
                at(&source.tensor),
                format!(
                    "source tensor {} is a constant: packets fill the source",
                    tensor.name
                ),
            ));
        }
        if source.packet_axis != 0 {
            return Err(self.invalid(
                at(&source.tensor),
                format!(
                    "source packet_axis must be 0: a packet fills one index of the outermost \
                     axis of {}, contiguously (got {})",
                    source.tensor.value, source.packet_axis
                ),
            ));
        }
        if let Some(axis) = source.channel_axis {
            let rank = tensor.shape.len();
            if axis >= rank {
                return Err(self.invalid(
                    at(&source.tensor),
                    format!(
                        "source channel_axis {axis} is out of range for {} of rank {rank}",
                        source.tensor.value
                    ),
                ));
            }
        }
        Ok(())
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
            let float = tensor.dtype.element().is_some_and(|e| e.scalar.is_float());
            tolerances.push(match (float, rtol == 0.0 && atol == 0.0) {
                (_, true) => Tolerance::Exact,
                (true, false) => Tolerance::Close { rtol, atol },
                (false, false) => {
                    return Err(self.invalid(
                        at(check),
                        format!(
                            "checks: {} is {}, compared exactly; a tolerance applies to floating-point sinks only",
                            tensor.name,
                            tensor.dtype.name().unwrap_or("?")
                        ),
                    ));
                }
            });
        }
        Ok(tolerances)
    }

    /// Every dimension's value: the file's numbers, with the overrides applied, then the
    /// dimensions the file derives from them.
    fn bind_dims(
        &self,
        written: BTreeMap<String, Spanned<String>>,
    ) -> Result<BTreeMap<String, u64>, GraphError> {
        let mut given = BTreeMap::new();
        let mut derived = BTreeMap::new();
        for (name, value) in &written {
            let text = value.value.trim();
            if let Ok(n) = text.parse::<u64>() {
                given.insert(name.clone(), n);
                continue;
            }
            let parsed = Expr::parse(text).map_err(|why| {
                self.invalid(
                    at(value),
                    format!("dimension {name}: {} is neither a number nor an expression of other dimensions: {why}", excerpt(text)),
                )
            })?;
            derived.insert(name.clone(), parsed);
        }
        for (name, value) in &self.overrides.dims {
            if let Some(slot) = given.get_mut(name) {
                *slot = *value;
                continue;
            }
            if let Some(written) = written.get(name).filter(|_| derived.contains_key(name)) {
                return Err(self.invalid(
                    at(written),
                    format!(
                        "dimension {name} is derived ({name}: {}): set the dimensions it is derived from",
                        written.value.trim()
                    ),
                ));
            }
            let known: Vec<&str> = written.keys().map(String::as_str).collect();
            return Err(self.invalid(
                None,
                format!(
                    "the graph has no dimension {name} to set (it has: {})",
                    known.join(", ")
                ),
            ));
        }
        let dims = expr::derive(given, &derived).map_err(|(name, why)| {
            let text = written.get(&name).map_or("", |v| v.value.trim());
            self.invalid(
                written.get(&name).and_then(at),
                format!("dimension {name} ({text}): {why}"),
            )
        })?;
        if let Some((name, _)) = dims.iter().find(|(_, v)| **v == 0) {
            return Err(self.invalid(
                written.get(name).and_then(at),
                format!("dimension {name} is zero"),
            ));
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
            let text = d.value.trim();
            let value = match (text.parse::<u64>(), dims.get(text)) {
                (Ok(v), _) => v,
                (_, Some(&v)) => v,
                _ => Expr::parse(text)
                    .and_then(|e| e.eval(dims))
                    .map_err(|why| {
                        self.invalid(
                            at(d),
                            format!("tensor {}: axis {}: {why}", spec.name, shown(text)),
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
        if input.producer == Producer::Constant {
            return Err(self.invalid(
                at(split),
                format!(
                    "stage {stage}: tiles are along its first input, and {} is a constant; \
                     list the frame's tensor first",
                    input.name
                ),
            ));
        }
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
        params: &BTreeMap<String, Spanned<ParamFile>>,
        dims: &BTreeMap<String, u64>,
    ) -> Result<Vec<(String, String)>, GraphError> {
        let texts = ParamText {
            source: self.source,
            dims,
            dir: self.path.parent().unwrap_or(Path::new(".")),
        };
        let mut bound = BTreeMap::new();
        for (name, value) in params {
            let text = texts
                .text(name, value)
                .map_err(|e| self.invalid(Some(e.at), format!("stage {stage}: {}", e.message)))?;
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

/// `text` as an error shows it: as written when it is short, else quoted and cut short.
fn shown(text: &str) -> String {
    if text.chars().count() <= EXCERPT_CHARS {
        text.to_string()
    } else {
        excerpt(text)
    }
}

/// The dimension each axis of the source tensor `source` names in the file (`None` for a
/// number or an expression).
fn source_dims(tensors: &[Spanned<TensorFile>], source: &str) -> Vec<Option<String>> {
    tensors
        .iter()
        .find(|t| t.value.name == source)
        .map(|t| {
            t.value
                .shape
                .iter()
                .map(|d| {
                    let text = d.value.trim();
                    let name = !text.is_empty()
                        && text.parse::<u64>().is_err()
                        && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                    name.then(|| text.to_string())
                })
                .collect()
        })
        .unwrap_or_default()
}

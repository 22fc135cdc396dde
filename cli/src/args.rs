//! Options shared by several subcommands: the graph, its shape and placement.

use std::path::{Path, PathBuf};

use anyhow::bail;
use clap::Args;
use kplace::model::files::GraphFiles;
use kplace::model::graph::{Graph, Overrides};
pub use kplace::model::shape::FrameShape;

/// Which graph, on which placement, with which overrides.
#[derive(Debug, Args)]
pub struct GraphArgs {
    /// The graph file.
    #[arg(long, default_value = "workloads/radar/graph.yaml")]
    pub graph: PathBuf,
    #[command(flatten)]
    pub shape: ShapeArgs,
    /// The placement file.
    #[arg(long, default_value = "workloads/radar/placements/all-cpu.yaml")]
    pub placement: PathBuf,
    /// Frame slots in flight (overrides the placement's runtime.slots).
    #[arg(long)]
    pub slots: Option<usize>,
    /// The stream's rate in frames per second, which sizes a placement's `slots: auto`
    /// (enough slots for its buffer of stream) [default: the workload's real-time rate].
    #[arg(long, value_name = "FRAMES_PER_S")]
    pub stream_rate: Option<f64>,
    /// CPU worker threads (overrides the placement's runtime.workers).
    #[arg(long)]
    pub workers: Option<usize>,
}

impl GraphArgs {
    /// The files and overrides these options name (the shape bound to the graph's
    /// dimensions).
    pub fn files(&self) -> anyhow::Result<GraphFiles> {
        Ok(GraphFiles {
            graph: self.graph.clone(),
            placement: self.placement.clone(),
            dims: self.shape.dims(&self.graph)?,
            sets: self.shape.params(),
            slots: self.slots,
            stream_rate: self.stream_rate,
            workers: self.workers,
        })
    }
}

/// The dimensions and parameters a run binds in its graph.
#[derive(Debug, Args)]
pub struct ShapeArgs {
    /// The source frame's shape, innermost axis first: `1024x128` binds a source of shape
    /// `[M, N]` to N = 1024, M = 128 [default: the graph file's dimensions, or a recording's
    /// metadata].
    #[arg(long, visible_alias = "cpi", value_name = "AxB[xC..]")]
    pub shape: Option<FrameShape>,
    /// Set a dimension, DIM=VALUE, or a stage parameter, STAGE.PARAM=VALUE (repeatable).
    #[arg(long = "set", value_name = "DIM=VALUE|STAGE.PARAM=VALUE", value_parser = parse_set)]
    pub sets: Vec<SetArg>,
}

/// What one `--set` sets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SetArg {
    /// A dimension and its value.
    Dim(String, u64),
    /// A stage's parameter and its value.
    Param(String, String, String),
}

fn parse_set(text: &str) -> Result<SetArg, String> {
    const EXPECTED: &str = "expected DIM=VALUE or STAGE.PARAM=VALUE";
    let (key, value) = text.split_once('=').ok_or(EXPECTED)?;
    match key.split_once('.') {
        Some((stage, param)) if !stage.is_empty() && !param.is_empty() => Ok(SetArg::Param(
            stage.to_string(),
            param.to_string(),
            value.to_string(),
        )),
        Some(_) => Err(EXPECTED.into()),
        None if key.is_empty() => Err(EXPECTED.into()),
        None => match value.parse::<u64>() {
            Ok(n) if n > 0 => Ok(SetArg::Dim(key.to_string(), n)),
            _ => Err(format!(
                "dimension {key}: {value:?} is not a positive integer"
            )),
        },
    }
}

impl ShapeArgs {
    /// The dimensions these options bind in the graph at `graph`: the shape's (read against
    /// the graph's source), then every `--set DIM=VALUE`; a dimension given two values is
    /// refused.
    pub fn dims(&self, graph: &Path) -> anyhow::Result<Vec<(String, u64)>> {
        let set: Vec<(String, u64)> = self
            .sets
            .iter()
            .filter_map(|s| match s {
                SetArg::Dim(name, value) => Some((name.clone(), *value)),
                SetArg::Param(..) => None,
            })
            .collect();
        let Some(shape) = &self.shape else {
            return Ok(set);
        };
        let probe = Graph::load(
            graph,
            &Overrides {
                dims: set.clone(),
                params: Vec::new(),
            },
        )?;
        let mut dims = probe
            .bind_source_shape(shape.extents())
            .map_err(|e| anyhow::anyhow!("--shape {shape}: graph {}: {e}", graph.display()))?;
        for (name, value) in set {
            match dims.iter().find(|(n, _)| *n == name) {
                Some((_, bound)) if *bound != value => bail!(
                    "--shape {shape} makes {name} {bound}, but --set {name}={value}: give one"
                ),
                Some(_) => {}
                None => dims.push((name, value)),
            }
        }
        Ok(dims)
    }

    /// The stage parameters these options set.
    pub fn params(&self) -> Vec<(String, String, String)> {
        self.sets
            .iter()
            .filter_map(|s| match s {
                SetArg::Param(stage, param, value) => {
                    Some((stage.clone(), param.clone(), value.clone()))
                }
                SetArg::Dim(..) => None,
            })
            .collect()
    }
}

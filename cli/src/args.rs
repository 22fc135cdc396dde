//! Options shared by several subcommands: the graph, its shape and placement.

use std::path::{Path, PathBuf};

use clap::Args;
use kplace::model::files::{self, GraphFiles, Setting};
use kplace::model::graph::GraphSource;
use kplace::model::locate;
use kplace::model::placement::Placement;
pub use kplace::model::shape::FrameShape;

/// Which graph, on which placement, with which overrides.
#[derive(Debug, Args)]
pub struct GraphArgs {
    /// The graph: a file, or the name of one kplace ships (`radar`, `spectrogram`,
    /// `beamformer`, `beamformer/filtered`, ...).
    #[arg(long, default_value = "radar", value_name = "FILE|NAME")]
    pub graph: PathBuf,
    #[command(flatten)]
    pub shape: ShapeArgs,
    /// The placement: a file, or the name of one beside the graph, in its `placements/` or its
    /// own folder (`all-cpu`).
    #[arg(long, default_value = "all-cpu", value_name = "FILE|NAME")]
    pub placement: PathBuf,
    /// Frame slots in flight (overrides the placement's runtime.slots).
    #[arg(long)]
    pub slots: Option<usize>,
    /// The stream's rate in frames per second, which sizes a placement's `slots: auto`
    /// (enough slots for its buffer of stream): from 1/86400 (a frame a day) to 1e9 (a frame a
    /// nanosecond) [default: the workload's real-time rate].
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
        let path = graph_file(&self.graph)?;
        let graph = GraphSource::read(&path)?;
        let placement = Placement::load(&placement_file(&self.placement, &path)?)?;
        Ok(GraphFiles {
            dims: self.shape.dims(&graph)?,
            sets: self.shape.params(),
            slots: self.slots,
            stream_rate: self.stream_rate,
            workers: self.workers,
            ..GraphFiles::new(graph, placement)
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
    #[arg(long = "set", value_name = "DIM=VALUE|STAGE.PARAM=VALUE")]
    pub sets: Vec<Setting>,
}

impl ShapeArgs {
    /// The dimensions these options bind in `graph`.
    pub fn dims(&self, graph: &GraphSource) -> anyhow::Result<Vec<(String, u64)>> {
        Ok(files::bind_dims(graph, self.shape.as_ref(), &self.sets)?)
    }

    /// The graph file `written` names, read, with the dimensions and parameters these options
    /// bind, and no placement: for a command that plans nothing.
    pub fn graph_only(&self, written: &Path) -> anyhow::Result<GraphFiles> {
        let graph = GraphSource::read(&graph_file(written)?)?;
        Ok(GraphFiles {
            dims: self.dims(&graph)?,
            sets: self.params(),
            ..GraphFiles::of_graph(graph)
        })
    }

    /// The stage parameters these options set.
    pub fn params(&self) -> Vec<(String, String, String)> {
        files::params(&self.sets)
    }
}

/// The graph file `written` names: a path, or the name of a graph kplace ships, found beside
/// its executable ([`locate`]).
pub fn graph_file(written: &Path) -> anyhow::Result<PathBuf> {
    Ok(locate::graph(written)?)
}

/// The placement file `written` names: a path, or a name in `graph`'s `placements/`.
pub fn placement_file(written: &Path, graph: &Path) -> anyhow::Result<PathBuf> {
    Ok(locate::placement(written, graph)?)
}

/// The options `A` parses from `argv` (after the program's name), every other option at its
/// default: for a command that runs another's machinery without its command line, with the
/// defaults that command line would have.
pub fn with_defaults<A: Args + clap::FromArgMatches>(
    argv: impl IntoIterator<Item = String>,
) -> anyhow::Result<A> {
    let argv = std::iter::once("kplace".to_string()).chain(argv);
    let matches = A::augment_args(clap::Command::new("kplace")).try_get_matches_from(argv)?;
    Ok(A::from_arg_matches(&matches)?)
}

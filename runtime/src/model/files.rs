//! The graph and placement files of a run and what the command line overrides in them: one
//! place where both are loaded the same way for every workload.
//!
//! Guarantees: an override's value is checked before it is applied, and an error names the
//! option; `slots: auto` is sized for the stream's frame period before any override of the
//! slot count replaces it.

use std::path::PathBuf;
use std::time::Duration;

use super::graph::{Graph, GraphError, Overrides};
use super::placement::{Placement, PlacementError};

/// The graph and placement files of a run, and what overrides them.
#[derive(Clone, Debug, Default)]
pub struct GraphFiles {
    /// The graph file.
    pub graph: PathBuf,
    /// The placement file.
    pub placement: PathBuf,
    /// Dimension bindings (`--shape`, `--set DIM=VALUE`), applied before a workload's own.
    pub dims: Vec<(String, u64)>,
    /// Stage parameter overrides: (stage, parameter, value).
    pub sets: Vec<(String, String, String)>,
    /// Frame slots in flight, instead of the placement's.
    pub slots: Option<usize>,
    /// The stream's rate in frames per second, which sizes a placement's `slots: auto`;
    /// `None`: the workload's real-time rate.
    pub stream_rate: Option<f64>,
    /// CPU worker threads, instead of the placement's.
    pub workers: Option<usize>,
}

/// Why the files cannot be loaded as asked.
#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    /// The graph file is unreadable or invalid.
    #[error(transparent)]
    Graph(#[from] GraphError),
    /// The placement file is unreadable or invalid.
    #[error(transparent)]
    Placement(#[from] PlacementError),
    /// An override's value cannot work: the option and why.
    #[error("{option} {why}")]
    Option {
        /// The option, e.g. `--stream-rate`.
        option: &'static str,
        /// What is wrong with its value.
        why: String,
    },
}

impl GraphFiles {
    /// The graph with this run's dimension bindings and no parameter overrides: its shape,
    /// which decides its workload and that workload's timing before anything is prepared.
    pub fn shaped_graph(&self) -> Result<Graph, GraphError> {
        Graph::load(
            &self.graph,
            &Overrides {
                dims: self.dims.clone(),
                params: Vec::new(),
            },
        )
    }

    /// Loads the graph with `overrides` (then this run's parameter overrides), and the
    /// placement with its slots sized for the stream (at [`GraphFiles::stream_rate`], or one
    /// frame per `real_time_period`) and the executor overrides applied.
    pub fn load_with(
        &self,
        mut overrides: Overrides,
        real_time_period: Duration,
    ) -> Result<(Graph, Placement), FilesError> {
        overrides.dims.splice(0..0, self.dims.iter().cloned());
        overrides.params.splice(0..0, self.sets.iter().cloned());
        let graph = Graph::load(&self.graph, &overrides)?;
        let mut placement = Placement::load(&self.placement)?;
        let period = match self.stream_rate {
            Some(rate) if rate.is_finite() && rate > 0.0 => Duration::from_secs_f64(1.0 / rate),
            Some(rate) => {
                return Err(FilesError::Option {
                    option: "--stream-rate",
                    why: format!("must be a positive number of frames per second, not {rate}"),
                });
            }
            None => real_time_period,
        };
        placement.runtime.size_slots(period);
        let at_least_one = |option| FilesError::Option {
            option,
            why: "must be at least 1".into(),
        };
        if let Some(slots) = self.slots {
            if slots == 0 {
                return Err(at_least_one("--slots"));
            }
            placement.runtime.slots = slots;
            placement.runtime.auto_slots = None;
        }
        if let Some(workers) = self.workers {
            if workers == 0 {
                return Err(at_least_one("--workers"));
            }
            let pins = &mut placement.runtime.pin_cores;
            // Pinned cores are kept only while there is one for every worker.
            pins.truncate(if pins.len() >= workers { pins.len() } else { 0 });
            placement.runtime.workers = workers;
        }
        Ok((graph, placement))
    }
}

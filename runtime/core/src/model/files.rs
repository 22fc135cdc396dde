//! The graph and placement files of a run and what the command line overrides in them: one
//! place where both are loaded the same way for every workload.
//!
//! Guarantees: each file is read and parsed once, when [`GraphFiles::read`] makes the value a
//! run passes on; binding a graph, sizing slots and applying overrides work on the parsed
//! values, as often as the run needs, and never touch the file again; an override's value is checked before it is applied, and an error names the
//! option (`--stream-rate` by [`super::rate`]'s range); `slots: auto` is sized for the stream's frame period before any override of the
//! slot count replaces it.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use super::graph::{Graph, GraphError, GraphSource, Overrides};
use super::placement::{Placement, PlacementError};
use super::rate::{self, RateError};
use super::shape::FrameShape;

/// One binding the command line makes in a graph (`--set`): a dimension, `DIM=VALUE`, or a
/// stage's parameter, `STAGE.PARAM=VALUE`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Setting {
    /// A dimension and its value.
    Dim(String, u64),
    /// A stage's parameter and its value.
    Param(String, String, String),
}

/// A `--set` binding that is not one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SettingError {
    /// Neither `DIM=VALUE` nor `STAGE.PARAM=VALUE`.
    #[error("expected DIM=VALUE or STAGE.PARAM=VALUE")]
    Form,
    /// A dimension's value that is not a positive integer.
    #[error("dimension {dim}: {value:?} is not a positive integer")]
    Dim {
        /// The dimension.
        dim: String,
        /// The value given.
        value: String,
    },
}

impl FromStr for Setting {
    type Err = SettingError;

    fn from_str(text: &str) -> Result<Setting, SettingError> {
        let (key, value) = text.split_once('=').ok_or(SettingError::Form)?;
        match key.split_once('.') {
            Some((stage, param)) if !stage.is_empty() && !param.is_empty() => Ok(Setting::Param(
                stage.to_string(),
                param.to_string(),
                value.to_string(),
            )),
            Some(_) => Err(SettingError::Form),
            None if key.is_empty() => Err(SettingError::Form),
            None => match value.parse::<u64>() {
                Ok(n) if n > 0 => Ok(Setting::Dim(key.to_string(), n)),
                _ => Err(SettingError::Dim {
                    dim: key.to_string(),
                    value: value.to_string(),
                }),
            },
        }
    }
}

/// The dimensions `shape` (read against the source of `graph`) and every `Setting::Dim` bind;
/// a dimension given two values is refused.
pub fn bind_dims(
    graph: &GraphSource,
    shape: Option<&FrameShape>,
    settings: &[Setting],
) -> Result<Vec<(String, u64)>, FilesError> {
    let set: Vec<(String, u64)> = settings
        .iter()
        .filter_map(|s| match s {
            Setting::Dim(name, value) => Some((name.clone(), *value)),
            Setting::Param(..) => None,
        })
        .collect();
    let Some(shape) = shape else {
        return Ok(set);
    };
    let probe = graph.bind(&Overrides {
        dims: set.clone(),
        params: Vec::new(),
    })?;
    let option = |why: String| FilesError::Option {
        option: "--shape",
        why,
    };
    let mut dims = probe
        .bind_source_shape(shape.extents())
        .map_err(|e| option(format!("{shape}: graph {}: {e}", graph.path().display())))?;
    for (name, value) in set {
        match dims.iter().find(|(n, _)| *n == name) {
            Some((_, bound)) if *bound != value => {
                return Err(option(format!(
                    "{shape} makes {name} {bound}, but --set {name}={value}: give one"
                )));
            }
            Some(_) => {}
            None => dims.push((name, value)),
        }
    }
    Ok(dims)
}

/// The stage parameters among `settings`: (stage, parameter, value).
pub fn params(settings: &[Setting]) -> Vec<(String, String, String)> {
    settings
        .iter()
        .filter_map(|s| match s {
            Setting::Param(stage, param, value) => {
                Some((stage.clone(), param.clone(), value.clone()))
            }
            Setting::Dim(..) => None,
        })
        .collect()
}

/// The graph and placement files of a run, read and parsed once, and what overrides them.
#[derive(Clone, Debug)]
pub struct GraphFiles {
    /// The graph file, parsed.
    pub graph: GraphSource,
    /// The placement file, parsed and checked, before this run's overrides; none for a run
    /// that plans nothing (a sender, a verifier).
    pub placement: Option<Placement>,
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
    /// A rate is out of the range a run can represent.
    #[error(transparent)]
    Rate(#[from] RateError),
    /// A pipeline was to be planned from files that hold no placement.
    #[error("graph {}: no placement was given to plan it with", graph.display())]
    NoPlacement {
        /// The graph file.
        graph: std::path::PathBuf,
    },
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
    /// The graph and the placement, with nothing overridden.
    pub fn new(graph: GraphSource, placement: Placement) -> GraphFiles {
        GraphFiles {
            placement: Some(placement),
            ..GraphFiles::of_graph(graph)
        }
    }

    /// The graph alone, for a run that plans nothing, with nothing overridden.
    pub fn of_graph(graph: GraphSource) -> GraphFiles {
        GraphFiles {
            graph,
            placement: None,
            dims: Vec::new(),
            sets: Vec::new(),
            slots: None,
            stream_rate: None,
            workers: None,
        }
    }

    /// Reads and parses the graph file at `graph` and the placement file at `placement`, once
    /// for the whole run, with nothing overridden.
    pub fn read(graph: &Path, placement: &Path) -> Result<GraphFiles, FilesError> {
        Ok(GraphFiles::new(
            GraphSource::read(graph)?,
            Placement::load(placement)?,
        ))
    }

    /// These files with `placement` in place of the run's own (an alternative the run moves
    /// to), every override kept.
    pub fn with_placement(&self, placement: Placement) -> GraphFiles {
        GraphFiles {
            placement: Some(placement),
            ..self.clone()
        }
    }

    /// The graph file's path.
    pub fn graph_path(&self) -> &Path {
        self.graph.path()
    }

    /// The graph with this run's dimension bindings and no parameter overrides: its shape,
    /// which decides its workload and that workload's timing before anything is prepared.
    pub fn shaped_graph(&self) -> Result<Graph, GraphError> {
        self.graph.bind(&Overrides {
            dims: self.dims.clone(),
            params: Vec::new(),
        })
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
        let graph = self.graph.bind(&overrides)?;
        let mut placement = self
            .placement
            .clone()
            .ok_or_else(|| FilesError::NoPlacement {
                graph: self.graph.path().to_path_buf(),
            })?;
        let period = match self.stream_rate {
            Some(rate) => rate::frame_period("--stream-rate", rate)?,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_parse_to_dimensions_and_parameters() {
        assert_eq!("N=4096".parse(), Ok(Setting::Dim("N".into(), 4096)));
        assert_eq!(
            "cfar.pfa=1e-6".parse(),
            Ok(Setting::Param("cfar".into(), "pfa".into(), "1e-6".into()))
        );
        for bad in ["N", "=3", ".p=1", "s.=1"] {
            let e = bad.parse::<Setting>().unwrap_err().to_string();
            assert!(e.contains("expected DIM=VALUE"), "{bad}: {e}");
        }
        for bad in ["N=0", "N=-1", "N=x"] {
            let e = bad.parse::<Setting>().unwrap_err().to_string();
            assert!(e.contains("is not a positive integer"), "{bad}: {e}");
        }
    }

    #[test]
    fn parameters_are_the_settings_of_stages() {
        let settings: Vec<Setting> = ["N=8", "fir.taps=32", "M=2"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        assert_eq!(
            params(&settings),
            vec![("fir".into(), "taps".into(), "32".into())]
        );
    }
}

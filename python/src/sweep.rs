//! `kplace.bisect_rate`: the highest rate each placement sustains, searched by the bundled
//! `kplace bisect-rate` (so every goal, gate, co-tenant and option it has is there), its
//! results as a [`Sweep`]: `bisect-rate.json` as a dict, a row per search and a row per trial
//! as columns a pandas DataFrame takes as they are, and the plots it draws as SVG, the
//! sustained rates shown as the result's picture in a notebook.
//!
//! Guarantees: the search's files go to the `out` directory given, which is kept, or else to
//! a temporary one removed with the result; a search with no answer for some placement
//! (exit status 1) still returns its results, `answered` false; one interrupted by Ctrl-C
//! returns what it had measured, `interrupted` true; one that wrote no results raises
//! `kplace.KplaceError` with the command's message.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::command;
use crate::errors::KplaceError;
use crate::tables;

/// The most bytes `bisect-rate.json` may hold when it is read back (every trial's latency
/// histogram is in it).
const MAX_RESULTS_BYTES: u64 = 256 << 20;

/// The most bytes one plot may hold when it is read back.
const MAX_SVG_BYTES: u64 = 64 << 20;

/// The plots `kplace bisect-rate` draws (docs/bisect-rate.md), by name.
const PLOTS: &[&str] = &["sustained", "latency", "loads", "cdf", "stages"];

/// Where a command's files go: a directory the caller named, kept; or a temporary one,
/// removed with the last result that holds it (a tuning's proofs are a [`Sweep`] of their
/// own, in the tuning's directory).
pub enum OutDir {
    Kept(PathBuf),
    Temporary(tempfile::TempDir),
}

/// A directory of results, and what holds the directory it is in.
#[derive(Clone)]
pub struct Place {
    /// Keeps the directory while a result is in it.
    pub root: Arc<OutDir>,
    pub path: PathBuf,
}

impl Place {
    /// The whole of `root`.
    pub fn root(root: OutDir) -> Place {
        let path = root.path().to_path_buf();
        Place {
            root: Arc::new(root),
            path,
        }
    }

    /// `path` in the same root.
    pub fn at(&self, path: PathBuf) -> Place {
        Place {
            root: Arc::clone(&self.root),
            path,
        }
    }
}

impl OutDir {
    /// `out`, or a new temporary directory.
    pub fn new(out: Option<PathBuf>) -> PyResult<OutDir> {
        match out {
            Some(dir) => Ok(OutDir::Kept(dir)),
            None => tempfile::tempdir()
                .map(OutDir::Temporary)
                .map_err(|e| KplaceError::new_err(format!("a temporary directory: {e}"))),
        }
    }

    pub fn path(&self) -> &Path {
        match self {
            OutDir::Kept(dir) => dir,
            OutDir::Temporary(dir) => dir.path(),
        }
    }
}

/// What `kplace bisect-rate` found: `dict` (bisect-rate.json, docs/bisect-rate.md),
/// `to_pandas()` (a row per search), `trials_to_pandas()` (a row per trial), `svg(name)` for
/// each plot, `answered`, `interrupted` and `text` (what it printed).
#[pyclass(frozen, module = "kplace")]
pub struct Sweep {
    json: String,
    text: String,
    out: Place,
    answered: bool,
    interrupted: bool,
}

/// Runs `kplace bisect-rate` (`command`) with `args`, its results into `out`.
pub fn bisect_rate(
    py: Python<'_>,
    command: &Path,
    mut args: Vec<String>,
    out: Option<PathBuf>,
    quiet: bool,
) -> PyResult<Sweep> {
    let out = OutDir::new(out)?;
    args.splice(
        0..0,
        [
            "bisect-rate".to_string(),
            "--out".into(),
            out.path().display().to_string(),
        ],
    );
    let finished = command::run(py, command, &args, quiet)?;
    let out = Place::root(out);
    match Sweep::read(&out, finished.stdout.clone(), finished.status.success()) {
        Ok(mut sweep) => {
            sweep.interrupted = finished.interrupted;
            Ok(sweep)
        }
        Err(_) if finished.interrupted => Err(finished.interruption()),
        Err(_) => Err(finished.error(&format!("kplace {}", args.join(" ")))),
    }
}

impl Sweep {
    /// The sweep whose results are in `out` (`bisect-rate.json`), which said `text` and
    /// `answered` every search.
    pub fn read(out: &Place, text: String, answered: bool) -> PyResult<Sweep> {
        let results = out.path.join("bisect-rate.json");
        let json =
            kplace::os::files::read_text_bounded(&results, MAX_RESULTS_BYTES, "search results")
                .map_err(|e| KplaceError::new_err(format!("{}: {e}", results.display())))?;
        Ok(Sweep {
            json,
            text,
            out: out.clone(),
            answered,
            interrupted: false,
        })
    }

    /// The sustained rates' plot, the sweep's picture in a notebook.
    pub fn picture(&self) -> Option<String> {
        self.svg("sustained").ok()
    }

    fn searches<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        Ok(self.dict(py)?.get_item("searches")?.cast_into::<PyList>()?)
    }
}

#[pymethods]
impl Sweep {
    /// The results as a dict: bisect-rate.json's fields (docs/bisect-rate.md).
    #[getter]
    fn dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        py.import("json")?.getattr("loads")?.call1((&self.json,))
    }

    /// Whether every search found a rate that meets its goals (the command's exit status 0).
    #[getter]
    fn answered(&self) -> bool {
        self.answered
    }

    /// Whether Ctrl-C stopped the search: the results hold what was measured before.
    #[getter]
    fn interrupted(&self) -> bool {
        self.interrupted
    }

    /// What `kplace bisect-rate` printed.
    #[getter]
    fn text(&self) -> &str {
        &self.text
    }

    /// The directory holding the results, the plots and every trial's reports.
    #[getter]
    fn out(&self) -> PathBuf {
        self.out.path.clone()
    }

    /// Each search's scalar fields as columns, `{"system": [...], "sustained_rate": [...],
    /// ...}`: a row per placement, frame shape and repeat.
    fn search_columns<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        tables::columns(py, &self.searches(py)?)
    }

    /// Every trial's scalar fields as columns, each row naming its search (`system`,
    /// `shape`, `repeat`).
    fn trial_columns<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let rows = PyList::empty(py);
        for search in self.searches(py)?.iter() {
            for trial in search.get_item("trials")?.cast::<PyList>()?.iter() {
                let row = trial.cast::<PyDict>()?.copy()?;
                for key in ["system", "shape", "repeat"] {
                    row.set_item(key, search.get_item(key)?)?;
                }
                rows.append(row)?;
            }
        }
        tables::columns(py, &rows)
    }

    /// The searches as a pandas DataFrame, a row per search (pandas must be installed).
    fn to_pandas<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        tables::data_frame(py, self.search_columns(py)?)
    }

    /// The trials as a pandas DataFrame, a row per trial.
    fn trials_to_pandas<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        tables::data_frame(py, self.trial_columns(py)?)
    }

    /// The plots drawn, by name (`sustained`, `latency`, `loads`, `cdf`, `stages`).
    #[getter]
    fn plots(&self) -> Vec<&'static str> {
        PLOTS
            .iter()
            .copied()
            .filter(|name| self.out.path.join(format!("{name}.svg")).is_file())
            .collect()
    }

    /// The plot `name` as SVG text.
    fn svg(&self, name: &str) -> PyResult<String> {
        if !PLOTS.contains(&name) {
            return Err(KplaceError::new_err(format!(
                "no plot {name:?}: bisect-rate draws {}",
                PLOTS.join(", ")
            )));
        }
        let path = self.out.path.join(format!("{name}.svg"));
        kplace::os::files::read_text_bounded(&path, MAX_SVG_BYTES, "plot")
            .map_err(|e| KplaceError::new_err(format!("{}: {e}", path.display())))
    }

    /// The sustained rates as a notebook shows the result.
    fn _repr_svg_(&self) -> Option<String> {
        self.picture()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let mut said = Vec::new();
        for search in self.searches(py)?.iter() {
            let rate = search.get_item("sustained_rate")?;
            let rate = if rate.is_none() {
                "none".to_string()
            } else {
                format!("{:.1}", rate.extract::<f64>()?)
            };
            said.push(format!(
                "{}@{}: {rate}",
                search.get_item("system")?.str()?,
                search.get_item("shape")?.str()?
            ));
        }
        Ok(format!(
            "kplace.Sweep({}, answered={}{})",
            said.join(", "),
            if self.answered { "True" } else { "False" },
            if self.interrupted {
                ", interrupted=True"
            } else {
                ""
            }
        ))
    }
}

//! `kplace.tune` and `kplace.admit`: the placement this machine runs best, and how many
//! pipelines of one fit, by the bundled `kplace tune` and `kplace admit` (so the calibration
//! store, the co-tenants and every option are there), their results as objects read from the
//! JSON they write beside their accounts (`tune.json`, `admit.json`, docs/tune.md and
//! docs/adapt.md): dicts, tables for pandas, the proofs as [`Sweep`]s with their plots.
//!
//! Guarantees: as for [`crate::sweep`]: files in the `out` directory given (kept), or in a
//! temporary one removed with the last object holding it; a request no placement meets (exit
//! status 1) still returns its results, `met` false; Ctrl-C returns what was written, and a
//! command that wrote nothing raises `kplace.KplaceError` with its message. A kept `out`
//! may hold earlier results: only the files this call wrote are read.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::command::{self, Finished};
use crate::errors::KplaceError;
use crate::sweep::{OutDir, Place, Sweep};
use crate::tables;

/// The most bytes a `tune.json` or `admit.json` may hold when read back.
const MAX_RESULTS_BYTES: u64 = 64 << 20;

/// What a command wrote: how it ended, where, and each result file found (its directory,
/// its text), in the order of the directories' names.
struct Written {
    finished: Finished,
    out: Place,
    found: Vec<(PathBuf, String)>,
}

/// Runs the bundled `command` as `subcommand` with `args` and `--out`, and finds the result
/// files named `file` it wrote in `PREFIX-SHAPE/` directories of `out`.
fn run_and_find(
    py: Python<'_>,
    command: &Path,
    subcommand: &str,
    mut args: Vec<String>,
    out: Option<PathBuf>,
    quiet: bool,
    (prefix, file): (&str, &'static str),
) -> PyResult<Written> {
    let out = OutDir::new(out)?;
    args.splice(
        0..0,
        [
            subcommand.to_string(),
            "--out".into(),
            out.path().display().to_string(),
        ],
    );
    // A second's margin: file times may be coarser than the clock.
    let started = SystemTime::now()
        .checked_sub(std::time::Duration::from_secs(1))
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let finished = command::run(py, command, &args, quiet)?;
    let mut found = Vec::new();
    if let Ok(entries) = std::fs::read_dir(out.path()) {
        for entry in entries.flatten() {
            let dir = entry.path();
            let named = dir
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix));
            let path = dir.join(file);
            let fresh = std::fs::metadata(&path)
                .and_then(|m| m.modified())
                .is_ok_and(|t| t >= started);
            if named && fresh {
                let json = kplace::os::files::read_text_bounded(&path, MAX_RESULTS_BYTES, file)
                    .map_err(|e| KplaceError::new_err(format!("{}: {e}", path.display())))?;
                found.push((dir, json));
            }
        }
    }
    found.sort();
    if found.is_empty() {
        return Err(if finished.interrupted {
            finished.interruption()
        } else {
            finished.error(&format!("kplace {}", args.join(" ")))
        });
    }
    Ok(Written {
        finished,
        out: Place::root(out),
        found,
    })
}

/// The JSON texts as Python objects.
fn parsed<'py>(py: Python<'py>, texts: &[(PathBuf, String)]) -> PyResult<Bound<'py, PyList>> {
    let loads = py.import("json")?.getattr("loads")?;
    let list = PyList::empty(py);
    for (_, text) in texts {
        list.append(loads.call1((text,))?)?;
    }
    Ok(list)
}

/// Rows of `list` (each item's `key`, a list of dicts), each given the item's `shape`.
fn rows_of<'py>(
    py: Python<'py>,
    items: &Bound<'py, PyList>,
    key: &str,
) -> PyResult<Bound<'py, PyList>> {
    let rows = PyList::empty(py);
    for item in items.iter() {
        for row in item.get_item(key)?.cast::<PyList>()?.iter() {
            let row = row.cast::<PyDict>()?.copy()?;
            row.set_item("shape", item.get_item("shape")?)?;
            rows.append(row)?;
        }
    }
    Ok(rows)
}

/// What `kplace tune` found, per frame shape: `dict` (the first shape's `tune.json`),
/// `shapes` (every shape's), `to_pandas()` (a row per placement predicted),
/// `proofs_to_pandas()`, `winner` (the placement file written), `proofs` (the proving
/// search, a `Sweep`), `met`, `interrupted`, `text`.
#[pyclass(frozen, module = "kplace")]
pub struct Tuning {
    shapes: Vec<(PathBuf, String)>,
    out: Place,
    text: String,
    met: bool,
    interrupted: bool,
}

/// Runs `kplace tune` with `args`, into `out`.
pub fn tune(
    py: Python<'_>,
    command: &Path,
    args: Vec<String>,
    out: Option<PathBuf>,
    quiet: bool,
) -> PyResult<Tuning> {
    let Written {
        finished,
        out,
        found: shapes,
    } = run_and_find(
        py,
        command,
        "tune",
        args,
        out,
        quiet,
        ("tune-", "tune.json"),
    )?;
    Ok(Tuning {
        shapes,
        out,
        text: finished.stdout,
        met: finished.status.success(),
        interrupted: finished.interrupted,
    })
}

#[pymethods]
impl Tuning {
    /// The first shape's results: `tune.json` as a dict (docs/tune.md).
    #[getter]
    fn dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.shapes(py)?.get_item(0)
    }

    /// Every shape's results, in the order of their directories' names.
    #[getter]
    fn shapes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        parsed(py, &self.shapes)
    }

    /// Whether every shape has a winner that meets the request (exit status 0).
    #[getter]
    fn met(&self) -> bool {
        self.met
    }

    /// Whether Ctrl-C stopped the tuning: the shapes tuned before are here.
    #[getter]
    fn interrupted(&self) -> bool {
        self.interrupted
    }

    /// What `kplace tune` printed.
    #[getter]
    fn text(&self) -> &str {
        &self.text
    }

    /// The directory holding the results.
    #[getter]
    fn out(&self) -> PathBuf {
        self.out.path.clone()
    }

    /// The placement file written for the first shape's winner; `None`: no winner.
    #[getter]
    fn winner(&self, py: Python<'_>) -> PyResult<Option<PathBuf>> {
        let winner = self.dict(py)?.get_item("winner")?;
        if winner.is_none() {
            return Ok(None);
        }
        winner.get_item("placement")?.extract().map(Some)
    }

    /// Every prediction's scalar fields as columns, with its `shape`.
    fn prediction_columns<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        tables::columns(py, &rows_of(py, &self.shapes(py)?, "predictions")?)
    }

    /// Every proof's scalar fields as columns, with its `shape`.
    fn proof_columns<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        tables::columns(py, &rows_of(py, &self.shapes(py)?, "proofs")?)
    }

    /// The predictions as a pandas DataFrame, a row per placement and shape.
    fn to_pandas<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        tables::data_frame(py, self.prediction_columns(py)?)
    }

    /// The proofs as a pandas DataFrame: predicted against measured.
    fn proofs_to_pandas<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        tables::data_frame(py, self.proof_columns(py)?)
    }

    /// The first shape's proving search, as `kplace.bisect_rate` returns one; `None` when
    /// nothing was proven.
    #[getter]
    fn proofs(&self) -> PyResult<Option<Sweep>> {
        let Some((dir, _)) = self.shapes.first() else {
            return Ok(None);
        };
        let proofs = dir.join("proofs");
        if !proofs.join("bisect-rate.json").is_file() {
            return Ok(None);
        }
        Sweep::read(&self.out.at(proofs), String::new(), true).map(Some)
    }

    /// The proofs' sustained rates, as a notebook shows the tuning (none when nothing was
    /// proven).
    fn _repr_svg_(&self) -> PyResult<Option<String>> {
        Ok(self.proofs()?.and_then(|sweep| sweep.picture()))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let d = self.dict(py)?;
        Ok(format!(
            "kplace.Tuning(graph={}, shape={}, predicted={}, winner={}, met={})",
            d.get_item("graph")?.repr()?,
            d.get_item("shape")?.repr()?,
            d.get_item("predictions")?.len()?,
            match d.get_item("winner")? {
                w if w.is_none() => "None".to_string(),
                w => w.get_item("label")?.repr()?.to_string(),
            },
            if self.met { "True" } else { "False" }
        ))
    }
}

/// What `kplace admit` found: `dict` (`admit.json`), `pipelines`, `conclusion`,
/// `to_pandas()` (a row per shared resource, fewest pipelines first), `proof`, `text`.
#[pyclass(frozen, module = "kplace")]
pub struct Admission {
    json: String,
    out: Place,
    dir: PathBuf,
    text: String,
    interrupted: bool,
}

/// Runs `kplace admit` with `args`, into `out`.
pub fn admit(
    py: Python<'_>,
    command: &Path,
    args: Vec<String>,
    out: Option<PathBuf>,
    quiet: bool,
) -> PyResult<Admission> {
    let Written {
        finished,
        out,
        mut found,
    } = run_and_find(
        py,
        command,
        "admit",
        args,
        out,
        quiet,
        ("admit-", "admit.json"),
    )?;
    let (dir, json) = found.swap_remove(0);
    Ok(Admission {
        json,
        out,
        dir,
        text: finished.stdout,
        interrupted: finished.interrupted,
    })
}

#[pymethods]
impl Admission {
    /// `admit.json` as a dict (docs/adapt.md).
    #[getter]
    fn dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        py.import("json")?.getattr("loads")?.call1((&self.json,))
    }

    /// Pipelines that fit (0: not even one).
    #[getter]
    fn pipelines(&self, py: Python<'_>) -> PyResult<u64> {
        self.dict(py)?.get_item("pipelines")?.extract()
    }

    /// The answer in words.
    #[getter]
    fn conclusion(&self, py: Python<'_>) -> PyResult<String> {
        self.dict(py)?.get_item("conclusion")?.extract()
    }

    /// What the proof measured (a dict), when it was asked for.
    #[getter]
    fn proof<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.dict(py)?.get_item("proof")
    }

    /// Whether Ctrl-C stopped it (its proof, then, is not there).
    #[getter]
    fn interrupted(&self) -> bool {
        self.interrupted
    }

    /// What `kplace admit` printed.
    #[getter]
    fn text(&self) -> &str {
        &self.text
    }

    /// The directory holding the account, the calibration and the proofs.
    #[getter]
    fn out(&self) -> PathBuf {
        self.out.path.clone()
    }

    /// Each shared resource's count as columns (`resource`, `pipelines`, `detail`).
    fn fit_columns<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let fits = self.dict(py)?.get_item("fits")?;
        tables::columns(py, fits.cast::<PyList>()?)
    }

    /// The shared resources as a pandas DataFrame, the one that runs out first on top.
    fn to_pandas<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        tables::data_frame(py, self.fit_columns(py)?)
    }

    /// The proof's searches (N pipelines, then N + 1), as `kplace.bisect_rate` returns
    /// them; empty without a proof.
    #[getter]
    fn proof_sweeps(&self, py: Python<'_>) -> PyResult<Vec<Sweep>> {
        let proof = self.proof(py)?;
        if proof.is_none() {
            return Ok(Vec::new());
        }
        let n: u64 = proof.get_item("pipelines")?.extract()?;
        let mut sweeps = Vec::new();
        for pipelines in [n, n.saturating_add(1)] {
            let dir = self.dir.join(format!("proof-{pipelines}"));
            if dir.join("bisect-rate.json").is_file() {
                sweeps.push(Sweep::read(&self.out.at(dir), String::new(), true)?);
            }
        }
        Ok(sweeps)
    }

    /// The proof's sustained rates with N pipelines, as a notebook shows the admission; none
    /// without a proof.
    fn _repr_svg_(&self, py: Python<'_>) -> PyResult<Option<String>> {
        Ok(self.proof_sweeps(py)?.first().and_then(Sweep::picture))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let d = self.dict(py)?;
        Ok(format!(
            "kplace.Admission(placement={}, rate={}, pipelines={}, conclusion={})",
            d.get_item("placement")?.repr()?,
            d.get_item("rate")?,
            d.get_item("pipelines")?,
            d.get_item("conclusion")?.repr()?
        ))
    }
}

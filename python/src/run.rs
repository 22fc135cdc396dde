//! `kplace.run`: a whole `kplace run` from Python (a recording replayed or a UDP stream, the
//! checks, the timeline), by the bundled command itself, so every source, check and option
//! `kplace run` has is there, and its report comes back as a [`Report`]: the report's fields
//! as a dict, each stage's figures as columns a pandas DataFrame takes as they are, and the
//! timeline `kplace plot-trace` draws as the report's picture in a notebook.
//!
//! Its progress reaches `sys.stderr` as it goes, and Ctrl-C ends the run as at a terminal,
//! its report (which names the signal) returned ([`crate::command`]).
//!
//! Guarantees: the command's working files (report, trace, picture) are in a temporary
//! directory removed when the report goes; a run that writes no report raises
//! `kplace.KplaceError` with the command's own message; one whose frames fail their check
//! returns its report, `passed` false, as `kplace run --report` writes it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::command;
use crate::errors::KplaceError;
use crate::tables;

/// What `kplace run` reported: `report.dict` (the fields of docs/report.md), `passed`,
/// `stage_columns()` and `to_pandas()` (a row per stage), and, when the run was traced, its
/// timeline as the picture a notebook shows.
#[pyclass(frozen, module = "kplace")]
pub struct Report {
    json: String,
    text: String,
    command: PathBuf,
    /// Holds the trace, and the picture once drawn; removed with the report.
    work: tempfile::TempDir,
    traced: bool,
}

/// The most bytes a timeline picture `kplace plot-trace` draws may hold when it is read back.
const MAX_SVG_BYTES: u64 = 64 << 20;

/// Runs `kplace run` (`command`) with `args` and the report's path, its progress on
/// `sys.stderr` unless `quiet`, and reads its report; interrupted (Ctrl-C), the run ends as
/// at a terminal and its report, which says so, is returned.
pub fn run_command(
    py: Python<'_>,
    command: PathBuf,
    mut args: Vec<String>,
    trace: bool,
    quiet: bool,
) -> PyResult<Report> {
    let work = tempfile::tempdir().map_err(|e| KplaceError::new_err(e.to_string()))?;
    let report = work.path().join("report.json");
    args.extend(["--report".into(), report.display().to_string()]);
    if trace {
        args.extend([
            "--trace".into(),
            work.path().join("trace.json").display().to_string(),
        ]);
    }
    let argv: Vec<String> = std::iter::once("run".to_string()).chain(args).collect();
    let finished = command::run(py, &command, &argv, quiet)?;
    let json = match kplace::os::files::read_text_bounded(
        &report,
        kplace::report::MAX_REPORT_BYTES,
        "run report",
    ) {
        Ok(json) => json,
        Err(_) if finished.interrupted => return Err(finished.interruption()),
        Err(_) => return Err(finished.error(&format!("kplace {}", argv.join(" ")))),
    };
    Ok(Report {
        json,
        text: finished.stdout,
        command,
        work,
        traced: trace,
    })
}

impl Report {
    fn trace(&self) -> PathBuf {
        self.work.path().join("trace.json")
    }
}

#[pymethods]
impl Report {
    /// The report as a dict: the fields of `kplace run --report` (docs/report.md).
    #[getter]
    fn dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        py.import("json")?.getattr("loads")?.call1((&self.json,))
    }

    /// Whether every frame was reported and passed its check.
    #[getter]
    fn passed(&self, py: Python<'_>) -> PyResult<bool> {
        self.dict(py)?
            .get_item("verification")?
            .get_item("passed")?
            .extract()
    }

    /// What `kplace run` printed: the report as text.
    #[getter]
    fn text(&self) -> &str {
        &self.text
    }

    /// The report as a dict (`dict`).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.dict(py)
    }

    /// Each stage's scalar figures as columns, `{"name": [...], "per_frame_ms": [...], ...}`:
    /// what `pandas.DataFrame` takes as it is.
    fn stage_columns<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let stages = self.dict(py)?.get_item("stages")?;
        tables::columns(py, stages.cast::<PyList>()?)
    }

    /// The stages as a pandas DataFrame, a row per stage indexed by name (pandas must be
    /// installed: it is not a dependency of kplace).
    fn to_pandas<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        tables::data_frame(py, self.stage_columns(py)?)?.call_method1("set_index", ("name",))
    }

    /// The run's timeline as `kplace plot-trace` draws it (SVG), when it was run with
    /// `trace=True`; a notebook shows it as the report's picture.
    fn _repr_svg_(&self, py: Python<'_>) -> PyResult<Option<String>> {
        if !self.traced {
            return Ok(None);
        }
        let svg = self.work.path().join("trace.svg");
        if !svg.is_file() {
            draw(py, &self.command, &self.trace(), &svg)?;
        }
        kplace::os::files::read_text_bounded(&svg, MAX_SVG_BYTES, "timeline picture")
            .map(Some)
            .map_err(|e| KplaceError::new_err(format!("{}: {e}", svg.display())))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let d = self.dict(py)?;
        Ok(format!(
            "kplace.Report(graph={}, placement={}, frames={}, frames_per_s={:.1}, passed={})",
            d.get_item("graph")?.repr()?,
            d.get_item("placement")?.repr()?,
            d.get_item("frames")?,
            d.get_item("frames_per_s")?.extract::<f64>()?,
            if self.passed(py)? { "True" } else { "False" }
        ))
    }
}

/// Draws `trace` into `svg` with `kplace plot-trace`.
fn draw(py: Python<'_>, command: &Path, trace: &Path, svg: &Path) -> PyResult<()> {
    let output = py.detach(|| {
        Command::new(command)
            .arg("plot-trace")
            .arg(trace)
            .arg("--out")
            .arg(svg)
            .stdin(Stdio::null())
            .output()
    });
    let output = output
        .map_err(|e| KplaceError::new_err(format!("cannot run {}: {e}", command.display())))?;
    if !output.status.success() {
        return Err(KplaceError::new_err(format!(
            "kplace plot-trace: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(())
}

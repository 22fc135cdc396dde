//! kplace's Python module, `kplace._kplace`: a graph on a placement run on NumPy arrays
//! ([`pipeline`]), over the runtime's own feed of frames from memory
//! (`kplace::workload::feed`), and `kplace run`, `bisect-rate`, `tune` and `admit` by the
//! bundled command ([`command`]: progress passed on, Ctrl-C forwarded) with their results as
//! objects ([`run`], [`sweep`], [`tuning`], tables for pandas in [`tables`]), so nothing of the runtime is
//! re-implemented here; this crate only checks and converts arrays ([`arrays`]) and errors
//! ([`errors`]). The package's Python
//! side (`python/kplace/`) is shims: it re-exports this module and runs the bundled `kplace`
//! command.
//!
//! Built by maturin (scripts/wheel.sh) with the feature `python`; without it, as in a plain
//! `cargo build --workspace`, the library is empty, so the workspace builds without Python.

#[cfg(feature = "python")]
mod arrays;
#[cfg(feature = "python")]
mod command;
#[cfg(feature = "python")]
mod errors;
#[cfg(feature = "python")]
mod pipeline;
#[cfg(feature = "python")]
mod run;
#[cfg(feature = "python")]
mod sweep;
#[cfg(feature = "python")]
mod tables;
#[cfg(feature = "python")]
mod tuning;

#[cfg(feature = "python")]
use pyo3::prelude::*;

/// The file a graph's name or path stands for, as `Pipeline` and `kplace run --graph` find it
/// (`graph_path("beamformer/filtered")`): where its placements and data files are.
#[cfg(feature = "python")]
#[pyfunction]
fn graph_path(graph: std::path::PathBuf) -> PyResult<std::path::PathBuf> {
    let found = kplace::model::locate::graph(&graph).map_err(|e| errors::kplace_error(&e))?;
    if !found.is_file() {
        return Err(errors::KplaceError::new_err(format!(
            "graph {}: no such file",
            graph.display()
        )));
    }
    std::path::absolute(&found).map_err(|e| errors::kplace_error(&e))
}

/// The command line of `(flag, value)` pairs, each whose value is given.
#[cfg(feature = "python")]
fn options<const N: usize>(pairs: [(&str, Option<String>); N]) -> Vec<String> {
    pairs
        .into_iter()
        .filter_map(|(flag, value)| Some([flag.to_string(), value?]))
        .flatten()
        .collect()
}

/// A path as a command line takes it.
#[cfg(feature = "python")]
fn text(path: std::path::PathBuf) -> String {
    path.display().to_string()
}

/// Runs `kplace run` (the bundled `command`, which `kplace.run` passes) on `graph`, with the
/// options given (each as `kplace run` takes it; `args`, any others), and returns its report.
#[cfg(feature = "python")]
#[pyfunction(name = "run")]
#[pyo3(signature = (command, graph, placement = None, frames = None, source = None, recording = None, check = None, set = None, trace = false, args = None, progress = true))]
#[allow(clippy::too_many_arguments)]
fn run_graph(
    py: Python<'_>,
    command: std::path::PathBuf,
    graph: std::path::PathBuf,
    placement: Option<std::path::PathBuf>,
    frames: Option<u64>,
    source: Option<String>,
    recording: Option<std::path::PathBuf>,
    check: Option<String>,
    set: Option<&Bound<'_, pyo3::types::PyDict>>,
    trace: bool,
    args: Option<Vec<String>>,
    progress: bool,
) -> PyResult<run::Report> {
    let mut argv = options([
        ("--graph", Some(text(graph))),
        ("--placement", placement.map(text)),
        ("--frames", frames.map(|f| f.to_string())),
        ("--source", source),
        ("--recording", recording.map(text)),
        ("--check", check),
    ]);
    for (key, value) in set.into_iter().flat_map(|d| d.iter()) {
        argv.extend([
            "--set".to_string(),
            format!("{}={}", key.str()?, value.str()?),
        ]);
    }
    argv.extend(args.unwrap_or_default());
    run::run_command(py, command, argv, trace, !progress)
}

/// Runs `kplace bisect-rate` (the bundled `command`, which `kplace.bisect_rate` passes) on
/// `graph` and `placements` with the options given (`args`, any others) and returns its
/// results; into `out`, kept, or else a temporary directory.
#[cfg(feature = "python")]
#[pyfunction]
#[pyo3(signature = (command, graph, placements, shape = None, recording = None, check = None, goals = None, out = None, args = None, progress = true))]
#[allow(clippy::too_many_arguments)]
fn bisect_rate(
    py: Python<'_>,
    command: std::path::PathBuf,
    graph: std::path::PathBuf,
    placements: Vec<String>,
    shape: Option<String>,
    recording: Option<std::path::PathBuf>,
    check: Option<String>,
    goals: Option<String>,
    out: Option<std::path::PathBuf>,
    args: Option<Vec<String>>,
    progress: bool,
) -> PyResult<sweep::Sweep> {
    let mut argv = options([
        ("--graph", Some(text(graph))),
        ("--placements", Some(placements.join(","))),
        ("--shape", shape),
        ("--recording", recording.map(text)),
        ("--check", check),
        ("--goals", goals),
    ]);
    argv.extend(args.unwrap_or_default());
    sweep::bisect_rate(py, &command, argv, out, !progress)
}

/// Runs `kplace tune` (the bundled `command`, which `kplace.tune` passes) on `graph`: the
/// placement that best meets `rate` (or the highest rate), predicted and proven by `prove`
/// searches; into `out`, kept, or else a temporary directory.
#[cfg(feature = "python")]
#[pyfunction]
#[pyo3(signature = (command, graph, placement = None, rate = None, shape = None, prove = None, recording = None, check = None, out = None, args = None, progress = true))]
#[allow(clippy::too_many_arguments)]
fn tune(
    py: Python<'_>,
    command: std::path::PathBuf,
    graph: std::path::PathBuf,
    placement: Option<std::path::PathBuf>,
    rate: Option<f64>,
    shape: Option<String>,
    prove: Option<u64>,
    recording: Option<std::path::PathBuf>,
    check: Option<String>,
    out: Option<std::path::PathBuf>,
    args: Option<Vec<String>>,
    progress: bool,
) -> PyResult<tuning::Tuning> {
    let mut argv = options([
        ("--graph", Some(text(graph))),
        ("--shape", shape),
        ("--recording", recording.map(text)),
        ("--check", check),
        ("--placement", placement.map(text)),
        ("--rate", rate.map(|r| r.to_string())),
        ("--prove", prove.map(|n| n.to_string())),
    ]);
    argv.extend(args.unwrap_or_default());
    tuning::tune(py, &command, argv, out, !progress)
}

/// Runs `kplace admit` (the bundled `command`, which `kplace.admit` passes): how many
/// pipelines of `placement`, each fed `rate`, fit this machine; with `prove`, measured.
#[cfg(feature = "python")]
#[pyfunction]
#[pyo3(signature = (command, graph, placement, rate, shape = None, prove = false, utilization = None, recording = None, check = None, out = None, args = None, progress = true))]
#[allow(clippy::too_many_arguments)]
fn admit(
    py: Python<'_>,
    command: std::path::PathBuf,
    graph: std::path::PathBuf,
    placement: std::path::PathBuf,
    rate: f64,
    shape: Option<String>,
    prove: bool,
    utilization: Option<f64>,
    recording: Option<std::path::PathBuf>,
    check: Option<String>,
    out: Option<std::path::PathBuf>,
    args: Option<Vec<String>>,
    progress: bool,
) -> PyResult<tuning::Admission> {
    let mut argv = options([
        ("--graph", Some(text(graph))),
        ("--shape", shape),
        ("--recording", recording.map(text)),
        ("--check", check),
        ("--placement", Some(text(placement))),
        ("--rate", Some(rate.to_string())),
        ("--utilization", utilization.map(|u| u.to_string())),
    ]);
    if prove {
        argv.push("--prove".into());
    }
    argv.extend(args.unwrap_or_default());
    tuning::admit(py, &command, argv, out, !progress)
}

/// The module: `Pipeline`, `run`, `bisect_rate`, `tune`, `admit`, their results (`Report`,
/// `Sweep`, `Tuning`, `Admission`), `graph_path` and `KplaceError`.
#[cfg(feature = "python")]
#[pymodule]
fn _kplace(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<pipeline::Pipeline>()?;
    m.add_function(wrap_pyfunction!(pipeline::close_all, m)?)?;
    // Every stream ends before the interpreter finalizes (`close_all`).
    let close_all = m.getattr("close_all")?;
    m.py()
        .import("atexit")?
        .call_method1("register", (close_all,))?;
    m.add_function(wrap_pyfunction!(graph_path, m)?)?;
    m.add_function(wrap_pyfunction!(run_graph, m)?)?;
    m.add_function(wrap_pyfunction!(bisect_rate, m)?)?;
    m.add_function(wrap_pyfunction!(tune, m)?)?;
    m.add_function(wrap_pyfunction!(admit, m)?)?;
    m.add_class::<run::Report>()?;
    m.add_class::<sweep::Sweep>()?;
    m.add_class::<tuning::Tuning>()?;
    m.add_class::<tuning::Admission>()?;
    m.add("KplaceError", m.py().get_type::<errors::KplaceError>())?;
    Ok(())
}

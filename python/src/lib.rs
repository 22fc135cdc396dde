//! kplace's Python module, `kplace._kplace`: a graph on a placement run on NumPy arrays
//! ([`pipeline`]), over the runtime's own feed of frames from memory
//! (`kplace::workload::feed`), so nothing of the runtime is re-implemented here; this crate
//! only checks and converts arrays ([`arrays`]) and errors ([`errors`]). The package's Python
//! side (`python/kplace/`) is shims: it re-exports this module and runs the bundled `kplace`
//! command.
//!
//! Built by maturin (scripts/wheel.sh) with the feature `python`; without it, as in a plain
//! `cargo build --workspace`, the library is empty, so the workspace builds without Python.

#[cfg(feature = "python")]
mod arrays;
#[cfg(feature = "python")]
mod errors;
#[cfg(feature = "python")]
mod pipeline;

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

/// The module: `Pipeline`, `graph_path` and `KplaceError`.
#[cfg(feature = "python")]
#[pymodule]
fn _kplace(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<pipeline::Pipeline>()?;
    m.add_function(wrap_pyfunction!(graph_path, m)?)?;
    m.add("KplaceError", m.py().get_type::<errors::KplaceError>())?;
    Ok(())
}

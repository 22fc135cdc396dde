//! kplace's Python module, `kplace._kplace`: a graph on a placement run on NumPy arrays
//! ([`pipeline`]), over the runtime's own feed of frames from memory
//! (`kplace::session::feed`), so nothing of the runtime is re-implemented here; this crate
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

/// The module: `Pipeline` and `KplaceError`.
#[cfg(feature = "python")]
#[pymodule]
fn _kplace(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<pipeline::Pipeline>()?;
    m.add("KplaceError", m.py().get_type::<errors::KplaceError>())?;
    Ok(())
}

//! The Python half of the host: host.py, imported once per interpreter, whose functions
//! import modules, create states and launch; and an exception worded as host.py words it.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyModule;

/// The embedded glue (host.py), imported once per interpreter.
static HOST: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// The glue module: importing kernels, creating states, launching.
pub fn host(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    HOST.get_or_try_init(py, || {
        PyModule::from_code(
            py,
            pyo3::ffi::c_str!(include_str!("host.py")),
            c"kplace_host.py",
            c"_kplace_host",
        )
        .map(Bound::unbind)
    })
    .map(|module| module.bind(py))
}

/// A Python exception as one line, as host.py's `describe` words it (its type, message and
/// innermost line; a broken rule of the contract as its message alone).
pub fn describe_error(py: Python<'_>, error: &PyErr) -> String {
    host(py)
        .and_then(|host| {
            host.getattr("describe")?
                .call1((error.value(py),))?
                .extract()
        })
        .unwrap_or_else(|_| error.to_string())
}

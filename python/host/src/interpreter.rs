//! The interpreter Python kernels run in: the process's own when it has one running (a Python
//! program using `kplace.Pipeline`), else one this library starts once, for the life of the
//! process, with the `sys.path` of the interpreter the runtime found (so the packages of the
//! user's virtual environment import), and NumPy importable in either.

use std::sync::OnceLock;

use pyo3::prelude::*;
use pyo3::types::PyList;

use kplace_abi::export::KernelError;

use crate::glue::describe_error;

/// Makes sure an interpreter runs in this process and imports NumPy. Starts one when none
/// runs, with `sys_path` as its `sys.path` (when not empty); a second call finds it running.
pub fn ensure(sys_path: &[String]) -> Result<(), KernelError> {
    static STARTED: OnceLock<()> = OnceLock::new();
    // SAFETY: Py_IsInitialized may be called at any time, without the GIL.
    if unsafe { pyo3::ffi::Py_IsInitialized() } == 0 {
        STARTED.get_or_init(|| {
            // Starts the interpreter without its signal handlers (the runtime keeps its own
            // Ctrl-C), and releases the GIL for the threads that launch kernels.
            Python::initialize();
            Python::attach(|py| {
                if sys_path.is_empty() {
                    return;
                }
                let set = PyList::new(py, sys_path)
                    .and_then(|list| py.import("sys")?.setattr("path", list));
                if let Err(e) = set {
                    // Reported by the NumPy import below, which then looks in the wrong places.
                    e.print(py);
                }
            });
        });
    }
    Python::attach(|py| {
        py.import("numpy").map(drop).map_err(|e| {
            let version = Python::version_str().to_string();
            KernelError::invalid(format!(
                "Python kernels need NumPy, which the Python kplace runs them in (Python {}) cannot import: {}; install numpy there, or name an interpreter that has it with KPLACE_PYTHON",
                version.split_whitespace().next().unwrap_or(&version),
                describe_error(py, &e)
            ))
        })
    })
}

//! A Python module's kernel table: the module imported once per file, each kernel it declares
//! given a slot ([`crate::slots`]), and the table kept for the life of the process (the
//! runtime may load the module again for another plan, and gets the same table).

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyModule;

use kplace_abi::{ABI_VERSION, Kernel, KernelFlags, Library};

use crate::slots;

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

/// One kernel a module declares.
#[derive(Debug)]
pub struct Declared {
    /// Its logical name.
    pub name: CString,
    /// Inputs it takes.
    pub n_inputs: u32,
    /// Outputs it writes.
    pub n_outputs: u32,
    /// Stateful, and what a lost frame does to its carry.
    pub flags: KernelFlags,
    /// A class (an instance per state) or a function (called as it is).
    pub is_class: bool,
    /// The class or function.
    pub object: Py<PyAny>,
}

/// The tables of the modules imported so far, by file.
static MODULES: Mutex<Vec<(PathBuf, &'static Library)>> = Mutex::new(Vec::new());

/// The kernel table of the module at `path`, importing it on first use.
pub fn table(path: &Path) -> Result<*const Library, String> {
    let file = path
        .canonicalize()
        .map_err(|e| format!("cannot read the Python module {}: {e}", path.display()))?;
    let mut modules = MODULES.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, table)) = modules.iter().find(|(p, _)| *p == file) {
        return Ok(*table);
    }
    let declared = Python::attach(|py| declared(py, &file).map_err(|e| describe_error(py, &e)))?;
    let kernels: Vec<Kernel> = declared
        .into_iter()
        .map(slots::claim)
        .collect::<Result<_, _>>()?;
    let label = file.file_name().map_or_else(
        || file.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let name = CString::new(format!("python module {label}")).unwrap_or_default();
    let kernels: &'static [Kernel] = Vec::leak(kernels);
    let table: &'static Library = Box::leak(Box::new(Library {
        abi_version: ABI_VERSION,
        n_kernels: kernels.len() as u32,
        name: name.into_raw(),
        kernels: kernels.as_ptr(),
    }));
    modules.push((file, table));
    Ok(table)
}

/// Imports the module and reads what each kernel declares.
fn declared(py: Python<'_>, file: &Path) -> PyResult<Vec<Declared>> {
    let found = host(py)?.getattr("load")?.call1((file,))?;
    let mut kernels = Vec::new();
    for kernel in found.try_iter()? {
        let (name, n_inputs, n_outputs, stateful, reset, is_class, object): (
            String,
            u32,
            u32,
            bool,
            bool,
            bool,
            Bound<'_, PyAny>,
        ) = kernel?.extract()?;
        let mut flags = KernelFlags::NONE;
        if stateful {
            flags = flags.union(KernelFlags::STATEFUL);
        }
        if reset {
            flags = flags.union(KernelFlags::RESET_ON_GAP);
        }
        kernels.push(Declared {
            // host.py refuses a name holding a NUL.
            name: CString::new(name).unwrap_or_default(),
            n_inputs,
            n_outputs,
            flags,
            is_class,
            object: object.unbind(),
        });
    }
    Ok(kernels)
}

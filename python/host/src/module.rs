//! A Python module's kernel table: the module imported once per file, each kernel it declares
//! given a slot ([`crate::slots`]), and the table kept for the life of the process (the
//! runtime may load the module again for another plan, and gets the same table).

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use pyo3::prelude::*;

use kplace_abi::export::KernelError;
use kplace_abi::{ABI_VERSION, Kernel, KernelFlags, Library};

use crate::glue::{describe_error, host};
use crate::kernel::Declared;
use crate::slots;

/// The tables of the modules imported so far, by file.
static MODULES: Mutex<Vec<(PathBuf, &'static Library)>> = Mutex::new(Vec::new());

/// The kernel table of the module at `path`, importing it on first use.
pub fn table(path: &Path) -> Result<*const Library, KernelError> {
    let file = path.canonicalize().map_err(|e| {
        KernelError::invalid(format!(
            "cannot read the Python module {}: {e}",
            path.display()
        ))
    })?;
    let mut modules = MODULES.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, table)) = modules.iter().find(|(p, _)| *p == file) {
        return Ok(*table);
    }
    let declared = Python::attach(|py| {
        declared(py, &file).map_err(|e| KernelError::invalid(describe_error(py, &e)))
    })?;
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

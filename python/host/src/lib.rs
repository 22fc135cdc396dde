//! `libkplace_python.so`: kernels written in Python, behind the same C ABI as a C kernel.
//!
//! A placement names a Python module as a stage's library (`library: fir.py`, docs/python.md);
//! the runtime loads this library and asks it for the module's table
//! ([`kplace_python_module_v1`]). The module is imported once per process, and each function
//! or class it marks with `__kplace_kernel__` (what `@kplace.kernel(...)` sets) becomes a
//! table entry whose `create`, `launch` and `destroy` call into Python with the GIL held.
//!
//! Guarantees: nothing but a status and its text crosses the ABI (every entry point catches
//! panics, and a Python exception becomes its type, message and innermost line); the arrays a
//! launch hands Python are views of the runtime's buffers, read-only for inputs, and a kernel
//! that keeps one past its launch fails that launch rather than reading a buffer the next frame
//! overwrites; what a kernel returns is checked against the output's element type and shape
//! before it is copied. At most [`slots::MAX_KERNELS`] Python kernels exist in one process.
//!
//! The library links no libpython: in a Python process (`kplace.Pipeline`) it runs in that
//! interpreter; in the `kplace` command the runtime first makes an interpreter's symbols global,
//! and [`interpreter::ensure`] starts it, with that interpreter's `sys.path`.

mod arrays;
mod glue;
mod interpreter;
mod kernel;
mod module;
mod slots;

use std::ffi::{CStr, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;

use kplace_abi::Library;
use kplace_abi::export::{KernelError, write_error};

/// Returns the kernel table of the Python module at `path` (a NUL-terminated UTF-8 path),
/// importing it on the first call for that file. `sys_path` holds `n_sys_path` directories,
/// the interpreter's `sys.path`, used only when this call starts the interpreter (the process
/// has none running). On failure returns null with the reason in `error`.
///
/// # Safety
/// `path` is a NUL-terminated string; `sys_path` holds `n_sys_path` of them (or is null when
/// that is 0); `error` is null or valid for `error_len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kplace_python_module_v1(
    path: *const c_char,
    sys_path: *const *const c_char,
    n_sys_path: u32,
    error: *mut c_char,
    error_len: usize,
) -> *const Library {
    let found = catch_unwind(AssertUnwindSafe(|| {
        if path.is_null() {
            return Err(KernelError::invalid("no module path given"));
        }
        // SAFETY: the caller passes a NUL-terminated path.
        let path = unsafe { CStr::from_ptr(path) };
        let path = path
            .to_str()
            .map(PathBuf::from)
            .map_err(|_| KernelError::invalid("the module path is not UTF-8"))?;
        let mut dirs = Vec::new();
        if n_sys_path > 0 && !sys_path.is_null() {
            // SAFETY: the caller passes n_sys_path NUL-terminated strings.
            for &dir in unsafe { std::slice::from_raw_parts(sys_path, n_sys_path as usize) } {
                if !dir.is_null() {
                    // SAFETY: as above.
                    dirs.push(
                        unsafe { CStr::from_ptr(dir) }
                            .to_string_lossy()
                            .into_owned(),
                    );
                }
            }
        }
        interpreter::ensure(&dirs)?;
        module::table(&path)
    }));
    let message = match found {
        Ok(Ok(table)) => return table,
        Ok(Err(error)) => error.message,
        Err(_) => "the Python host panicked while loading the module".to_string(),
    };
    // SAFETY: the caller's buffer contract.
    unsafe { write_error(error, error_len, &message) };
    std::ptr::null()
}

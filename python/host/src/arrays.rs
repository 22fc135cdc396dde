//! The runtime's buffers as Python memoryviews, which host.py views as NumPy arrays without a
//! copy: read-only for a launch's inputs, writable for its outputs and carry.

use std::ffi::{c_char, c_int, c_void};
use std::ptr::NonNull;

use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;

/// `PyBUF_READ` and `PyBUF_WRITE`, `PyMemoryView_FromMemory`'s flags in the stable ABI since
/// Python 3.3 (pyo3's bindings declare them only for some versions).
const PYBUF_READ: c_int = 0x100;
const PYBUF_WRITE: c_int = 0x200;

/// Whether Python may write through a view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// A launch's input.
    Read,
    /// A launch's output or carry.
    Write,
}

/// A memoryview of `bytes` bytes at `data`.
///
/// # Safety
/// `data` must be valid for `bytes` bytes of reads (and of writes with [`Access::Write`]) for
/// as long as the view is not released; host.py releases every view before its launch returns.
pub unsafe fn view<'py>(
    py: Python<'py>,
    data: *mut c_void,
    bytes: u64,
    access: Access,
) -> PyResult<Bound<'py, PyAny>> {
    let len = isize::try_from(bytes)
        .map_err(|_| PyValueError::new_err(format!("a buffer of {bytes} bytes is too large")))?;
    let data = match data.is_null() {
        // An empty buffer may have no address; the view then never reads one.
        true if len == 0 => NonNull::<c_char>::dangling().as_ptr(),
        true => {
            return Err(PyValueError::new_err(format!(
                "a buffer of {bytes} bytes has no address"
            )));
        }
        false => data.cast::<c_char>(),
    };
    let flags = match access {
        Access::Read => PYBUF_READ,
        Access::Write => PYBUF_WRITE,
    };
    // SAFETY: the caller guarantees the memory for the view's life; the GIL is held (`py`),
    // and the new reference is owned by the returned value.
    unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyMemoryView_FromMemory(data, len, flags)) }
}

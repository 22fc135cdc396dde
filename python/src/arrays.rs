//! A tensor's frames as NumPy arrays: the element type and frame shape each tensor is stored
//! as (`kplace::model::npy::layout`, the same as `kplace run --write-sinks` writes: `cf32` is
//! `complex64`, `ci16` is `int16` with a last axis of 2 for I and Q, ...), the checks an input
//! array passes before its bytes are read in place, and the output arrays sinks are written
//! into.
//!
//! Guarantees: an input is read only when it is a C-contiguous `numpy.ndarray` of the tensor's
//! exact element type (byte order included) and of the shape of one frame or of a stack of
//! frames; anything else is refused, naming the expected element type and shape, never
//! converted or copied. A non-contiguous array is refused too (`numpy.ascontiguousarray`
//! makes the copy where the caller wants one).

use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use kplace::model::graph::TensorSpec;

/// How one tensor's frame is laid out as a NumPy array.
pub struct Layout {
    /// The tensor's name in the graph.
    pub name: String,
    /// kplace's element type (`cf32`).
    pub dtype: &'static str,
    /// NumPy's type string (`<c8`).
    pub descr: &'static str,
    /// One frame's shape as an array.
    pub shape: Vec<usize>,
    /// One frame's bytes.
    pub bytes: usize,
}

impl Layout {
    /// The layout of `tensor`'s frames.
    pub fn of(tensor: &TensorSpec) -> Layout {
        let (descr, shape) = kplace::model::npy::layout(tensor.dtype, &tensor.shape, tensor.bytes);
        Layout {
            name: tensor.name.clone(),
            dtype: tensor.dtype.name().unwrap_or("bytes"),
            descr,
            shape: shape.iter().map(|&d| d as usize).collect(),
            bytes: tensor.bytes as usize,
        }
    }

    /// `(4, 64, 8)`, as Python writes a shape.
    pub fn shape_text(&self) -> String {
        shape_text(&self.shape)
    }

    /// NumPy's name of the element type (`complex64`).
    pub fn numpy_name(&self, py: Python<'_>) -> PyResult<String> {
        dtype(py, self.descr)?.getattr("name")?.extract()
    }

    /// `frames` frames of this tensor as a new array (one frame without the leading axis when
    /// `stacked` is false), and where its bytes are.
    pub fn empty<'py>(
        &self,
        py: Python<'py>,
        frames: usize,
        stacked: bool,
    ) -> PyResult<(Bound<'py, PyAny>, *mut u8)> {
        let mut shape = self.shape.clone();
        if stacked {
            shape.insert(0, frames);
        }
        let array = py
            .import("numpy")?
            .getattr("empty")?
            .call1((PyTuple::new(py, shape)?, dtype(py, self.descr)?))?;
        let untyped = array.cast::<PyUntypedArray>()?;
        let nbytes = untyped.shape().iter().product::<usize>() * untyped.dtype().itemsize();
        if nbytes != frames * self.bytes {
            return Err(PyValueError::new_err(format!(
                "tensor {}: an array of {nbytes} bytes for {frames} frames of {} bytes",
                self.name, self.bytes
            )));
        }
        // SAFETY: `untyped` is a live array numpy just made, owning its data, so the data
        // pointer of its object is valid for its bytes.
        let data = unsafe { (*untyped.as_array_ptr()).fields.data.cast::<u8>() };
        Ok((array, data))
    }
}

/// A frame batch checked against the source's layout: where its bytes are, how many frames,
/// and whether it was a stack (a leading frames axis) or one frame.
pub struct Frames {
    /// The first byte.
    pub data: *const u8,
    /// Frames in it.
    pub frames: usize,
    /// Whether the array had a leading axis of frames.
    pub stacked: bool,
}

/// Checks `array` against the source's `layout` and says where its frames are.
pub fn frames(py: Python<'_>, array: &Bound<'_, PyAny>, layout: &Layout) -> PyResult<Frames> {
    let expected = || -> PyResult<String> {
        Ok(format!(
            "source tensor {} ({}) takes {} arrays of shape {} for one frame or (n, {} for n frames",
            layout.name,
            layout.dtype,
            layout.numpy_name(py)?,
            layout.shape_text(),
            layout.shape_text().trim_start_matches('(')
        ))
    };
    let Ok(untyped) = array.cast::<PyUntypedArray>() else {
        return Err(PyTypeError::new_err(format!(
            "frames: a {}, not a numpy.ndarray: {}",
            array.get_type().name()?,
            expected()?
        )));
    };
    let descr: String = untyped.dtype().getattr("str")?.extract()?;
    if descr != layout.descr {
        let name: String = untyped.dtype().getattr("name")?.extract()?;
        return Err(PyTypeError::new_err(format!(
            "frames: element type {name} ('{descr}'), but {} ('{}'; convert with .astype)",
            expected()?,
            layout.descr
        )));
    }
    let shape = untyped.shape();
    let stacked = match shape.len() {
        n if n == layout.shape.len() && shape == layout.shape.as_slice() => false,
        n if n == layout.shape.len() + 1 && shape[1..] == layout.shape[..] => true,
        _ => {
            return Err(PyValueError::new_err(format!(
                "frames: shape {}, but {}",
                shape_text(shape),
                expected()?
            )));
        }
    };
    if !untyped.is_c_contiguous() {
        return Err(PyValueError::new_err(format!(
            "frames: the array is not C-contiguous (strides {:?}): kplace reads frames in place; pass numpy.ascontiguousarray(frames), a contiguous copy",
            untyped.strides()
        )));
    }
    let frames = if stacked { shape[0] } else { 1 };
    // SAFETY: `untyped` is a live array, borrowed for this call, whose data pointer is valid
    // for its bytes (C-contiguous, of the layout's element type and shape: checked above).
    let data = unsafe { (*untyped.as_array_ptr()).fields.data.cast::<u8>() };
    Ok(Frames {
        data: data.cast_const(),
        frames,
        stacked,
    })
}

/// `numpy.dtype(descr)`.
fn dtype<'py>(py: Python<'py>, descr: &str) -> PyResult<Bound<'py, PyAny>> {
    py.import("numpy")?.getattr("dtype")?.call1((descr,))
}

/// A shape as Python writes a tuple: `(4, 64, 8)`, `(1024,)`.
fn shape_text(shape: &[usize]) -> String {
    match shape {
        [one] => format!("({one},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

//! How a tensor's bytes look as a NumPy array: the element type and shape kplace writes them
//! as (`.npy` files, `kplace run --write-sinks`), reads them as (`{npy: FILE}` constants), and
//! hands them to a kernel written in Python as.

use crate::{Dtype, Scalar};

/// The `.npy` element type and shape that hold a tensor of `dtype` and `shape` (`bytes` long):
/// NumPy's own type where it has one (`<f4`, `<c8`, `|i1`, `<f2`, ...), a complex integer or
/// half as its parts along a last axis of 2, bfloat16 as its bits (`<u2`), and a record list
/// as its bytes (`|u1`, one axis of `bytes`).
pub fn layout(dtype: Dtype, shape: &[u64], bytes: u64) -> (&'static str, Vec<u64>) {
    let Some(element) = dtype.element() else {
        return ("|u1", vec![bytes]);
    };
    let mut shape = shape.to_vec();
    let descr = match (element.scalar, element.complex) {
        (Scalar::F32, true) => "<c8",
        (Scalar::F64, true) => "<c16",
        (scalar, complex) => {
            if complex {
                shape.push(2);
            }
            match scalar {
                Scalar::I8 => "|i1",
                Scalar::I16 => "<i2",
                Scalar::I32 => "<i4",
                Scalar::F16 => "<f2",
                // NumPy has no bfloat16: the values' bits, as ml_dtypes.bfloat16 views them.
                Scalar::BF16 => "<u2",
                Scalar::F32 => "<f4",
                Scalar::F64 => "<f8",
            }
        }
    };
    (descr, shape)
}

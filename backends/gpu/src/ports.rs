//! Checked descriptors and tensors for kernels whose ports live in device memory.
//!
//! `create` validates each port's descriptor once ([`device_port`]); `launch` then checks that
//! the tensors it receives still match ([`launch_port`]) before enqueueing work on their
//! addresses, so a runtime bug becomes an error message rather than a device fault.

use kplace_abi::export::{Config, KernelError};
use kplace_abi::{Dtype, MemorySpace, Tensor, TensorDesc};

/// Describes a descriptor for messages: `cf32 [1024, 128]`.
pub(crate) fn describe(desc: &TensorDesc) -> String {
    format!(
        "{} {:?}",
        desc.dtype.name().unwrap_or("(unknown dtype)"),
        desc.dims()
    )
}

/// Checks port `index` of `ports` (`what`, e.g. "input 0") at create time: `dtype`, device
/// memory, as many dimensions as `layout` names (none empty, except a detection list's) and
/// enough bytes.
pub(crate) fn device_port(
    ports: &[TensorDesc],
    index: usize,
    what: &str,
    dtype: Dtype,
    layout: &str,
) -> Result<TensorDesc, KernelError> {
    let rank = layout.split(',').count();
    let desc = Config::expect(ports, index, what, dtype, None)?;
    let dims = desc.dims();
    if dims.len() != rank || (dtype != Dtype::DETECTIONS && dims.contains(&0)) {
        return Err(KernelError::invalid(format!(
            "{what} must be {} {layout} without empty dimensions, got {}",
            dtype.name().unwrap_or("?"),
            describe(&desc)
        )));
    }
    if desc.memory != MemorySpace::DEVICE {
        return Err(KernelError::invalid(format!(
            "{what} must be in device memory, got {}",
            desc.memory.name().unwrap_or("an unknown memory space")
        )));
    }
    let needed = dtype.bytes_for(dims).ok_or_else(|| {
        KernelError::invalid(format!(
            "{what}: {} is too large to address",
            describe(&desc)
        ))
    })?;
    if desc.bytes < needed {
        return Err(KernelError::invalid(format!(
            "{what}: {} needs {needed} bytes, the descriptor says {}",
            describe(&desc),
            desc.bytes
        )));
    }
    Ok(desc)
}

/// Fails unless a port's dimensions are exactly `dims`.
pub(crate) fn expect_dims(
    desc: &TensorDesc,
    what: &str,
    dims: &[u64],
    layout: &str,
) -> Result<(), KernelError> {
    if desc.dims() == dims {
        Ok(())
    } else {
        Err(KernelError::invalid(format!(
            "{what} must be {} {dims:?} ({layout}), got {}",
            desc.dtype.name().unwrap_or("?"),
            describe(desc)
        )))
    }
}

/// Fails unless a map of `rows` x `cols` elements is small enough for the kernels' 32-bit
/// element counts (one kernel argument, and a detection's bins, are 32-bit).
pub(crate) fn check_cells(what: &str, rows: u64, cols: u64) -> Result<(), KernelError> {
    match rows.checked_mul(cols) {
        Some(cells) if cells <= u64::from(u32::MAX) => Ok(()),
        _ => Err(KernelError::invalid(format!(
            "{what}: [{rows}, {cols}] has more than 2^32 - 1 elements, more than these kernels \
             index"
        ))),
    }
}

/// Checks a launch tensor against the descriptor `create` accepted and returns its device
/// address.
pub(crate) fn launch_port(
    tensor: Result<&Tensor, KernelError>,
    what: &str,
    expected: &TensorDesc,
) -> Result<u64, KernelError> {
    let tensor = tensor?;
    let desc = &tensor.desc;
    if desc.dtype != expected.dtype || desc.dims() != expected.dims() {
        return Err(KernelError::invalid(format!(
            "{what} was created as {} but launched as {}",
            describe(expected),
            describe(desc)
        )));
    }
    if desc.memory != MemorySpace::DEVICE {
        return Err(KernelError::invalid(format!(
            "{what} is not in device memory"
        )));
    }
    if desc.bytes
        < expected
            .dtype
            .bytes_for(expected.dims())
            .unwrap_or(u64::MAX)
    {
        return Err(KernelError::invalid(format!(
            "{what} has {} bytes, too few for {}",
            desc.bytes,
            describe(desc)
        )));
    }
    if tensor.data.is_null() {
        return Err(KernelError::invalid(format!("{what} has no data")));
    }
    // Every kernel reads its ports with 8-byte (cf32) or 4-byte accesses; the ABI promises 64.
    if !(tensor.data as usize).is_multiple_of(8) {
        return Err(KernelError::invalid(format!(
            "{what} data at {:p} is misaligned",
            tensor.data
        )));
    }
    Ok(tensor.data as u64)
}

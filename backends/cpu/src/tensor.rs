//! Checked access to the tensors and workspace a kernel is given.
//!
//! `create` validates each port's descriptor once ([`host_port`]); `launch` then checks that
//! the tensors it receives still match those descriptors ([`launch_port`]) before it touches
//! their bytes, so a runtime bug becomes an error message rather than memory corruption.

use kplace_abi::export::{Config, KernelError, Launch};
use kplace_abi::{Dtype, MemorySpace, Tensor, TensorDesc};

/// The alignment the ABI promises for tensor data and workspaces.
pub(crate) const ABI_ALIGN: usize = 64;

/// Describes a descriptor for messages: `cf32 [1024, 128]`.
pub(crate) fn describe(desc: &TensorDesc) -> String {
    format!(
        "{} {:?}",
        desc.dtype.name().unwrap_or("(unknown dtype)"),
        desc.dims()
    )
}

/// Checks port `index` of `ports` (`what`, e.g. "input 0") at create time: `dtype`, host
/// memory, `rank` dimensions (`layout` names them for the message; only a detection list
/// may be empty) and enough bytes.
pub(crate) fn host_port(
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
    if desc.memory != MemorySpace::HOST {
        return Err(KernelError::invalid(format!(
            "{what} must be in host memory, got {}",
            desc.memory.name().unwrap_or("an unknown memory space")
        )));
    }
    let needed = dtype.bytes_for(dims).ok_or_else(|| {
        KernelError::invalid(format!(
            "{what}: {} is too large to address",
            describe(&desc)
        ))
    })?;
    if desc.bytes < needed || usize::try_from(desc.bytes).is_err() {
        return Err(KernelError::invalid(format!(
            "{what}: {} needs {needed} bytes, the descriptor says {}",
            describe(&desc),
            desc.bytes
        )));
    }
    Ok(desc)
}

/// Fails unless a `rank`-dimensional port's dimensions are exactly `dims`.
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

/// Checks a launch tensor against the descriptor `create` accepted and returns it.
pub(crate) fn launch_port<'a>(
    tensor: Result<&'a Tensor, KernelError>,
    what: &str,
    expected: &TensorDesc,
) -> Result<&'a Tensor, KernelError> {
    let tensor = tensor?;
    let desc = &tensor.desc;
    if desc.dtype != expected.dtype || desc.dims() != expected.dims() {
        return Err(KernelError::invalid(format!(
            "{what} was created as {} but launched as {}",
            describe(expected),
            describe(desc)
        )));
    }
    if desc.memory != MemorySpace::HOST {
        return Err(KernelError::invalid(format!(
            "{what} is not in host memory"
        )));
    }
    // The expected size was validated (and fits usize) at create time.
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
    if !(tensor.data as usize).is_multiple_of(align_of::<u32>()) {
        return Err(KernelError::invalid(format!(
            "{what} data at {:p} is misaligned",
            tensor.data
        )));
    }
    Ok(tensor)
}

/// The launch's workspace as `len` values of `T`.
///
/// # Safety
/// The workspace must be valid for reads and writes of `workspace_bytes` bytes and used by
/// no other launch while the slice lives: the ABI gives each concurrent launch its own.
#[allow(clippy::mut_from_ref)]
pub(crate) unsafe fn workspace<'a, T: Copy>(
    launch: &Launch<'a>,
    len: usize,
) -> Result<&'a mut [T], KernelError> {
    let bytes = len * size_of::<T>();
    let ptr = launch.workspace();
    if (launch.workspace_bytes() as u128) < bytes as u128 {
        return Err(KernelError::invalid(format!(
            "workspace of {} bytes is smaller than the {bytes} the kernel needs",
            launch.workspace_bytes()
        )));
    }
    if len == 0 {
        return Ok(&mut []);
    }
    if ptr.is_null() || !(ptr as usize).is_multiple_of(ABI_ALIGN) {
        return Err(KernelError::invalid(format!(
            "workspace at {ptr:p} is null or not {ABI_ALIGN}-byte aligned"
        )));
    }
    // SAFETY: non-null, aligned beyond T's alignment (T is a primitive or a pair of them),
    // large enough, and exclusive to this launch per the caller's contract. The bytes come
    // from the runtime through the ABI and every T used here is plain old data, for which
    // any bit pattern is a valid value; kernels write before they read.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr.cast::<T>(), len) })
}

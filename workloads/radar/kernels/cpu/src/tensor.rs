//! The host side of port checks, and checked access to the workspace a kernel is given.
//!
//! The port checks themselves are the contract's (`kplace_abi::export::ports`): `create` validates
//! each port's descriptor once and `launch` checks that the tensors it receives still match,
//! before it touches their bytes, so a runtime bug becomes an error message rather than memory
//! corruption. [`PORTS`] says what this library's kernels need: host memory, and data aligned
//! for the 4-byte accesses every kernel makes.

use kplace_abi::MemorySpace;
use kplace_abi::export::ports::Ports;
use kplace_abi::export::{KernelError, Launch};

/// The alignment the ABI promises for tensor data and workspaces.
pub(crate) const ABI_ALIGN: usize = 64;

/// What this library's kernels require of their ports.
pub(crate) const PORTS: Ports = Ports {
    memory: MemorySpace::HOST,
    data_align: align_of::<u32>(),
    u32_cells: false,
};

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

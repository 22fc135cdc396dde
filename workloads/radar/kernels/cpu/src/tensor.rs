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

/// What this library's kernels require of their ports.
pub(crate) const PORTS: Ports = Ports {
    memory: MemorySpace::HOST,
    data_align: align_of::<u32>(),
    u32_cells: false,
};

/// The launch's workspace as `len` values of `T` ([`Launch::workspace_slice`]).
///
/// # Safety
/// As [`Launch::workspace_slice`]: the workspace is this launch's alone, and `T` is plain old
/// data (every kernel here writes its workspace before reading it).
#[allow(clippy::mut_from_ref)]
pub(crate) unsafe fn workspace<'a, T: Copy>(
    launch: &Launch<'a>,
    len: usize,
) -> Result<&'a mut [T], KernelError> {
    // SAFETY: forwarded from the caller's contract.
    unsafe { launch.workspace_slice(len) }
}

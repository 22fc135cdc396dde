//! The device side of port checks.
//!
//! The checks themselves are the contract's (`kplace_abi::export::ports`): `create` validates each
//! port's descriptor once and `launch` checks that the tensors it receives still match
//! ([`launch_address`]) before enqueueing work on their addresses, so a runtime bug becomes an
//! error message rather than a device fault. [`PORTS`] says what this library's kernels need.

use kplace_abi::export::KernelError;
use kplace_abi::export::ports::Ports;
use kplace_abi::{MemorySpace, Tensor, TensorDesc};

/// What this library's kernels require of their ports: device memory; data aligned for the
/// 8-byte (cf32) and 4-byte accesses every kernel makes (the ABI promises 64); and maps of at
/// most `2^32 - 1` elements, since a kernel argument (and a detection's bins) counts cells in
/// 32 bits.
pub(crate) const PORTS: Ports = Ports {
    memory: MemorySpace::DEVICE,
    data_align: 8,
    u32_cells: true,
};

/// Checks a launch tensor against the descriptor `create` accepted and returns its device
/// address.
pub(crate) fn launch_address(
    tensor: Result<&Tensor, KernelError>,
    what: &str,
    expected: &TensorDesc,
) -> Result<u64, KernelError> {
    Ok(PORTS.launch(tensor, what, expected)?.data as u64)
}

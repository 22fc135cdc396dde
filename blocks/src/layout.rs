//! Host views of a launch's tensors, for the CPU blocks.

use std::ops::Range;

use kplace_abi::export::KernelError;
use kplace_abi::export::ports::Ports;
use kplace_abi::{MemorySpace, Tensor};

/// What the CPU blocks require of their ports: host memory, data aligned for 4-byte accesses.
pub(crate) const PORTS: Ports = Ports {
    memory: MemorySpace::HOST,
    data_align: align_of::<f32>(),
    u32_cells: false,
};

/// The tile's `elements` of the launch's input as `T` values and of its output as `U`
/// values, `scalars` of each per element.
///
/// # Safety
/// No launch may write the tile's part of the input while the slices live, and no other launch
/// may touch the tile's part of the output: the runtime's rule for tiles of one stage.
#[allow(clippy::mut_from_ref)]
pub(crate) unsafe fn tile_slices<'a, T: Copy, U: Copy>(
    input: &'a Tensor,
    output: &'a Tensor,
    elements: Range<usize>,
    (in_scalars, out_scalars): (usize, usize),
) -> Result<(&'a [T], &'a mut [U]), KernelError> {
    let (start, end) = (elements.start, elements.end);
    // SAFETY: the tensors were checked against their descriptors; the caller promises the
    // access rules, and only the tile's values are borrowed.
    unsafe {
        Ok((
            input.host_range::<T>(start * in_scalars..end * in_scalars)?,
            output.host_range_mut::<U>(start * out_scalars..end * out_scalars)?,
        ))
    }
}

//! Carving the runtime's workspace into aligned regions.
//!
//! The ABI promises a 64-byte-aligned workspace; cuFFT's work area and the kernels' arrays
//! are better 256-byte aligned (cudaMalloc's alignment, which cuFFT assumes for its fastest
//! paths). So a kernel asks for [`Layout::bytes`]: its regions, each rounded up to 256 bytes,
//! plus the slack to align the first, and [`Layout::carve`] cuts them at launch. A layout is a
//! fixed-size array, so carving at launch allocates nothing.

use kplace_abi::export::KernelError;

/// Alignment of every region.
pub const REGION_ALIGN: u64 = 256;
/// Alignment the ABI promises for the workspace itself.
const ABI_ALIGN: u64 = 64;

/// The sizes of a workspace's `N` regions, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout<const N: usize> {
    regions: [u64; N],
}

impl<const N: usize> Layout<N> {
    /// A layout of regions of these sizes in bytes.
    pub fn new(regions: [u64; N]) -> Self {
        Self { regions }
    }

    /// Workspace bytes the layout needs from a 64-byte-aligned base.
    pub fn bytes(&self) -> u64 {
        REGION_ALIGN - ABI_ALIGN
            + self
                .regions
                .iter()
                .map(|r| r.next_multiple_of(REGION_ALIGN))
                .sum::<u64>()
    }

    /// The address of every region in a workspace at `base` of `bytes` bytes.
    pub fn carve(&self, base: u64, bytes: u64) -> Result<[u64; N], KernelError> {
        if base == 0 && self.bytes() > 0 {
            return Err(KernelError::invalid("the workspace is null"));
        }
        if !base.is_multiple_of(ABI_ALIGN) {
            return Err(KernelError::invalid(format!(
                "workspace at {base:#x} is not {ABI_ALIGN}-byte aligned"
            )));
        }
        if bytes < self.bytes() {
            return Err(KernelError::invalid(format!(
                "workspace of {bytes} bytes is smaller than the {} the kernel needs",
                self.bytes()
            )));
        }
        let mut next = base.next_multiple_of(REGION_ALIGN);
        Ok(self.regions.map(|r| {
            let at = next;
            next += r.next_multiple_of(REGION_ALIGN);
            at
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_are_aligned_and_fit_from_any_abi_aligned_base() {
        let layout = Layout::new([100, 0, 4096, 1]);
        for base in (0x1000..0x1100).step_by(64) {
            let regions = layout.carve(base, layout.bytes()).expect("fits");
            let end = base + layout.bytes();
            for (at, size) in regions.iter().zip([100, 0, 4096, 1]) {
                assert_eq!(at % REGION_ALIGN, 0);
                assert!(at + size <= end);
            }
            assert!(regions.windows(2).all(|w| w[0] <= w[1]));
        }
        assert!(layout.carve(0x1000, layout.bytes() - 1).is_err());
        assert!(layout.carve(0x1010, layout.bytes()).is_err());
    }
}

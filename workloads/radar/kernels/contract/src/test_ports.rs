//! Port descriptions for the tests of [`crate::config`]: the CPU library's ports, the GPU
//! library's, and a tensor description of any shape.

use kplace_abi::{Dtype, MemorySpace, TensorDesc};

use kplace_abi::export::ports::Ports;

/// The CPU library's ports: host memory, 4-byte aligned.
pub const HOST: Ports = Ports {
    memory: MemorySpace::HOST,
    data_align: 4,
    u32_cells: false,
};

/// The GPU library's ports: device memory, 8-byte aligned, cell counts within 32 bits.
pub const DEVICE: Ports = Ports {
    memory: MemorySpace::DEVICE,
    data_align: 8,
    u32_cells: true,
};

/// A tensor of `dtype` with `dims` in `memory`.
pub fn desc(memory: MemorySpace, dtype: Dtype, dims: &[u64]) -> TensorDesc {
    TensorDesc::new(dtype, memory, dims).expect("a describable tensor")
}

//! A real CUDA device through cudarc's driver API (being written on another branch; until it
//! lands, no device is ever usable).

use std::sync::Arc;

use super::{Gpu, GpuError, GpuProvider};

/// The machine's CUDA devices.
#[derive(Debug, Default)]
pub struct CudaProvider;

impl CudaProvider {
    /// The process-wide provider.
    pub fn global() -> &'static CudaProvider {
        static PROVIDER: CudaProvider = CudaProvider;
        &PROVIDER
    }
}

impl GpuProvider for CudaProvider {
    fn open(&self, ordinal: u32) -> Result<Arc<dyn Gpu>, GpuError> {
        Err(GpuError::new(
            format!("gpu:{ordinal}"),
            "open",
            "no CUDA driver found",
        ))
    }
}

//! Whether this machine can run the GPU kernels.

use kplace_abi::export::KernelError;

use crate::{cufft, driver, nvrtc};

/// Checks that everything the kernels need at run time is present: libcuda with at least one
/// device, libcufft and libnvrtc. The error says what is missing.
pub fn probe() -> Result<(), KernelError> {
    driver::probe()?;
    let count = cudarc::driver::result::device::get_count()
        .map_err(|e| driver::driver_error("cuDeviceGetCount", e))?;
    if count == 0 {
        return Err(KernelError::backend("the CUDA driver reports no device"));
    }
    cufft::probe()?;
    nvrtc::probe()
}

//! Test support for `kplace-gpu`: its CUDA C kernels compiled as C++ and run on the host.
//!
//! The build script compiles every `backends/gpu/kernels/*.cu` with a shim header that
//! defines `__global__`, `__device__`, `blockIdx`, `threadIdx`, `blockDim`, `gridDim` and
//! the few intrinsics the kernels use. [`launch`] then runs a kernel's grid as nested loops,
//! one simulated thread after another, with arguments passed as `cuLaunchKernel` takes them.
//! That is a faithful schedule for kernels without shared memory or barriers, which is how the
//! kernels are written. Addresses are host addresses.
//!
//! This is what lets CI, which has no GPU, check every kernel's arithmetic and the library's
//! whole launch sequence.

use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::fmt;

unsafe extern "C" {
    fn kp_hostsim_launch(
        name: *const c_char,
        grid: *const c_uint,
        block: *const c_uint,
        params: *mut *mut c_void,
        n_params: c_uint,
    ) -> c_int;
    fn kp_hostsim_kernel_count() -> c_uint;
    fn kp_hostsim_kernel_name(i: c_uint) -> *const c_char;
}

/// Why a simulated launch did not run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LaunchError {
    /// No kernel of that name in the sources.
    UnknownKernel(String),
    /// The kernel takes a different number of arguments.
    WrongArgumentCount(String, usize),
}

impl fmt::Display for LaunchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownKernel(name) => write!(f, "host simulator: no kernel {name}"),
            Self::WrongArgumentCount(name, n) => {
                write!(f, "host simulator: {name} does not take {n} arguments")
            }
        }
    }
}

impl std::error::Error for LaunchError {}

/// The names of every kernel compiled in.
pub fn kernels() -> Vec<&'static CStr> {
    // SAFETY: plain queries of a static table; names are static NUL-terminated strings.
    unsafe {
        (0..kp_hostsim_kernel_count())
            .map(|i| CStr::from_ptr(kp_hostsim_kernel_name(i)))
            .collect()
    }
}

/// Runs kernel `name` over `grid` blocks of `block` threads, on this thread.
///
/// # Safety
/// `params[i]` must point at a value of exactly the type of the kernel's parameter `i`, and
/// every address among them must be valid for what the kernel reads and writes.
pub unsafe fn launch(
    name: &CStr,
    grid: [u32; 3],
    block: [u32; 3],
    params: &mut [*mut c_void],
) -> Result<(), LaunchError> {
    let n = params.len();
    // SAFETY: forwarded from the caller; the arrays hold three values each.
    let status = unsafe {
        kp_hostsim_launch(
            name.as_ptr(),
            grid.as_ptr(),
            block.as_ptr(),
            params.as_mut_ptr(),
            n as c_uint,
        )
    };
    let name = || name.to_string_lossy().into_owned();
    match status {
        0 => Ok(()),
        1 => Err(LaunchError::UnknownKernel(name())),
        _ => Err(LaunchError::WrongArgumentCount(name(), n)),
    }
}

//! Test support for the Rust GPU kernel libraries: their CUDA C kernels compiled as C++ and
//! run on the host.
//!
//! The build script compiles every `*.cu` of the radar's GPU library
//! (`workloads/radar/kernels/gpu/kernels/`) and of the block library's
//! (`blocks/gpu/kernels/`) with a shim header that
//! defines `__global__`, `__device__`, `__shared__`, `blockIdx`, `threadIdx`, `blockDim`,
//! `gridDim`, `__syncthreads`, `atomicAdd` and the few intrinsics the kernels use. [`launch`]
//! then runs a kernel's grid as nested loops, with arguments passed as `cuLaunchKernel` takes
//! them:
//!
//! - a kernel without barriers runs one simulated thread after another, a faithful schedule
//!   for threads that share nothing but atomics;
//! - a kernel whose source calls `__syncthreads` ([`has_barriers`]) runs block by block, each
//!   thread of the block a fiber that yields at every barrier, so no thread passes a barrier
//!   before all have reached it; `__shared__` arrays are shared by the block's fibers.
//!
//! Addresses are host addresses. [`HostQueue`] is the [`kplace_cudakit::queue::Queue`] that
//! runs a kernel plan's launch sequence here, with rustfft standing in for cuFFT.
//!
//! This is what lets CI, which has no GPU, check every kernel's arithmetic and each library's
//! whole launch sequence.

mod queue;

pub use queue::HostQueue;

use std::collections::BTreeSet;
use std::ffi::{CStr, CString, c_char, c_int, c_uint, c_void};
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
    fn kp_hostsim_kernel_has_barriers(i: c_uint) -> c_int;
}

/// Why a simulated launch did not run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LaunchError {
    /// No kernel of that name in the sources.
    UnknownKernel(String),
    /// The kernel takes a different number of arguments.
    WrongArgumentCount(String, usize),
    /// The kernel reached `__syncthreads` though its source was not seen to call it (through
    /// a helper function, say), so it ran on a schedule that ignores barriers.
    StrayBarrier(String),
    /// The fibers of a block with barriers could not be made.
    NoFibers(String),
}

impl fmt::Display for LaunchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownKernel(name) => write!(f, "host simulator: no kernel {name}"),
            Self::WrongArgumentCount(name, n) => {
                write!(f, "host simulator: {name} does not take {n} arguments")
            }
            Self::StrayBarrier(name) => write!(
                f,
                "host simulator: {name} called __syncthreads outside its own body; call it in \
                 the kernel itself so the build script marks it to run with barriers"
            ),
            Self::NoFibers(name) => write!(
                f,
                "host simulator: could not make the fibers (stacks or contexts) for a block of \
                 {name}"
            ),
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

/// Whether kernel `name` runs its blocks as fibers with barriers (`None` if unknown).
pub fn has_barriers(name: &CStr) -> Option<bool> {
    // SAFETY: plain queries of a static table.
    unsafe {
        (0..kp_hostsim_kernel_count())
            .find(|&i| CStr::from_ptr(kp_hostsim_kernel_name(i)) == name)
            .map(|i| kp_hostsim_kernel_has_barriers(i) != 0)
    }
}

/// How the kernels compiled into the simulator differ from a library's listing.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LibraryMismatch {
    /// The simulator compiled other kernels (of the library's prefix) than the library lists.
    #[error("the simulator compiled {simulated:?}, the library lists {library:?}")]
    Kernels {
        /// The kernels compiled in, of the library's prefix.
        simulated: BTreeSet<String>,
        /// The library's functions.
        library: BTreeSet<String>,
    },
    /// A kernel runs with barriers where it calls no `__syncthreads`, or without where it does.
    #[error("{kernel:?}: the simulator runs it {} barriers", if *.calls_syncthreads { "without" } else { "with" })]
    Barriers {
        /// The kernel.
        kernel: CString,
        /// Whether the library says it calls `__syncthreads`.
        calls_syncthreads: bool,
    },
}

/// Checks that the kernels compiled in whose names start with `prefix` (a library's own prefix)
/// are exactly library `F`'s functions, and that each runs its blocks with barriers exactly
/// when `barriers` says it calls `__syncthreads`: what each library's tests assert.
pub fn check_library<F: kplace_cudakit::source::Function>(
    prefix: &str,
    barriers: impl Fn(F) -> bool,
) -> Result<(), LibraryMismatch> {
    let simulated: BTreeSet<String> = kernels()
        .iter()
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix))
        .collect();
    let library: BTreeSet<String> = F::ALL
        .iter()
        .map(|f| f.name().to_string_lossy().into_owned())
        .collect();
    if simulated != library {
        return Err(LibraryMismatch::Kernels { simulated, library });
    }
    match F::ALL
        .iter()
        .find(|&&f| has_barriers(f.name()) != Some(barriers(f)))
    {
        Some(f) => Err(LibraryMismatch::Barriers {
            kernel: f.name().to_owned(),
            calls_syncthreads: barriers(*f),
        }),
        None => Ok(()),
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
        2 => Err(LaunchError::WrongArgumentCount(name(), n)),
        3 => Err(LaunchError::StrayBarrier(name())),
        _ => Err(LaunchError::NoFibers(name())),
    }
}

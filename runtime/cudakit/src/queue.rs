//! Where a kernel's launch sequence goes: a CUDA stream, or the host simulator in tests.
//!
//! Each kernel's plan computes its grids, its workspace layout and its kernel arguments once,
//! in code that knows nothing of CUDA, and hands every step to a [`Queue`]. A library's
//! queue, [`CudaQueue`], enqueues on the runtime's stream; the tests' queue
//! (`kplace-cuda-hostsim`) runs the same CUDA C, compiled as C++, on the host, with rustfft
//! standing in for cuFFT. So the launch geometry, the tile offsets and the workspace
//! carving that run on a GPU are exactly the ones tested without one.

use std::ffi::c_void;

use cudarc::driver::result;
use cudarc::driver::sys::CUstream;
use kplace_abi::export::KernelError;

use crate::cufft::Fft;
use crate::driver::Check;
use crate::fft_shape::FftShape;
use crate::program::Functions;
use crate::source::Function;

/// Most blocks along grid axis x (CUDA's limit).
pub const MAX_GRID_X: u64 = (1 << 31) - 1;
/// Most blocks along grid axes y and z.
pub const MAX_GRID_YZ: u64 = 65_535;

/// A launch's geometry: blocks per grid and threads per block, x then y then z.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grid {
    /// Blocks along x, y, z.
    pub blocks: [u32; 3],
    /// Threads per block along x, y, z.
    pub threads: [u32; 3],
}

impl Grid {
    /// Enough blocks of `threads` threads along x to give `items` threads (at least one block).
    pub fn linear(items: u64, threads: u32) -> Result<Self, KernelError> {
        Self::planar([items, 1], [threads, 1])
    }

    /// Enough blocks of `threads` along x and y to cover `items` along each.
    pub fn planar(items: [u64; 2], threads: [u32; 2]) -> Result<Self, KernelError> {
        let blocks = |n: u64, t: u32, limit: u64| {
            let b = n.div_ceil(u64::from(t.max(1))).max(1);
            if b > limit {
                Err(KernelError::invalid(format!(
                    "{n} items need {b} blocks of {t} threads, more than CUDA's {limit}"
                )))
            } else {
                // b <= limit < 2^31.
                Ok(b as u32)
            }
        };
        Ok(Self {
            blocks: [
                blocks(items[0], threads[0], MAX_GRID_X)?,
                blocks(items[1], threads[1], MAX_GRID_YZ)?,
                1,
            ],
            threads: [threads[0], threads[1], 1],
        })
    }
}

/// A kernel argument as `cuLaunchKernel` takes it: the address of the value.
pub fn arg<T>(value: &T) -> *mut c_void {
    (value as *const T).cast_mut().cast()
}

/// A sequence of work in stream order, launching the functions `F` names.
///
/// Addresses are device addresses (`CUdeviceptr`) for the CUDA queue and host addresses for
/// the host simulator.
pub trait Queue<F: Function> {
    /// Enqueues `function` over `grid`; `params[i]` points at the value of argument `i`,
    /// whose type must be exactly the CUDA C parameter's (`u32`, `u64`, `f32`, `f64`, or a `u64`
    /// address for a pointer).
    ///
    /// # Safety
    /// The arguments must match the function's parameters, and every address they hold must
    /// be valid for what the function reads and writes until the work completes.
    unsafe fn launch(
        &self,
        function: F,
        grid: Grid,
        params: &mut [*mut c_void],
    ) -> Result<(), KernelError>;

    /// Enqueues the batch of FFTs `shape` from `input` to `output` (the same address in
    /// place), with `work` as cuFFT's work area.
    ///
    /// # Safety
    /// `input` must hold the complex f32 values `shape.input()` spans and `output` those
    /// `shape.output()` spans (out of place, without overlapping), and `work` the work area
    /// the queue's plan asked for, all until the work completes.
    unsafe fn fft(
        &self,
        shape: FftShape,
        input: u64,
        output: u64,
        work: u64,
    ) -> Result<(), KernelError>;
}

/// A library's queue: a raw CUstream from the runtime, the device's loaded functions and,
/// for a kernel that transforms, the state's cuFFT plan.
pub struct CudaQueue<'a, F: 'static> {
    /// The launch's stream.
    pub stream: CUstream,
    /// The library's functions on the stream's device.
    pub functions: &'static Functions<F>,
    /// The state's cuFFT plan, if its kernel transforms.
    pub fft: Option<&'a Fft>,
}

impl<F: Function> Queue<F> for CudaQueue<'_, F> {
    unsafe fn launch(
        &self,
        function: F,
        grid: Grid,
        params: &mut [*mut c_void],
    ) -> Result<(), KernelError> {
        let [bx, by, bz] = grid.blocks;
        let [tx, ty, tz] = grid.threads;
        // SAFETY: a function loaded in the current (primary) context; the caller vouches for
        // the arguments and the stream is the runtime's.
        unsafe {
            result::launch_kernel(
                self.functions.get(function),
                (bx, by, bz),
                (tx, ty, tz),
                0,
                self.stream,
                params,
            )
        }
        .check("cuLaunchKernel")
        .map_err(|mut e| {
            e.message = format!("{} ({})", e.message, function.name().to_string_lossy());
            e
        })
    }

    unsafe fn fft(
        &self,
        shape: FftShape,
        input: u64,
        output: u64,
        work: u64,
    ) -> Result<(), KernelError> {
        let fft = self.fft.ok_or_else(|| {
            KernelError::internal("an FFT was enqueued by a kernel without a plan")
        })?;
        // SAFETY: forwarded from the caller.
        unsafe { fft.exec(shape, self.stream, input, output, work) }
    }
}

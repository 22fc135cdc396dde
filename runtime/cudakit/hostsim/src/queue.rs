//! [`HostQueue`]: a kernel plan's launch sequence run on the host simulator.

use std::cell::RefCell;
use std::ffi::c_void;

use kplace_abi::export::KernelError;
use kplace_cudakit::fft_shape::{FftDirection, FftShape};
use kplace_cudakit::queue::{Grid, Queue};
use kplace_cudakit::source::Function;
use rustfft::FftPlanner;
use rustfft::num_complex::Complex32;

/// Runs launch sequences on the host: the kernels compiled as C++ by this crate,
/// and rustfft (f32, unnormalised, either direction) standing in for cuFFT, with cuFFT's data layouts:
/// in place and contiguous, or out of place with point `x` of transform `b` read from input
/// element `b * idist + x * istride` and written to output element `b * odist + x * ostride`
/// (and no other output element written).
pub struct HostQueue {
    planner: RefCell<FftPlanner<f32>>,
}

impl HostQueue {
    /// A queue with no FFT planned yet.
    pub fn new() -> Self {
        Self {
            planner: RefCell::new(FftPlanner::new()),
        }
    }
}

impl<F: Function> Queue<F> for HostQueue {
    unsafe fn launch(
        &self,
        function: F,
        grid: Grid,
        params: &mut [*mut c_void],
    ) -> Result<(), KernelError> {
        // SAFETY: forwarded from the caller; host addresses stand in for device ones.
        unsafe { crate::launch(function.name(), grid.blocks, grid.threads, params) }
            .map_err(|e| KernelError::internal(e.to_string()))
    }

    unsafe fn fft(
        &self,
        shape: FftShape,
        input: u64,
        output: u64,
        _work: u64,
    ) -> Result<(), KernelError> {
        let (len, batch) = (shape.len, shape.batch);
        let fft = self.planner.borrow_mut().plan_fft(
            len,
            match shape.direction {
                FftDirection::Forward => rustfft::FftDirection::Forward,
                FftDirection::Inverse => rustfft::FftDirection::Inverse,
            },
        );
        if shape.in_place() {
            if input != output {
                return Err(KernelError::internal("an in-place FFT given two buffers"));
            }
            // SAFETY: the caller promises `len * batch` complex f32 values at `input`.
            let values =
                unsafe { std::slice::from_raw_parts_mut(input as *mut Complex32, len * batch) };
            fft.process(values);
            return Ok(());
        }
        let (from, to) = (shape.input(), shape.output());
        let input_end = input + 8 * from.span(len, batch) as u64;
        let output_end = output + 8 * to.span(len, batch) as u64;
        if input < output_end && output < input_end {
            return Err(KernelError::internal(format!(
                "an out-of-place FFT whose input [{input:#x}, {input_end:#x}) overlaps its \
                 output [{output:#x}, {output_end:#x})"
            )));
        }
        let (src, dst) = (input as *const Complex32, output as *mut Complex32);
        let mut line = vec![Complex32::default(); len];
        for b in 0..batch {
            for (x, value) in line.iter_mut().enumerate() {
                // SAFETY: within the input's span, which the caller promises.
                *value = unsafe { src.add(from.at(b, x)).read() };
            }
            fft.process(&mut line);
            for (k, value) in line.iter().enumerate() {
                // SAFETY: within the output's span, which the caller promises.
                unsafe { dst.add(to.at(b, k)).write(*value) };
            }
        }
        Ok(())
    }
}

impl Default for HostQueue {
    fn default() -> Self {
        Self::new()
    }
}

//! The CUDA C sources and the kernels they define.
//!
//! Each file in `kernels/` is embedded here and compiled on its own by NVRTC into one module
//! per device (`kplace_cudakit::program`). The same files are compiled as C++ by the
//! host simulator in tests, which is why they stay plain CUDA C: no includes, and of CUDA's
//! extensions only what the simulator's shim provides (the thread indices, a few rounding
//! intrinsics, `atomicAdd` on `unsigned int`, `__shared__` arrays and `__syncthreads`).

use std::ffi::CStr;

use kplace_cudakit::source::Source;

/// `kernels/fft.cu`: windowing and power around the cuFFT transforms.
pub const FFT_CU: Source = Source::new(c"fft.cu", concat!(include_str!("../kernels/fft.cu"), "\0"));
/// `kernels/cfar.cu`: exact CA-CFAR sums, the detection rule and compaction.
pub const CFAR_CU: Source = Source::new(
    c"cfar.cu",
    concat!(include_str!("../kernels/cfar.cu"), "\0"),
);

/// One `extern "C" __global__` function of a source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Function {
    /// `kp_range_window`: int16 to f32 times the Hann window over N, for a batch of chirps.
    RangeWindow,
    /// `kp_doppler_window`: every row of the range-major map times the Hann window over M.
    DopplerWindow,
    /// `kp_power`: `re * re + im * im`.
    Power,
    /// `kp_cfar_rows`: horizontal box and guard sums of the fixed-point limbs; zeroes the
    /// chunk counts.
    CfarRows,
    /// `kp_cfar_detect`: vertical sums, training sum and the detection rule, as flags and
    /// per-chunk counts.
    CfarDetect,
    /// `kp_cfar_scan`: one block's exclusive scan of the chunk counts, and the list header.
    CfarScan,
    /// `kp_cfar_scatter`: the records, in row-major order.
    CfarScatter,
}

impl kplace_cudakit::source::Function for Function {
    const SOURCES: &'static [Source] = &[FFT_CU, CFAR_CU];
    const ALL: &'static [Function] = &[
        Function::RangeWindow,
        Function::DopplerWindow,
        Function::Power,
        Function::CfarRows,
        Function::CfarDetect,
        Function::CfarScan,
        Function::CfarScatter,
    ];

    fn name(self) -> &'static CStr {
        match self {
            Function::RangeWindow => c"kp_range_window",
            Function::DopplerWindow => c"kp_doppler_window",
            Function::Power => c"kp_power",
            Function::CfarRows => c"kp_cfar_rows",
            Function::CfarDetect => c"kp_cfar_detect",
            Function::CfarScan => c"kp_cfar_scan",
            Function::CfarScatter => c"kp_cfar_scatter",
        }
    }

    fn source(self) -> usize {
        match self {
            Function::RangeWindow | Function::DopplerWindow | Function::Power => 0,
            _ => 1,
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_function_is_defined_in_its_source() {
        kplace_cudakit::source::check_listing::<Function>().unwrap();
    }
}

//! The CUDA C sources (`kernels/*.cu`) and the kernels they define, each compiled on its own by
//! NVRTC into one module per device (`kplace_cudakit::program`), and compiled as C++ by the
//! host simulator in tests.

use std::ffi::CStr;

use kplace_cudakit::source::Source;

/// `kernels/elementwise.cu`: conversion, power, magnitude, window, the FFT's gather and
/// scatter, sums and products.
pub const ELEMENTWISE_CU: Source = Source::new(
    c"elementwise.cu",
    concat!(include_str!("../kernels/elementwise.cu"), "\0"),
);
/// `kernels/sums.cu`: the means and the beamformers.
pub const SUMS_CU: Source = Source::new(
    c"sums.cu",
    concat!(include_str!("../kernels/sums.cu"), "\0"),
);
/// `kernels/fir.cu`: the FIR's history in, filter and history out.
pub const FIR_CU: Source = Source::new(c"fir.cu", concat!(include_str!("../kernels/fir.cu"), "\0"));
/// `kernels/arrange.cu`: the transpose.
pub const ARRANGE_CU: Source = Source::new(
    c"arrange.cu",
    concat!(include_str!("../kernels/arrange.cu"), "\0"),
);

/// One `extern "C" __global__` function of a source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Function {
    /// `kb_convert_i8`: `i8`/`ci8` to single precision, times a scale.
    ConvertI8,
    /// `kb_convert_i16`: `i16`/`ci16`.
    ConvertI16,
    /// `kb_convert_i32`: `i32`.
    ConvertI32,
    /// `kb_convert_f16`: `f16`/`cf16`.
    ConvertF16,
    /// `kb_convert_bf16`: `bf16`.
    ConvertBf16,
    /// `kb_convert_f32`: `f32`/`cf32`.
    ConvertF32,
    /// `kb_convert_f64`: `f64`/`cf64`.
    ConvertF64,
    /// `kb_power`: `re² + im²`.
    Power,
    /// `kb_magnitude`: `sqrt(re² + im²)`.
    Magnitude,
    /// `kb_window`: every row times a window.
    Window,
    /// `kb_fft_gather`: a launch's transforms into contiguous rows.
    FftGather,
    /// `kb_fft_scatter`: the transformed rows back, scaled.
    FftScatter,
    /// `kb_mean`: the mean over axis 0.
    Mean,
    /// `kb_beamform`: beams with the steering weights.
    Beamform,
    /// `kb_combine`: beams with given weights.
    Combine,
    /// `kb_fir_history`: the carried history into the workspace.
    FirHistory,
    /// `kb_fir`: the decimating filter.
    Fir,
    /// `kb_fir_keep`: the new history into the carry.
    FirKeep,
    /// `kb_power_mean`: the mean power along an axis.
    PowerMean,
    /// `kb_magnitude_mean`: the mean magnitude along an axis.
    MagnitudeMean,
    /// `kb_add_complex`: `cf32 + cf32`.
    AddComplex,
    /// `kb_add_real`: `f32 + f32`.
    AddReal,
    /// `kb_multiply_complex`: `cf32 * cf32`, or times the conjugate.
    MultiplyComplex,
    /// `kb_multiply_by_real`: `cf32 * f32`.
    MultiplyByReal,
    /// `kb_multiply_real`: `f32 * f32`.
    MultiplyReal,
    /// `kb_transpose_1`: a transpose of 1-byte elements.
    Transpose1,
    /// `kb_transpose_2`: of 2-byte elements.
    Transpose2,
    /// `kb_transpose_4`: of 4-byte elements.
    Transpose4,
    /// `kb_transpose_8`: of 8-byte elements.
    Transpose8,
    /// `kb_transpose_16`: of 16-byte elements.
    Transpose16,
}

impl kplace_cudakit::source::Function for Function {
    const SOURCES: &'static [Source] = &[ELEMENTWISE_CU, SUMS_CU, FIR_CU, ARRANGE_CU];
    const ALL: &'static [Function] = &[
        Function::ConvertI8,
        Function::ConvertI16,
        Function::ConvertI32,
        Function::ConvertF16,
        Function::ConvertBf16,
        Function::ConvertF32,
        Function::ConvertF64,
        Function::Power,
        Function::Magnitude,
        Function::Window,
        Function::FftGather,
        Function::FftScatter,
        Function::Mean,
        Function::Beamform,
        Function::Combine,
        Function::FirHistory,
        Function::Fir,
        Function::FirKeep,
        Function::PowerMean,
        Function::MagnitudeMean,
        Function::AddComplex,
        Function::AddReal,
        Function::MultiplyComplex,
        Function::MultiplyByReal,
        Function::MultiplyReal,
        Function::Transpose1,
        Function::Transpose2,
        Function::Transpose4,
        Function::Transpose8,
        Function::Transpose16,
    ];

    fn name(self) -> &'static CStr {
        match self {
            Function::ConvertI8 => c"kb_convert_i8",
            Function::ConvertI16 => c"kb_convert_i16",
            Function::ConvertI32 => c"kb_convert_i32",
            Function::ConvertF16 => c"kb_convert_f16",
            Function::ConvertBf16 => c"kb_convert_bf16",
            Function::ConvertF32 => c"kb_convert_f32",
            Function::ConvertF64 => c"kb_convert_f64",
            Function::Power => c"kb_power",
            Function::Magnitude => c"kb_magnitude",
            Function::Window => c"kb_window",
            Function::FftGather => c"kb_fft_gather",
            Function::FftScatter => c"kb_fft_scatter",
            Function::Mean => c"kb_mean",
            Function::Beamform => c"kb_beamform",
            Function::Combine => c"kb_combine",
            Function::FirHistory => c"kb_fir_history",
            Function::Fir => c"kb_fir",
            Function::FirKeep => c"kb_fir_keep",
            Function::PowerMean => c"kb_power_mean",
            Function::MagnitudeMean => c"kb_magnitude_mean",
            Function::AddComplex => c"kb_add_complex",
            Function::AddReal => c"kb_add_real",
            Function::MultiplyComplex => c"kb_multiply_complex",
            Function::MultiplyByReal => c"kb_multiply_by_real",
            Function::MultiplyReal => c"kb_multiply_real",
            Function::Transpose1 => c"kb_transpose_1",
            Function::Transpose2 => c"kb_transpose_2",
            Function::Transpose4 => c"kb_transpose_4",
            Function::Transpose8 => c"kb_transpose_8",
            Function::Transpose16 => c"kb_transpose_16",
        }
    }

    fn source(self) -> usize {
        match self {
            Function::Mean
            | Function::PowerMean
            | Function::MagnitudeMean
            | Function::Beamform
            | Function::Combine => 1,
            Function::FirHistory | Function::Fir | Function::FirKeep => 2,
            Function::Transpose1
            | Function::Transpose2
            | Function::Transpose4
            | Function::Transpose8
            | Function::Transpose16 => 3,
            _ => 0,
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

//! The CUDA C sources and the kernels they define.
//!
//! Each file in `workloads/radar/kernels/gpu/kernels/` is embedded here and compiled on its own by NVRTC into
//! one module per device (see [`crate::module`]). The same files are compiled as C++ by the
//! host simulator in tests, which is why they stay plain CUDA C: no includes, and of CUDA's
//! extensions only what the simulator's shim provides (the thread indices, a few rounding
//! intrinsics, `atomicAdd` on `unsigned int`, `__shared__` arrays and `__syncthreads`).

use std::ffi::CStr;

/// One CUDA C source file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    /// `kernels/fft.cu`: windowing and power around the cuFFT transforms.
    Fft,
    /// `kernels/cfar.cu`: exact CA-CFAR sums, the detection rule and compaction.
    Cfar,
}

impl Source {
    /// Every source, in module order.
    pub const ALL: [Source; 2] = [Source::Fft, Source::Cfar];

    /// The file's name, as NVRTC reports it in diagnostics.
    pub fn file_name(self) -> &'static CStr {
        match self {
            Source::Fft => c"fft.cu",
            Source::Cfar => c"cfar.cu",
        }
    }

    /// The file's text, NUL-terminated for NVRTC.
    pub fn text(self) -> &'static CStr {
        match self {
            Source::Fft => FFT_CU,
            Source::Cfar => CFAR_CU,
        }
    }

    /// Position in [`Source::ALL`].
    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// `kernels/fft.cu` with a terminating NUL.
const FFT_CU: &CStr =
    match CStr::from_bytes_with_nul(concat!(include_str!("../kernels/fft.cu"), "\0").as_bytes()) {
        Ok(text) => text,
        Err(_) => panic!("kernels/fft.cu contains a NUL byte"),
    };

/// `kernels/cfar.cu` with a terminating NUL.
const CFAR_CU: &CStr =
    match CStr::from_bytes_with_nul(concat!(include_str!("../kernels/cfar.cu"), "\0").as_bytes()) {
        Ok(text) => text,
        Err(_) => panic!("kernels/cfar.cu contains a NUL byte"),
    };

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

impl Function {
    /// Every function, in handle order.
    pub const ALL: [Function; 7] = [
        Function::RangeWindow,
        Function::DopplerWindow,
        Function::Power,
        Function::CfarRows,
        Function::CfarDetect,
        Function::CfarScan,
        Function::CfarScatter,
    ];

    /// The symbol's name in its source.
    pub fn name(self) -> &'static CStr {
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

    /// The source that defines it.
    pub fn source(self) -> Source {
        match self {
            Function::RangeWindow | Function::DopplerWindow | Function::Power => Source::Fft,
            _ => Source::Cfar,
        }
    }

    /// Position in [`Function::ALL`].
    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_function_is_defined_in_its_source() {
        for (i, f) in Function::ALL.iter().enumerate() {
            assert_eq!(f.index(), i);
            let name = f.name().to_str().expect("ASCII");
            let text = f.source().text().to_str().expect("UTF-8");
            let definition = format!("extern \"C\" __global__ void {name}(");
            assert!(text.contains(&definition), "{name} not in {:?}", f.source());
        }
        for (i, s) in Source::ALL.iter().enumerate() {
            assert_eq!(s.index(), i);
            let text = s.text().to_str().expect("UTF-8");
            let defined = text.matches("extern \"C\" __global__ void ").count();
            let listed = Function::ALL.iter().filter(|f| f.source() == *s).count();
            assert_eq!(defined, listed, "{s:?}: kernels missing from Function");
        }
    }
}

//! The logical names of the radar kernels.
//!
//! A graph names a kernel, a placement picks the library that runs it; the runtime matches
//! the two by these names, so every backend must export each kernel under exactly the name
//! here. Each name is both the C string the ABI table carries and the text messages use.

use std::ffi::CStr;
use std::fmt;

/// A kernel's logical name: a NUL-terminated ASCII string, also viewable as `&str`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KernelName {
    c: &'static CStr,
    text: &'static str,
}

impl KernelName {
    /// Only evaluated in the constants below, at compile time: a name that is not UTF-8 is
    /// a build error, never a run-time panic.
    const fn new(c: &'static CStr) -> Self {
        match c.to_str() {
            Ok(text) => Self { c, text },
            Err(_) => panic!("kernel names are UTF-8"),
        }
    }

    /// The name as the ABI's kernel table carries it (`KernelImpl::NAME`).
    pub const fn c_str(self) -> &'static CStr {
        self.c
    }

    /// The name as text, for messages.
    pub const fn as_str(self) -> &'static str {
        self.text
    }
}

impl fmt::Display for KernelName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text)
    }
}

/// Windowed FFT of every chirp, written corner-turned: `ci16 [M, N]` to `cf32 [N, M]`.
pub const RANGE_FFT: KernelName = KernelName::new(c"radar.range_fft");
/// Windowed FFT across chirps, then power: `cf32 [N, M]` to `f32 [N, M]`.
pub const DOPPLER_FFT: KernelName = KernelName::new(c"radar.doppler_fft");
/// Two-dimensional CA-CFAR: `f32 [N, M]` to `detections [capacity]`.
pub const CFAR: KernelName = KernelName::new(c"radar.cfar");
/// 8-connected clustering of detections: `detections` to `detections`.
pub const CLUSTER: KernelName = KernelName::new(c"radar.cluster");

/// Every radar kernel, in pipeline order.
pub const ALL: [KernelName; 4] = [RANGE_FFT, DOPPLER_FFT, CFAR, CLUSTER];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_graphs_and_both_views_agree() {
        let texts: Vec<&str> = ALL.iter().map(|n| n.as_str()).collect();
        assert_eq!(
            texts,
            [
                "radar.range_fft",
                "radar.doppler_fft",
                "radar.cfar",
                "radar.cluster"
            ]
        );
        for name in ALL {
            assert_eq!(name.c_str().to_bytes(), name.as_str().as_bytes());
            assert_eq!(name.to_string(), name.as_str());
        }
    }
}

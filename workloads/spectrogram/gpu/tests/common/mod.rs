//! Shared by the GPU library's tests: what they share with the CPU library's tests
//! (`kplace_testkit::abi` and `kplace_testkit::spectrogram`, re-exported: loading a library
//! through the ABI, the CPU library compiled now as the reference, 64-byte aligned tensors,
//! create / launch / destroy as the runtime calls them, seeded inputs), the GPU library itself
//! (cargo-built and built now), device-memory descriptors, the CPU library's results as the
//! reference, and the fake driver and NVRTC ([`fakes`]) that run the GPU library on the host.

#![allow(dead_code)]

pub mod fakes;

use std::path::Path;
use std::sync::OnceLock;

use kplace_abi::{MemorySpace, TensorDesc};

pub use kplace_abi::Dtype;
pub use kplace_testkit::abi::*;
pub use kplace_testkit::spectrogram::*;

/// The CUDA functions of `kernels/spectrogram.cu`.
pub const FUNCTIONS: [&str; 3] = [
    "spectrogram_fft",
    "spectrogram_power",
    "spectrogram_average",
];

/// The GPU library as cargo built it, target/<profile>/libkplace_spectrogram_gpu.so (see
/// [`cargo_built`]: it fails when the file is older than its sources).
pub fn gpu() -> &'static Loaded {
    static LIB: OnceLock<Loaded> = OnceLock::new();
    LIB.get_or_init(|| {
        load(&cargo_built(
            "kplace-spectrogram-gpu",
            "libkplace_spectrogram_gpu.so",
            &[
                "workloads/spectrogram/kernels/spectrogram.cu",
                "workloads/spectrogram/kernels/spectrogram_gpu.c",
                "workloads/spectrogram/kernels/spectrogram_contract.h",
            ],
        ))
    })
}

/// The GPU library compiled now from `kernels/spectrogram_gpu.c` and `kernels/spectrogram.cu`,
/// with the flags build.rs uses ([`cc_shared_library`]), into a temporary directory: what the
/// tests that run the library use, so that they always test the sources as they are. Carried
/// executables ([`carried`]) use the bundle's, built from the same sources with them.
pub fn fresh_gpu() -> &'static Loaded {
    static LIB: OnceLock<Loaded> = OnceLock::new();
    LIB.get_or_init(|| {
        if carried() {
            return load(&carried_library("libkplace_spectrogram_gpu.so"));
        }
        let dir = temp_dir("spectrogram-gpu-c-");
        write_cu_inc(dir.path());
        let out = dir.path().join("libspectrogram_gpu.so");
        let mut cmd = cc_shared_library();
        cmd.arg("-I")
            .arg(dir.path())
            .arg(kernels_dir().join("spectrogram_gpu.c"))
            .arg("-o")
            .arg(&out)
            .args(["-ldl", "-lpthread", "-lm"]);
        run_compiler(&mut cmd, "spectrogram_gpu.c");
        load(&out)
    })
}

/// Writes `spectrogram_cu.inc` into `dir` as build.rs does: the bytes of spectrogram.cu and a
/// 0, as a C array initializer.
fn write_cu_inc(dir: &Path) {
    let source = std::fs::read(kernels_dir().join("spectrogram.cu")).expect("spectrogram.cu");
    let mut inc = String::new();
    for byte in source.iter().chain(&[0u8]) {
        inc.push_str(&format!("0x{byte:02x},\n"));
    }
    std::fs::write(dir.join("spectrogram_cu.inc"), inc).expect("write spectrogram_cu.inc");
}

/// A device-memory descriptor (what the GPU library takes).
pub fn ddesc(dtype: Dtype, dims: &[u64]) -> TensorDesc {
    TensorDesc {
        memory: MemorySpace::DEVICE,
        ..desc(dtype, dims)
    }
}

/// Runs a stage on the CPU library, unsplit (its results do not depend on the tiling).
pub fn reference(name: &str, stage: &Stage<'_>, input: &Buffer, output: &mut Buffer) {
    let mut stage = stage.clone();
    stage.split = None;
    stage.device = 0;
    run(cpu(), name, &stage, input, output, std::ptr::null_mut());
}

/// The largest error of any row of `got` (interleaved cf32, rows of `n` bins) against `want`,
/// relative to the peak magnitude of `want`'s row.
pub fn fft_error(got: &[f32], want: &[f32], n: usize) -> f64 {
    assert_eq!(got.len(), want.len());
    want.chunks_exact(2 * n)
        .zip(got.chunks_exact(2 * n))
        .map(|(want, got)| {
            let norm = |re: f32, im: f32| f64::from(re).hypot(f64::from(im));
            let peak = want
                .chunks_exact(2)
                .map(|z| norm(z[0], z[1]))
                .fold(0.0, f64::max);
            let err = want
                .chunks_exact(2)
                .zip(got.chunks_exact(2))
                .map(|(w, g)| {
                    (f64::from(g[0]) - f64::from(w[0])).hypot(f64::from(g[1]) - f64::from(w[1]))
                })
                .fold(0.0, f64::max);
            assert!(err.is_finite(), "non-finite output");
            err / peak.max(f64::MIN_POSITIVE)
        })
        .fold(0.0, f64::max)
}

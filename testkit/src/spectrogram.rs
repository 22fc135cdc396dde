//! The spectrogram's kernel libraries in tests: the kernels' names, where their sources are,
//! and the CPU library `kernels/spectrogram.c` compiled now with the system C compiler (the
//! reference the CUDA library's tests compare against). Carried executables load the bundle's
//! build of the same source instead, and need no C compiler.

use std::path::PathBuf;
use std::sync::OnceLock;

use crate::abi::{Loaded, carried_library, cc_shared_library, load, run_compiler, temp_dir};
use crate::workspace::{carried, workspace};

pub const FFT: &str = "spectrogram.fft";
pub const POWER: &str = "spectrogram.power";
pub const AVERAGE: &str = "spectrogram.average";

/// `workloads/spectrogram`: the CPU crate's directory, the GPU crate's parent.
pub fn spectrogram_dir() -> PathBuf {
    workspace().join("workloads/spectrogram")
}

/// `workloads/spectrogram/kernels`.
pub fn kernels_dir() -> PathBuf {
    spectrogram_dir().join("kernels")
}

/// Compiles the CPU library, `kernels/spectrogram.c`, with `defines` (`NAME=VALUE`) into a
/// temporary directory (see [`cc_shared_library`]), and loads it.
pub fn build_cpu(defines: &[&str]) -> Loaded {
    let dir = temp_dir("spectrogram-c-");
    let out = dir.path().join("libspectrogram.so");
    let mut cmd = cc_shared_library();
    cmd.args(defines.iter().map(|d| format!("-D{d}")))
        .arg(kernels_dir().join("spectrogram.c"))
        .arg("-o")
        .arg(&out)
        .arg("-lm");
    run_compiler(&mut cmd, &format!("spectrogram.c with {defines:?}"));
    // The mapping outlives the file: the directory goes when `dir` drops.
    load(&out)
}

/// The CPU library as shipped: `build_cpu` without defines, or, when carried, the bundle's
/// `libkplace_spectrogram.so` (the same source, built by cargo; no C compiler is needed).
pub fn cpu() -> &'static Loaded {
    static LIB: OnceLock<Loaded> = OnceLock::new();
    LIB.get_or_init(|| {
        if carried() {
            load(&carried_library("libkplace_spectrogram.so"))
        } else {
            build_cpu(&[])
        }
    })
}

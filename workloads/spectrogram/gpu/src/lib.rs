//! `kplace-spectrogram-gpu`: the spectrogram's kernels on CUDA, whose host side is written in C.
//!
//! The kernels (`spectrogram.fft`, `spectrogram.power`, `spectrogram.average`, as CUDA kernels
//! over device memory) are CUDA C in `workloads/spectrogram/kernels/spectrogram.cu`, compiled by
//! NVRTC at the first create on a device, and launched by
//! `workloads/spectrogram/kernels/spectrogram_gpu.c`, written against `runtime/include/kplace.h`
//! alone: it dlopens `libcuda.so.1` and NVRTC itself, so nothing here links CUDA. That C
//! file's header comment is the kernels' contract.
//!
//! This crate exists so that `cargo build` puts the library beside the project's others, as
//! `target/<profile>/libkplace_spectrogram_gpu.so`. `build.rs` embeds the CUDA source in the C
//! file and compiles it with its entry function renamed to `kplace_spectrogram_gpu_c_entry`,
//! and this shim exports the ABI's entry symbol, `kplace_library_entry`, from Rust: a Rust
//! cdylib exports only Rust `#[no_mangle]` symbols, and hides those of the C objects linked
//! into it.

use kplace_abi::Library;

unsafe extern "C" {
    /// The C library's entry function (`SPECTROGRAM_GPU_ENTRY` in `kernels/spectrogram_gpu.c`).
    fn kplace_spectrogram_gpu_c_entry() -> *const Library;
}

/// The kernel library's entry point (see kplace.h): the C library's static table.
#[unsafe(no_mangle)]
pub extern "C" fn kplace_library_entry() -> *const Library {
    // SAFETY: the C function takes no arguments, has no preconditions and returns the address
    // of a static table that lives as long as the library, with the layout `Library` mirrors
    // (kplace-abi's tests check that layout against kplace.h).
    unsafe { kplace_spectrogram_gpu_c_entry() }
}

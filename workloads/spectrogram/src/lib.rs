//! `kplace-spectrogram`: an example kernel library whose kernels are written in C.
//!
//! The kernels (`spectrogram.fft`, `spectrogram.power`, `spectrogram.average`: a Welch-like
//! averaged power spectrum per frame) live in `kernels/spectrogram.c`, written against
//! `runtime/include/kplace.h` alone; its header comment is their contract. The checks and the
//! FFT's tables it shares with the GPU library are in `kernels/spectrogram_contract.h`, beside
//! it and included by it. That file also builds into a loadable library by itself (`cc -shared
//! -fPIC -I runtime/include workloads/spectrogram/kernels/spectrogram.c -o libspectrogram.so -lm`).
//!
//! This crate exists so that `cargo build` puts the library beside the project's others, as
//! `target/<profile>/libkplace_spectrogram.so`. `build.rs` compiles the C file with its entry
//! function renamed to `kplace_spectrogram_c_entry`, and this shim exports the ABI's entry
//! symbol, `kplace_library_entry`, from Rust: a Rust cdylib exports only Rust `#[no_mangle]`
//! symbols, and hides those of the C objects linked into it.

use kplace_abi::Library;

unsafe extern "C" {
    /// The C library's entry function (`SPECTROGRAM_ENTRY` in `kernels/spectrogram.c`).
    fn kplace_spectrogram_c_entry() -> *const Library;
}

/// The kernel library's entry point (see kplace.h): the C library's static table.
#[unsafe(no_mangle)]
pub extern "C" fn kplace_library_entry() -> *const Library {
    // SAFETY: the C function takes no arguments, has no preconditions and returns the address
    // of a static table that lives as long as the library, with the layout `Library` mirrors
    // (kplace-abi's tests check that layout against kplace.h).
    unsafe { kplace_spectrogram_c_entry() }
}

//! Compiles `kernels/spectrogram.c`, the kernels, into a static archive linked into the cdylib
//! (with `kernels/spectrogram_contract.h`, which it includes, shared with the GPU library).
//!
//! The C entry function is renamed (`SPECTROGRAM_ENTRY`) to `kplace_spectrogram_c_entry`: a
//! Rust cdylib exports only the Rust `#[no_mangle]` symbols, so `src/lib.rs` exports
//! `kplace_library_entry` and returns what the C function returns.

fn main() {
    println!("cargo:rerun-if-changed=kernels/spectrogram.c");
    println!("cargo:rerun-if-changed=kernels/spectrogram_contract.h");
    println!("cargo:rerun-if-changed=../../runtime/include/kplace.h");
    cc::Build::new()
        .file("kernels/spectrogram.c")
        .include("../../runtime/include")
        .std("c11")
        .flag("-Wall")
        .flag("-Wextra")
        .flag("-Wpedantic")
        .flag("-Werror")
        .define("SPECTROGRAM_ENTRY", "kplace_spectrogram_c_entry")
        .compile("kplace_spectrogram_c");
    // After the archive, so the linker resolves its cos/sin.
    println!("cargo:rustc-link-lib=m");
}

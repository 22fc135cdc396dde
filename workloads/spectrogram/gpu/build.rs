//! Compiles `../kernels/spectrogram_gpu.c`, the library's host side, into a static archive
//! linked into the cdylib, with `../kernels/spectrogram.cu` embedded in it.
//!
//! The CUDA source is written to `$OUT_DIR/spectrogram_cu.inc` as the bytes of a C array
//! initializer ending in a 0 byte, which the C file includes (a string literal would exceed
//! the 4095 characters ISO C promises, which `-Wpedantic` flags). The C entry function is
//! renamed (`SPECTROGRAM_GPU_ENTRY`) to `kplace_spectrogram_gpu_c_entry`: a Rust cdylib
//! exports only the Rust `#[no_mangle]` symbols, so `src/lib.rs` exports
//! `kplace_library_entry` and returns what the C function returns.

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::PathBuf;

fn main() {
    let cu = "../kernels/spectrogram.cu";
    let c = "../kernels/spectrogram_gpu.c";
    // Included by the C file, which finds it beside itself; shared with the CPU library.
    let contract = "../kernels/spectrogram_contract.h";
    println!("cargo:rerun-if-changed={cu}");
    println!("cargo:rerun-if-changed={c}");
    println!("cargo:rerun-if-changed={contract}");
    println!("cargo:rerun-if-changed=../../../runtime/include/kplace.h");

    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let source = fs::read(cu).unwrap_or_else(|e| panic!("cannot read {cu}: {e}"));
    assert!(
        source.iter().all(|b| b.is_ascii() && *b != 0),
        "{cu} must be ASCII text without NUL bytes (NVRTC reads it as a C string)"
    );
    let mut inc = String::with_capacity(source.len() * 6 + 16);
    for (i, byte) in source.iter().chain(&[0u8]).enumerate() {
        write!(inc, "0x{byte:02x},").expect("write to a String");
        inc.push(if i % 16 == 15 { '\n' } else { ' ' });
    }
    inc.push('\n');
    fs::write(out.join("spectrogram_cu.inc"), inc).expect("write spectrogram_cu.inc");

    cc::Build::new()
        .file(c)
        .include("../../../runtime/include")
        .include(&out)
        .std("c11")
        .flag("-Wall")
        .flag("-Wextra")
        .flag("-Wpedantic")
        .flag("-Werror")
        .define("SPECTROGRAM_GPU_ENTRY", "kplace_spectrogram_gpu_c_entry")
        .compile("kplace_spectrogram_gpu_c");
    // After the archive, so the linker resolves its dlopen, pthread_mutex_* and cos/sin.
    println!("cargo:rustc-link-lib=dl");
    println!("cargo:rustc-link-lib=pthread");
    println!("cargo:rustc-link-lib=m");
}

//! Lets the integration tests link this library together with the CPU library.
//!
//! Both kernel libraries export `kplace_library_entry` (one C ABI symbol per library, by
//! design), and the tests that compare the GPU kernels with the CPU library link both rlibs
//! into one executable. Which object files the linker pulls in depends on how rustc splits the
//! crates into codegen units (release builds merge them), so the duplicate definition cannot
//! be avoided reliably; for the test executables only, the linker is told to keep the first.
//! No test calls the entry symbol from a binary that links both libraries (`library.rs`,
//! which does call it, does not link the CPU library, and checks that the table it gets is
//! this library's). The library itself, and every other binary, links as usual.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-link-arg-tests=-Wl,--allow-multiple-definition");
}

//! Lets the integration tests link this library together with the CPU block library.
//!
//! Both kernel libraries export `kplace_library_entry` (one C ABI symbol per library, by
//! design), and the tests that compare the CUDA blocks with the CPU blocks link both rlibs
//! into one executable; for the test executables only, the linker is told to keep the first
//! definition. No test calls the entry symbol from a binary that links both (the table test
//! reaches this library's table through its own `table()` function). The library itself, and
//! every other binary, links as usual.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-link-arg-tests=-Wl,--allow-multiple-definition");
}

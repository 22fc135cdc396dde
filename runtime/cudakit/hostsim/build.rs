//! Compiles the CUDA C of the repository's Rust GPU libraries ([`KERNEL_DIRS`]: every `*.cu`
//! there) as C++ for the host, with the shim in `src/shim.h`.
//!
//! The kernel names are read from the sources (every `extern "C" __global__ void NAME(`), and
//! a table of them is generated, so a kernel added to a `.cu` file is launchable here with no
//! other change. A kernel whose text (up to the next kernel) calls `__syncthreads(` is marked
//! to run its blocks as fibers; one that reaches a barrier unmarked (through a helper, say)
//! fails its launch rather than run on a wrong schedule.

use std::env;
use std::fs;
use std::path::PathBuf;

const MARKER: &str = "extern \"C\" __global__ void ";

/// The directories of CUDA C, from this crate's: the radar's GPU library and the block
/// library's. Kernel names must be unique across them (each library prefixes its own).
const KERNEL_DIRS: [&str; 2] = [
    "../../../workloads/radar/kernels/gpu/kernels",
    "../../../blocks/gpu/kernels",
];

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets it"));
    println!("cargo:rerun-if-changed=src/shim.h");
    println!("cargo:rerun-if-changed=src/hostsim.cpp");

    let mut sources: Vec<PathBuf> = Vec::new();
    for dir in KERNEL_DIRS {
        let dir = manifest.join(dir);
        println!("cargo:rerun-if-changed={}", dir.display());
        let mut found: Vec<PathBuf> = fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "cu"))
            .collect();
        found.sort();
        sources.extend(found);
    }

    let mut includes = String::new();
    let mut table = String::new();
    for source in &sources {
        println!("cargo:rerun-if-changed={}", source.display());
        let text = fs::read_to_string(source)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", source.display()));
        includes.push_str(&format!("#include \"{}\"\n", source.display()));
        let starts: Vec<usize> = text.match_indices(MARKER).map(|(at, _)| at).collect();
        for (i, &at) in starts.iter().enumerate() {
            let rest = &text[at + MARKER.len()..starts.get(i + 1).copied().unwrap_or(text.len())];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let barriers = rest.contains("__syncthreads(");
            table.push_str(&format!("KP_HOSTSIM_KERNEL({name}, {barriers})\n"));
        }
    }
    fs::write(out.join("kernels.inc"), includes).expect("write kernels.inc");
    fs::write(out.join("table.inc"), table).expect("write table.inc");

    cc::Build::new()
        .cpp(true)
        .file("src/hostsim.cpp")
        .include(&out)
        .include("src")
        .std("c++17")
        .opt_level(2)
        // IEEE arithmetic operation by operation, as the kernels' intrinsics promise on the
        // device: no contraction into FMA, no fast-math; and byte buffers read as words.
        .flag("-ffp-contract=off")
        .flag("-fno-fast-math")
        .flag("-fno-strict-aliasing")
        .warnings(true)
        .compile("kplace_cuda_hostsim");
}

//! Compiles `workloads/radar/kernels/gpu/kernels/*.cu` as C++ for the host, with the shim in `src/shim.h`.
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

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let kernels_dir = manifest.join("../kernels");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets it"));
    println!("cargo:rerun-if-changed={}", kernels_dir.display());
    println!("cargo:rerun-if-changed=src/shim.h");
    println!("cargo:rerun-if-changed=src/hostsim.cpp");

    let mut sources: Vec<PathBuf> = fs::read_dir(&kernels_dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", kernels_dir.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "cu"))
        .collect();
    sources.sort();

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
        .compile("kplace_gpu_hostsim");
}

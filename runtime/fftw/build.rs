//! Links FFTW statically.
//!
//! `fftw-sys` (feature `system`) asks the linker for `-lfftw3 -lfftw3f`, which would resolve to
//! the shared libraries. The machines the binaries travel to have no libfftw3, so this script
//! makes a directory holding links to the static archives only and puts it first on the link
//! search path: both `-l` flags then resolve to `.a` files, and the FFTW code (with Debian's
//! SIMD kernels) is copied into the library.

use std::env;
use std::path::{Path, PathBuf};

/// Directories searched, in order, after `$FFTW_LIB_DIR`.
const SYSTEM_DIRS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
];

fn find_archive(name: &str, dirs: &[PathBuf]) -> Option<PathBuf> {
    dirs.iter().map(|d| d.join(name)).find(|p| p.is_file())
}

fn link_static(dir: &Path, name: &str, archive: &Path) {
    let link = dir.join(name);
    // A stale link from an earlier build may point elsewhere; replace it.
    let _ = std::fs::remove_file(&link);
    if let Err(e) = std::os::unix::fs::symlink(archive, &link) {
        panic!(
            "cannot link {} to {}: {e}",
            link.display(),
            archive.display()
        );
    }
}

fn main() {
    println!("cargo:rerun-if-env-changed=FFTW_LIB_DIR");
    println!("cargo:rerun-if-changed=build.rs");

    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(dir) = env::var_os("FFTW_LIB_DIR") {
        dirs.push(PathBuf::from(dir));
    }
    dirs.extend(SYSTEM_DIRS.iter().map(PathBuf::from));

    let Some(single) = find_archive("libfftw3f.a", &dirs) else {
        panic!(
            "libfftw3f.a not found: install libfftw3-dev (Debian) or set FFTW_LIB_DIR \
             (searched {})",
            dirs.iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    };
    println!("cargo:rerun-if-changed={}", single.display());

    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let static_dir = out.join("fftw-static");
    if let Err(e) = std::fs::create_dir_all(&static_dir) {
        panic!("cannot create {}: {e}", static_dir.display());
    }
    link_static(&static_dir, "libfftw3f.a", &single);

    // fftw-sys also emits `-lfftw3` (double precision), which nothing here calls. Prefer the
    // real archive; otherwise an empty one, so the flag still resolves statically and never to
    // a shared libfftw3 that the target machines lack.
    match find_archive("libfftw3.a", &dirs) {
        Some(double) => link_static(&static_dir, "libfftw3.a", &double),
        None => {
            let _ = std::fs::remove_file(static_dir.join("libfftw3.a"));
            if let Err(e) = std::fs::write(static_dir.join("libfftw3.a"), b"!<arch>\n") {
                panic!("cannot write an empty libfftw3.a: {e}");
            }
        }
    }

    println!("cargo:rustc-link-search=native={}", static_dir.display());
}

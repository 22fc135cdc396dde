//! A file whose soname is none of cudarc's names for the library loads, and the report warns
//! that cudarc will not use it. Its own test binary: the stand-in must be the only object
//! loaded under the library's names in the process.

use std::path::PathBuf;

use kplace_cuda_libs::{Environment, Library, find_in_environment};

#[test]
fn a_file_cudarc_will_not_find_by_name_is_loaded_with_a_warning() {
    let zlib = [
        "/lib/x86_64-linux-gnu/libz.so.1",
        "/usr/lib/x86_64-linux-gnu/libz.so.1",
        "/lib64/libz.so.1",
        "/usr/lib64/libz.so.1",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.is_file())
    .expect("a libz.so.1 to copy (its soname is libz.so.1)");
    let tmp = tempfile::tempdir().expect("temp dir");
    let copy = tmp.path().join("libcufft.so.12");
    std::fs::copy(&zlib, &copy).expect("copy libz");
    let report = find_in_environment(
        Library::Cufft,
        &Environment {
            lib_dirs: Some(vec![tmp.path().to_path_buf()]),
            loader_path: false,
            system_dirs: vec![],
        },
        &mut || Ok(vec![]),
    );
    assert_eq!(
        report.loaded.as_deref(),
        Some(copy.to_str().expect("utf-8")),
        "{report}"
    );
    assert_eq!(
        report.version.as_deref(),
        Some("12"),
        "no cufftGetVersion: the file name's"
    );
    assert_eq!(report.warnings.len(), 1, "{report}");
    assert!(
        report.warnings[0]
            .starts_with("its soname is none of the names cudarc loads it by (libcufft.so, ")
            && report.warnings[0].ends_with("cudarc will not use this file"),
        "{report}"
    );
    assert!(
        report
            .to_string()
            .contains("\n    warning: its soname is none"),
        "{report}"
    );
}

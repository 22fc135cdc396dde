//! Where things are for a test: the workspace root, the `kplace` binary, the CPU kernel
//! library cargo built, and a scratch directory. Test executables carried to another machine
//! (bench/gpu-check.sh's bundle, see [`carried`]) find all of these through `$KPLACE_WORKSPACE`,
//! `$KPLACE_BIN` and `$KPLACE_LIB_DIR`, never through the build machine's paths.

use std::path::{Path, PathBuf};

/// The workspace root: `$KPLACE_WORKSPACE` when set (test executables carried to another
/// machine, as bench/gpu-check.sh runs them), else where cargo built them from (this crate's
/// directory is `testkit/`, right under the root).
pub fn workspace() -> PathBuf {
    if let Some(dir) = std::env::var_os("KPLACE_WORKSPACE") {
        return PathBuf::from(dir);
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("a crate's directory has the workspace as parent")
        .to_path_buf()
}

/// Whether these are test executables carried to another machine (bench/gpu-check.sh's
/// bundle): `$KPLACE_WORKSPACE` names the repository there and `$KPLACE_LIB_DIR` the bundle's
/// libraries; nothing of the build machine's target directory is assumed.
pub fn carried() -> bool {
    std::env::var_os("KPLACE_WORKSPACE").is_some()
}

/// The `kplace` binary: `$KPLACE_BIN` when set (carried test executables), else cargo's
/// `CARGO_BIN_EXE_kplace` as the calling test was compiled with it (only kplace-cli's
/// integration tests have it: the macro reads it where it is used).
#[macro_export]
macro_rules! kplace_bin {
    () => {
        $crate::workspace::kplace_bin_or(option_env!("CARGO_BIN_EXE_kplace"))
    };
}

/// What [`kplace_bin!`](crate::kplace_bin) expands to: `$KPLACE_BIN` when set, else `built`
/// (cargo's path of the binary, when the calling test has one).
pub fn kplace_bin_or(built: Option<&str>) -> PathBuf {
    std::env::var_os("KPLACE_BIN")
        .map(PathBuf::from)
        .or_else(|| built.map(PathBuf::from))
        .expect("the kplace binary: run the tests of kplace-cli, or set KPLACE_BIN")
}

/// The profile directory the running test executable was built into, target/<profile>/ (the
/// executable itself is in its deps/).
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    exe.parent()
        .and_then(Path::parent)
        .expect("a test executable lives in target/<profile>/deps")
        .to_path_buf()
}

/// A scratch directory for builds the tests make (C libraries): cargo's target/tmp/ for a
/// test run from the build tree (what `CARGO_TARGET_TMPDIR` names there), the system's
/// temporary directory for [`carried`] executables (the build machine's is not there).
/// Created when missing.
pub fn scratch_dir() -> PathBuf {
    let dir = if carried() {
        std::env::temp_dir()
    } else {
        let profile = profile_dir();
        profile.parent().unwrap_or(&profile).join("tmp")
    };
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("create the scratch directory {}: {e}", dir.display()));
    dir
}

/// The CPU kernel library: `$KPLACE_LIB_DIR/libkplace_cpu.so` for [`carried`] executables,
/// else the one cargo built next to the test binaries.
pub fn cpu_library() -> PathBuf {
    if carried() {
        let dir = std::env::var_os("KPLACE_LIB_DIR")
            .expect("KPLACE_WORKSPACE is set (carried test executables) but KPLACE_LIB_DIR is not");
        let lib = Path::new(&dir).join("libkplace_cpu.so");
        assert!(
            lib.is_file(),
            "{} is missing from the bundle",
            lib.display()
        );
        return lib;
    }
    let lib = profile_dir().join("libkplace_cpu.so");
    assert!(
        lib.is_file(),
        "{} is missing: build the workspace first (`cargo build --workspace` or `cargo test --workspace`)",
        lib.display()
    );
    lib
}

/// Writes `text` to a new file `name` in a fresh temporary directory, returning both.
pub fn write_temp(name: &str, text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join(name);
    std::fs::write(&path, text).expect("write temp file");
    (dir, path)
}

//! Helpers shared by the runtime's integration tests: building the C test libraries and
//! finding the workspace's own libraries.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The workspace root: `$KPLACE_WORKSPACE` when set (test executables carried to another
/// machine, as bench/gpu-check.sh runs them), else where cargo built them from.
pub fn workspace() -> PathBuf {
    if let Some(dir) = std::env::var_os("KPLACE_WORKSPACE") {
        return PathBuf::from(dir);
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("runtime/ has a parent")
        .to_path_buf()
}

/// The `kplace` binary: `$KPLACE_BIN` when set (carried test executables), else cargo's.
pub fn kplace_bin() -> PathBuf {
    std::env::var_os("KPLACE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_kplace")))
}

/// Builds `runtime/tests/c/<source>` into a shared library named `lib<name>.so` with extra
/// `defines`, once per test binary run, and returns its path. Panics with the compiler's output
/// when the build fails: the C sources are part of the test suite.
pub fn build_c_library(source: &str, name: &str, defines: &[&str]) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("c-libs");
    std::fs::create_dir_all(&dir).expect("create c-libs dir");
    let out = dir.join(format!("lib{name}.so"));
    // Each test binary builds to a private name, then renames: concurrent test binaries never
    // see a half-written library.
    static BUILDS: AtomicUsize = AtomicUsize::new(0);
    let build = BUILDS.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!("lib{name}.{}.{build}.so.tmp", std::process::id()));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let mut cmd = Command::new(&cc);
    cmd.args(["-shared", "-fPIC", "-O2", "-std=c11", "-Wall", "-Werror"])
        .arg("-I")
        .arg(workspace().join("runtime/include"))
        .arg(workspace().join("runtime/tests/c").join(source))
        .arg("-o")
        .arg(&tmp);
    for d in defines {
        cmd.arg(format!("-D{d}"));
    }
    let output = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C compiler {cc}: {e}"));
    assert!(
        output.status.success(),
        "building {source} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    std::fs::rename(&tmp, &out).expect("rename test library");
    out
}

/// The CPU kernel library built by cargo next to the test binaries.
pub fn cpu_library() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let deps = exe.parent().expect("deps dir");
    let dir = deps.parent().expect("profile dir");
    let lib = dir.join("libkplace_cpu.so");
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

/// Deterministic pseudo-random `ci16 [rows, cols]` frames for the C test kernels: `count`
/// frames of little-endian int16 I/Q pairs in [-1000, 1000].
pub fn test_frames(rows: usize, cols: usize, count: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..count)
        .map(|_| {
            (0..rows * cols * 2)
                .flat_map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    ((x % 2001) as i16 - 1000).to_le_bytes()
                })
                .collect()
        })
        .collect()
}

/// What `test.magnitude2` (scale 0.25) then `test.column_sum` give for `frame`: per column,
/// the f64 sum over rows of the f32 `0.25 (I^2 + Q^2)`, rounded once to f32.
pub fn expected_column_sums(frame: &[u8], rows: usize, cols: usize) -> Vec<f32> {
    let iq: Vec<f32> = frame
        .chunks_exact(2)
        .map(|b| f32::from(i16::from_le_bytes([b[0], b[1]])))
        .collect();
    (0..cols)
        .map(|c| {
            let sum: f64 = (0..rows)
                .map(|r| {
                    let k = r * cols + c;
                    f64::from(0.25f32 * (iq[2 * k] * iq[2 * k] + iq[2 * k + 1] * iq[2 * k + 1]))
                })
                .sum();
            sum as f32
        })
        .collect()
}

/// Runs `command` to its end and returns its output, like [`Command::output`] but killing it
/// and panicking when it has not ended within `timeout`, so that a hang fails the test rather
/// than stalling the suite. Stdin is null; what the caller set `Stdio::piped()` for stdout or
/// stderr is captured.
pub fn output_within(command: &mut Command, timeout: std::time::Duration) -> std::process::Output {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = command
        .stdin(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}"));
    fn drain(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    }
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let deadline = std::time::Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{command:?} did not end within {timeout:?}; killed it");
            }
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("cannot wait for {command:?}: {e}");
            }
        }
    };
    std::process::Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    }
}

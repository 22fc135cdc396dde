//! Helpers shared by the integration tests of the runtime (`runtime/tests`) and of the
//! `kplace` command (`cli/tests`, which include this file by path): building the C test
//! libraries, finding the workspace's own libraries and binary, and ending child processes.

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
        .expect("a crate's directory has the workspace as parent")
        .to_path_buf()
}

/// Whether these are test executables carried to another machine (bench/gpu-check.sh's
/// bundle): `$KPLACE_WORKSPACE` names the repository there and `$KPLACE_LIB_DIR` the bundle's
/// libraries; nothing of the build machine's target directory is assumed.
pub fn carried() -> bool {
    std::env::var_os("KPLACE_WORKSPACE").is_some()
}

/// The `kplace` binary: `$KPLACE_BIN` when set (carried test executables), else cargo's.
pub fn kplace_bin() -> PathBuf {
    std::env::var_os("KPLACE_BIN")
        .map(PathBuf::from)
        .or_else(|| option_env!("CARGO_BIN_EXE_kplace").map(PathBuf::from))
        .expect("the kplace binary: run the tests of kplace-cli, or set KPLACE_BIN")
}

/// Builds `runtime/tests/c/<source>` (or `<source>` under the workspace, when it has a
/// directory) into a shared library named `lib<name>.so` with extra `defines`, once per test
/// binary run, and returns its path. Panics with the compiler's output
/// when the build fails: the C sources are part of the test suite.
pub fn build_c_library(source: &str, name: &str, defines: &[&str]) -> PathBuf {
    // Carried executables have no cargo scratch directory.
    let dir = if carried() {
        std::env::temp_dir().join("kplace-test-c-libs")
    } else {
        Path::new(env!("CARGO_TARGET_TMPDIR")).join("c-libs")
    };
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
        .arg(if source.contains('/') {
            workspace().join(source)
        } else {
            workspace().join("runtime/tests/c").join(source)
        })
        .arg("-lm")
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

/// How long any kplace process a test starts may run before the test kills it and fails: far
/// longer than any of them takes on a loaded machine, a limit, not a timing.
pub const PROCESS_LIMIT: std::time::Duration = std::time::Duration::from_secs(300);

/// Runs `cmd` to its end within [`PROCESS_LIMIT`] (see [`output_within`]).
pub fn output(cmd: &mut Command) -> std::process::Output {
    output_within(cmd, PROCESS_LIMIT, None)
}

/// A child that is killed and reaped when this is dropped, so a test that fails (panics)
/// leaves no process behind.
pub struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `cmd` with stdout and stderr captured and waits at most `limit` for it: past that it
/// is killed and the test fails with what it printed. With `feed`, its stdin is a pipe that
/// `feed` writes on a thread of its own (a write fails once the child has exited).
pub fn output_within(
    cmd: &mut Command,
    limit: std::time::Duration,
    feed: Option<Box<dyn FnOnce(std::process::ChildStdin) + Send>>,
) -> std::process::Output {
    use std::io::Read;
    use std::process::Stdio;
    use std::time::{Duration, Instant};

    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.stdin(if feed.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    let mut child = KillOnDrop(cmd.spawn().expect("start the command"));
    if let (Some(feed), Some(stdin)) = (feed, child.0.stdin.take()) {
        std::thread::spawn(move || feed(stdin));
    }
    // Each pipe is read on a thread; what it read comes back on a channel, so that a pipe
    // some grandchild keeps open cannot hold the test.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            let _ = tx.send(bytes);
        });
        rx
    };
    let stdout = drain(
        child
            .0
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .0
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.0.try_wait().expect("poll the child") {
            break Some(status);
        }
        if Instant::now() >= deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // Killed now if it is still running: then its pipes close and the drains end.
    drop(child);
    let collect = |rx: std::sync::mpsc::Receiver<Vec<u8>>| {
        rx.recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| b"(still open 10 s after the child ended)".to_vec())
    };
    let (stdout, stderr) = (collect(stdout), collect(stderr));
    let Some(status) = status else {
        panic!(
            "{cmd:?} still ran after {limit:?}: killed\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&stdout),
            String::from_utf8_lossy(&stderr)
        );
    };
    std::process::Output {
        status,
        stdout,
        stderr,
    }
}

/// A child process that is killed and reaped when the guard goes, on a test's failure too.
pub struct Guard {
    child: Option<std::process::Child>,
    stdout: Option<std::thread::JoinHandle<String>>,
    stderr: Option<std::thread::JoinHandle<String>>,
    /// Stderr as it arrives.
    seen: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
}

/// How a guarded child ended, with everything it printed.
pub struct Ended {
    /// Its exit status.
    pub status: std::process::ExitStatus,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

impl Guard {
    /// Starts `command` with stdout and stderr captured in the background (so it never blocks
    /// on a full pipe).
    pub fn spawn(command: &mut Command) -> Guard {
        use std::io::Read;
        use std::process::Stdio;
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the process");
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let collect =
            |mut pipe: Box<dyn Read + Send>,
             seen: Option<std::sync::Arc<std::sync::Mutex<Vec<u8>>>>| {
                std::thread::spawn(move || {
                    let mut text = Vec::new();
                    let mut chunk = [0u8; 4096];
                    while let Ok(n) = pipe.read(&mut chunk) {
                        if n == 0 {
                            break;
                        }
                        text.extend_from_slice(&chunk[..n]);
                        if let Some(seen) = &seen {
                            seen.lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .extend_from_slice(&chunk[..n]);
                        }
                    }
                    String::from_utf8_lossy(&text).into_owned()
                })
            };
        let stdout = child.stdout.take().map(|p| collect(Box::new(p), None));
        let stderr = child
            .stderr
            .take()
            .map(|p| collect(Box::new(p), Some(std::sync::Arc::clone(&seen))));
        Guard {
            child: Some(child),
            stdout,
            stderr,
            seen,
        }
    }

    /// The child's pid.
    pub fn id(&self) -> u32 {
        self.child.as_ref().map_or(0, std::process::Child::id)
    }

    /// Sends `signal` to the child.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([format!("-{signal}"), self.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{signal} {}", self.id());
    }

    /// Waits until the child's stderr contains `needle`, at most `timeout`; panics (after
    /// killing it) if it exits first or the time runs out.
    pub fn wait_stderr(&mut self, needle: &str, timeout: std::time::Duration) {
        let start = std::time::Instant::now();
        loop {
            let seen =
                String::from_utf8_lossy(&self.seen.lock().unwrap_or_else(|e| e.into_inner()))
                    .into_owned();
            if seen.contains(needle) {
                return;
            }
            if !self.running() || start.elapsed() > timeout {
                let ended = self.kill();
                panic!(
                    "{needle:?} never came ({}):\n{}\n{}",
                    ended.status, ended.stdout, ended.stderr
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// Whether the child is still running.
    pub fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Waits for the child's readiness file `path` (written by `kplace run --ready-file`), at
    /// most `timeout`; returns the ports it lists. Panics, with what the child printed, if it
    /// exits first or the time runs out.
    pub fn wait_ready(&mut self, path: &Path, timeout: std::time::Duration) -> Vec<u16> {
        let start = std::time::Instant::now();
        loop {
            if let Ok(text) = std::fs::read_to_string(path)
                && let Ok(value) = serde_json::from_str::<serde_json::Value>(&text)
            {
                return value["sources"]
                    .as_array()
                    .expect("sources")
                    .iter()
                    .map(|s| {
                        let s = s.as_str().expect("a source string");
                        s.rsplit(':')
                            .next()
                            .and_then(|p| p.parse().ok())
                            .expect("a port")
                    })
                    .collect();
            }
            if !self.running() || start.elapsed() > timeout {
                let ended = self.kill();
                panic!(
                    "not ready ({}):\n{}\n{}",
                    ended.status, ended.stdout, ended.stderr
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// Waits at most `timeout` for the child to exit; panics (after killing it) if it does not.
    pub fn wait(mut self, timeout: std::time::Duration) -> Ended {
        let start = std::time::Instant::now();
        while self.running() {
            if start.elapsed() > timeout {
                let ended = self.kill();
                panic!(
                    "still running after {timeout:?}; killed:\n{}\n{}",
                    ended.stdout, ended.stderr
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        self.finish()
    }

    /// Kills the child and returns what it printed.
    pub fn kill(&mut self) -> Ended {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
        }
        self.finish()
    }

    fn finish(&mut self) -> Ended {
        let status = self
            .child
            .take()
            .map(|mut c| c.wait().expect("reap the child"))
            .expect("a child");
        Ended {
            status,
            stdout: self
                .stdout
                .take()
                .map(|h| h.join().unwrap_or_default())
                .unwrap_or_default(),
            stderr: self
                .stderr
                .take()
                .map(|h| h.join().unwrap_or_default())
                .unwrap_or_default(),
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

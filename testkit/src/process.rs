//! Child processes in tests: running a command to its end within a limit, and guards that
//! kill and reap a child when a test ends, on a failure too. No test leaves a process behind,
//! and none waits forever on one: every wait has a limit, and a child past it is killed and
//! the test fails with what it printed.

use std::path::Path;
use std::process::Command;

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

    /// What the child has written to stderr so far.
    pub fn stderr_so_far(&self) -> String {
        String::from_utf8_lossy(&self.seen.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
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

//! The bundled `kplace` command, run from Python as a user at a terminal runs it: its progress
//! (what it prints on stderr) passed on to Python's `sys.stderr` a line at a time as it comes,
//! so a notebook shows a long search as it goes, and Ctrl-C (interrupting the kernel) passed
//! on to it as one SIGINT, which ends every kplace command cleanly with its results written,
//! as at a terminal.
//!
//! Guarantees: the command runs in its own process group, so a terminal's Ctrl-C reaches it
//! once, through here, never twice (a second SIGINT kills kplace at once); a second Ctrl-C
//! here kills it and raises KeyboardInterrupt, as at a terminal; it never outlives
//! the call (a guard kills and reaps it on every way out); Python's signals are looked at
//! every [`POLL`]; a command still running [`GRACE`] after its SIGINT is killed; what is kept
//! of its output is bounded (the last [`MAX_STDOUT`] bytes of stdout, stderr passed on a line
//! of at most [`MAX_LINE`] bytes at a time, the last [`MESSAGE_TAIL`] bytes of
//! stderr for an error's message).

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crossbeam::channel::{self, RecvTimeoutError};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;

use crate::errors::KplaceError;

/// How often the wait looks at Python's signals (and forwards what the command printed).
pub const POLL: Duration = Duration::from_millis(50);

/// How long a command may take to end after its SIGINT before it is killed: a trial running
/// when a search is interrupted ends at once, a run writes its report.
pub const GRACE: Duration = Duration::from_secs(30);

/// How long the command's output is read after it has exited (a process it started and
/// left behind may hold its pipes open).
pub const AFTER_EXIT: Duration = Duration::from_secs(2);

/// The most lines of stderr waiting to be passed on; past them the command waits to print.
const LINES_WAITING: usize = 4096;

/// The most bytes of one line of the command's stderr passed on at once.
const MAX_LINE: u64 = 64 << 10;

/// The most bytes of the command's stdout kept (its end).
pub const MAX_STDOUT: usize = 16 << 20;

/// The most bytes of the command's stderr an error carries (its end).
pub const MESSAGE_TAIL: usize = 4000;

/// How a command ended.
pub struct Finished {
    pub status: ExitStatus,
    /// Its stdout, its last [`MAX_STDOUT`] bytes.
    pub stdout: String,
    /// The end of its stderr, up to [`MESSAGE_TAIL`] bytes.
    pub stderr_tail: String,
    /// Whether Ctrl-C stopped it (its SIGINT sent).
    pub interrupted: bool,
}

impl Finished {
    /// The error a command that wrote nothing to read back raises: what it printed last.
    pub fn error(&self, what: &str) -> PyErr {
        KplaceError::new_err(format!(
            "{what} ({}): {}",
            self.status,
            self.stderr_tail.trim()
        ))
    }

    /// What the caller raises when the command was interrupted and left nothing to return:
    /// the KeyboardInterrupt it took.
    pub fn interruption(&self) -> PyErr {
        PyKeyboardInterrupt::new_err("kplace: interrupted before it wrote its results")
    }
}

/// Kills and reaps the command unless it has ended.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// Takes `error`, raised while the command runs: a first KeyboardInterrupt is passed on to the
/// command (`pid`) as SIGINT and noted in `interrupted`; a second one, or any other error,
/// is returned, and the command is killed as it goes.
fn interrupt(
    py: Python<'_>,
    error: PyErr,
    pid: Pid,
    interrupted: &mut Option<Instant>,
) -> PyResult<()> {
    if !error.is_instance_of::<PyKeyboardInterrupt>(py) || interrupted.is_some() {
        return Err(error);
    }
    let _ = kill(pid, Signal::SIGINT);
    *interrupted = Some(Instant::now());
    Ok(())
}

/// Runs `command` with `args` to its end: its stderr lines written to `sys.stderr` as they
/// come unless `quiet`, Ctrl-C forwarded as SIGINT.
pub fn run(py: Python<'_>, command: &Path, args: &[String], quiet: bool) -> PyResult<Finished> {
    let mut child = Command::new(command);
    child
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // Kernels written in Python run, in the command, in this interpreter, with its packages.
    if std::env::var_os(kplace::plugin::PYTHON_ENV).is_none() {
        let executable: std::path::PathBuf = py.import("sys")?.getattr("executable")?.extract()?;
        if !executable.as_os_str().is_empty() {
            child.env(kplace::plugin::PYTHON_ENV, executable);
        }
    }
    let child = child
        .spawn()
        .map_err(|e| KplaceError::new_err(format!("cannot run {}: {e}", command.display())))?;
    let mut guard = Guard(child);
    let (stdout, stderr) = match (guard.0.stdout.take(), guard.0.stderr.take()) {
        (Some(out), Some(err)) => (out, err),
        _ => return Err(KplaceError::new_err("the command's output was not piped")),
    };
    let (out_done, out_read) = channel::bounded::<String>(1);
    std::thread::spawn(move || {
        // All of it read, so the command never blocks on a full pipe; its end kept.
        let _ = out_done.send(kplace::os::process::drain_tail(stdout, MAX_STDOUT));
    });
    let (lines, said) = channel::bounded::<String>(LINES_WAITING);
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stderr);
        let mut line = Vec::new();
        // A line past MAX_LINE is passed on in pieces of that many bytes.
        while (&mut reader)
            .take(MAX_LINE)
            .read_until(b'\n', &mut line)
            .is_ok_and(|read| read > 0)
        {
            if lines
                .send(String::from_utf8_lossy(&line).into_owned())
                .is_err()
            {
                break;
            }
            line.clear();
        }
    });
    let mut tail = String::new();
    let mut pass_on = |py: Python<'_>, line: String| -> PyResult<()> {
        if !quiet {
            let err = py.import("sys")?.getattr("stderr")?;
            err.call_method1("write", (&line,))?;
            err.call_method0("flush")?;
        }
        tail.push_str(&line);
        if tail.len() > 2 * MESSAGE_TAIL {
            let mut cut = tail.len() - MESSAGE_TAIL;
            while !tail.is_char_boundary(cut) {
                cut += 1;
            }
            tail.drain(..cut);
        }
        Ok(())
    };
    let pid = i32::try_from(guard.0.id())
        .map(Pid::from_raw)
        .map_err(|_| KplaceError::new_err("the command's process id is out of range"))?;
    let mut interrupted: Option<Instant> = None;
    let status = loop {
        match py.detach(|| said.recv_timeout(POLL)) {
            // Ctrl-C may come while Python writes a line (a notebook's stream is Python code).
            Ok(line) => {
                if let Err(e) = pass_on(py, line) {
                    interrupt(py, e, pid, &mut interrupted)?;
                }
            }
            // Its stderr closed: the command is ending (or closed it and goes on).
            Err(RecvTimeoutError::Disconnected) => py.detach(|| std::thread::sleep(POLL)),
            Err(RecvTimeoutError::Timeout) => {}
        }
        match guard.0.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => {
                return Err(KplaceError::new_err(format!(
                    "cannot wait for {}: {e}",
                    command.display()
                )));
            }
        }
        if let Err(e) = py.check_signals() {
            interrupt(py, e, pid, &mut interrupted)?;
        }
        if interrupted.is_some_and(|at| at.elapsed() > GRACE) {
            let _ = guard.0.kill();
        }
    };
    // The readers end with the pipes, which close when the command has exited, unless a
    // process it left behind holds them: that one is waited for [`AFTER_EXIT`] at most.
    let end = Instant::now() + AFTER_EXIT;
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        match py.detach(|| said.recv_timeout(left)) {
            Ok(line) => pass_on(py, line)?,
            Err(_) => break,
        }
    }
    let left = end.saturating_duration_since(Instant::now());
    let stdout = py
        .detach(|| out_read.recv_timeout(left.max(POLL)))
        .unwrap_or_default();
    Ok(Finished {
        status,
        stdout,
        stderr_tail: tail,
        interrupted: interrupted.is_some(),
    })
}

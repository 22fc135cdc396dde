//! NVIDIA MPS (Multi-Process Service): a private control daemon for runs that share a GPU with
//! a co-tenant, and the check that a process really is an MPS client.
//!
//! MPS falls back silently: a CUDA process that cannot reach a control daemon runs without MPS
//! and says nothing. So every result records whether the process was an MPS client, checked by
//! asking the daemon for its servers' client lists ([`client_status`], [`RunMps`]).
//!
//! # The private daemon
//! [`start`] runs `nvidia-cuda-mps-control -d` with `CUDA_MPS_PIPE_DIRECTORY` and
//! `CUDA_MPS_LOG_DIRECTORY` set to private directories ([`MpsDirs`]: by default
//! `$XDG_RUNTIME_DIR/kplace-mps/{pipe,log}`, else `/tmp/kplace-mps-<uid>/{pipe,log}`), so it
//! neither needs root nor meets a system-wide daemon. A CUDA process becomes its client only if
//! it has the same `CUDA_MPS_PIPE_DIRECTORY` in its environment when it initializes CUDA
//! ([`MpsDirs::client_env`]).
//!
//! # Talking to the daemon
//! Every query runs `nvidia-cuda-mps-control` (no arguments) with the same environment, writes
//! one command line to its stdin, closes it and reads its stdout, within [`QUERY_TIMEOUT`].
//! What is assumed of the control program (from NVIDIA's MPS documentation and man page; not
//! checked on a GPU machine from this code's tests, which use a fake):
//! - `-d` starts the control daemon in the background and returns.
//! - The daemon creates its control pipe, `control`, in the pipe directory; without it no
//!   daemon can answer there, and no query is made ([`MpsDirs::control_pipe`]).
//! - With the daemon reachable, the client exits 0 after answering; without it, it prints
//!   `Cannot find MPS control daemon process` ([`NO_DAEMON`]) and exits non-zero (or, at
//!   worst, 0): either way the daemon "does not answer", which reads as not running, never as
//!   an answer that failed to parse.
//! - `get_server_list` prints the pid of each MPS server, one decimal pid per line; nothing
//!   when no server runs (servers start lazily, with their first client).
//! - `get_client_list <server pid>` prints the pid of each client of that server, one per line;
//!   nothing when it has none.
//! - `get_default_active_thread_percentage` prints one number (e.g. `100.0`);
//!   `set_default_active_thread_percentage <p>` sets it for servers started afterwards.
//! - `quit` makes the daemon (and its servers) exit; it stops answering soon after.
//! - A daemon busy with another client's command makes the client say `Cannot send command to
//!   MPS control daemon process` ([`BUSY`]) and exit 1: seen on an H200 machine when two
//!   pipelines checked at once that they were clients. [`Control::ask`] asks again.
//!
//! The parsers ([`parse_pid_list`], [`parse_percentage`]) are strict: leading and trailing
//! blanks and empty lines are ignored, and anything else that is not a pid (or one number) is an
//! error quoting the output, so an unexpected message is never read as "no clients".

use std::ffi::OsString;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

/// The MPS control program, looked up on `PATH`.
pub const CONTROL_PROGRAM: &str = "nvidia-cuda-mps-control";

/// The environment variable naming the daemon's pipe directory, for the daemon and its clients.
pub const PIPE_ENV: &str = "CUDA_MPS_PIPE_DIRECTORY";

/// The environment variable naming the daemon's log directory.
pub const LOG_ENV: &str = "CUDA_MPS_LOG_DIRECTORY";

/// CUDA's own default pipe directory, used by clients without [`PIPE_ENV`].
pub const DEFAULT_SYSTEM_PIPE_DIR: &str = "/tmp/nvidia-mps";

/// What the control program says when no daemon listens on its pipe directory.
pub const NO_DAEMON: &str = "Cannot find MPS control daemon process";

/// What the control program says, exiting 1, when the daemon is busy with another client's
/// command: two processes asking at once (two pipelines checking that they are clients) is
/// enough, as the first run on a GPU machine showed. [`Control::ask`] asks again.
pub const BUSY: &str = "Cannot send command to MPS control daemon process";

/// How often [`Control::ask`] tries a command the daemon was too busy to take, and how long it
/// waits after the first try (doubling after each): about 1.3 s in all.
pub const BUSY_TRIES: u32 = 8;
const BUSY_FIRST_WAIT: Duration = Duration::from_millis(10);

/// The most of the control program's output read back for an error: far more than it says.
const MAX_SAID_BYTES: u64 = 1 << 20;

/// How long one query of the control daemon may take.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(5);

/// How long [`start`] waits for the new daemon to answer, and [`stop`] for it to go.
pub const DAEMON_TIMEOUT: Duration = Duration::from_secs(20);

/// Why an MPS operation failed.
#[derive(Debug, thiserror::Error)]
pub enum MpsError {
    /// What MPS needs is missing here: each entry names one thing (the control program, the
    /// CUDA driver).
    #[error("MPS cannot be used here: {}", .0.join("; "))]
    Missing(Vec<String>),
    /// A setting out of range.
    #[error("{0}")]
    Invalid(String),
    /// A daemon already answers on the pipe directory [`start`] was given.
    #[error(
        "an MPS control daemon already answers on {0}: stop it first (kplace mps stop --dir ...)"
    )]
    AlreadyRunning(PathBuf),
    /// The control program failed, timed out, or the daemon did not come up or go away.
    #[error("{command}: {reason}")]
    Control {
        /// What was run or asked, e.g. `get_server_list`.
        command: String,
        /// What went wrong, with the program's output when it said something.
        reason: String,
    },
    /// The control program's output is not what was assumed (see the module docs).
    #[error("cannot parse the answer to `{command}`: {reason}")]
    Parse {
        /// The command asked.
        command: String,
        /// What did not parse, quoting the output.
        reason: AnswerError,
    },
    /// A file-system or process operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
}

/// The daemon's private directories.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MpsDirs {
    /// `CUDA_MPS_PIPE_DIRECTORY`: where the daemon listens and its clients connect.
    pub pipe: PathBuf,
    /// `CUDA_MPS_LOG_DIRECTORY`: the daemon's and servers' logs (`control.log`, `server.log`).
    pub log: PathBuf,
}

impl MpsDirs {
    /// `base/pipe` and `base/log`.
    pub fn under(base: &Path) -> MpsDirs {
        MpsDirs {
            pipe: base.join("pipe"),
            log: base.join("log"),
        }
    }

    /// The default base directory: `$XDG_RUNTIME_DIR/kplace-mps` when that variable names a
    /// directory, else `/tmp/kplace-mps-<uid>`. Private to the user either way.
    pub fn default_base() -> PathBuf {
        match std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
            Some(dir) if dir.is_dir() => dir.join("kplace-mps"),
            _ => {
                let uid = kplace::os::process::user_id();
                PathBuf::from(format!("/tmp/kplace-mps-{uid}"))
            }
        }
    }

    /// The directories under [`default_base`](Self::default_base).
    pub fn default_dirs() -> MpsDirs {
        MpsDirs::under(&MpsDirs::default_base())
    }

    /// The daemon's control pipe, which it creates in the pipe directory when it starts.
    pub fn control_pipe(&self) -> PathBuf {
        control_pipe_in(&self.pipe)
    }

    /// The environment a process needs to become a client of this daemon: set it before the
    /// process initializes CUDA (e.g. on the `Command` that starts it).
    pub fn client_env(&self) -> [(&'static str, OsString); 1] {
        [(PIPE_ENV, self.pipe.clone().into_os_string())]
    }
}

/// One MPS server and its clients.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MpsServer {
    /// The server's pid.
    pub pid: u32,
    /// Its clients' pids, as the daemon lists them.
    pub clients: Vec<u32>,
}

/// What [`status`] found.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MpsStatus {
    /// The directories asked about.
    pub dirs: MpsDirs,
    /// Whether a control daemon answers on `dirs.pipe`.
    pub running: bool,
    /// The daemon's default active-thread percentage, when it answered that.
    pub default_active_thread_percentage: Option<f64>,
    /// Its servers with their clients (empty when not running, or no client has come yet).
    pub servers: Vec<MpsServer>,
    /// Why no daemon can answer here, when MPS cannot be used at all (the control program is
    /// not on `PATH`); `None` when the daemon was asked.
    pub unavailable: Option<String>,
}

/// Whether a process is an MPS client, by the daemon's client lists.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MpsClient {
    /// The process asked about.
    pub pid: u32,
    /// Whether some server of the daemon lists `pid` as its client.
    pub is_client: bool,
    /// The daemon's pipe directory asked.
    pub pipe_dir: PathBuf,
    /// The server whose client list holds `pid`.
    pub server: Option<u32>,
    /// The daemon's default active-thread percentage, when it answered that.
    pub active_thread_percentage: Option<f64>,
    /// Every server with its clients.
    pub servers: Vec<MpsServer>,
}

pub use kplace::report::run::RunMps;

mod client;
mod status;
pub use client::{check_run, client_status, client_status_with, effective_pipe_dir};

/// A handle on the control program for one pipe directory.
#[derive(Clone, Debug)]
pub struct Control {
    program: PathBuf,
    dirs: MpsDirs,
}

/// `program` found on `PATH`, as the shell would: the first directory holding an executable
/// file of that name.
pub fn find_on_path(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
}

/// Checks that MPS can be used here: the control program on `PATH` and a loadable CUDA driver.
/// The error names everything missing.
pub fn require() -> Result<PathBuf, MpsError> {
    let program = find_on_path(CONTROL_PROGRAM);
    let mut missing = Vec::new();
    if program.is_none() {
        missing.push(format!("{CONTROL_PROGRAM} not found on PATH"));
    }
    if let Some(reason) = kplace::cuda::probe::libcuda_missing() {
        missing.push(format!("no CUDA driver found ({reason})"));
    }
    match program {
        Some(p) if missing.is_empty() => Ok(p),
        _ => Err(MpsError::Missing(missing)),
    }
}

impl Control {
    /// The control program for `dirs`, after [`require`].
    pub fn new(dirs: &MpsDirs) -> Result<Control, MpsError> {
        Ok(Control {
            program: require()?,
            dirs: dirs.clone(),
        })
    }

    /// The control program at `program` for `dirs`, without checking for a driver (queries
    /// need none).
    pub fn with_program(program: PathBuf, dirs: &MpsDirs) -> Control {
        Control {
            program,
            dirs: dirs.clone(),
        }
    }

    /// The directories this handle talks to.
    pub fn dirs(&self) -> &MpsDirs {
        &self.dirs
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.env(PIPE_ENV, &self.dirs.pipe)
            .env(LOG_ENV, &self.dirs.log);
        cmd
    }

    /// Sends one command line to the daemon and returns its stdout. Errors when there is no
    /// control pipe (no daemon; nothing is run), when the program cannot run, exits non-zero
    /// or says [`NO_DAEMON`] (no daemon answers), or takes longer than [`QUERY_TIMEOUT`]. A
    /// daemon busy with another client ([`BUSY`]) is asked again, [`BUSY_TRIES`] times in all,
    /// and the error says how often it was tried.
    pub fn ask(&self, command: &str) -> Result<String, MpsError> {
        let (mut tries, mut wait) = (1, BUSY_FIRST_WAIT);
        loop {
            match self.ask_once(command) {
                Err(MpsError::Control { reason, .. })
                    if reason.contains(BUSY) && tries < BUSY_TRIES =>
                {
                    std::thread::sleep(wait);
                    (tries, wait) = (tries + 1, wait * 2);
                }
                Err(MpsError::Control { command, reason }) if reason.contains(BUSY) => {
                    return Err(MpsError::Control {
                        command,
                        reason: format!("{reason} (the daemon was busy at each of {tries} tries)"),
                    });
                }
                answer => return answer,
            }
        }
    }

    /// One try of [`Control::ask`].
    fn ask_once(&self, command: &str) -> Result<String, MpsError> {
        let fail = |reason: String| MpsError::Control {
            command: format!("{CONTROL_PROGRAM} <<< {command:?}"),
            reason,
        };
        if !self.dirs.control_pipe().exists() {
            return Err(fail(format!(
                "no MPS control daemon answers on {}: it has no control pipe",
                self.dirs.pipe.display()
            )));
        }
        // The command is written into the pipe before the client starts, and the write end
        // closed, so a client that exits without reading cannot make this write fail (nor,
        // with SIGPIPE at its default disposition as `kplace` sets it, kill this process); it
        // is reported by its status below. One short line fits any pipe's buffer.
        let (stdin, mut feed) =
            std::io::pipe().map_err(|e| fail(format!("cannot create a pipe: {e}")))?;
        writeln!(feed, "{command}").map_err(|e| fail(format!("cannot write the command: {e}")))?;
        drop(feed);
        let mut child = self
            .command()
            .stdin(Stdio::from(stdin))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| fail(format!("cannot run {}: {e}", self.program.display())))?;
        let status = wait_for(&mut child, QUERY_TIMEOUT);
        let output = child
            .wait_with_output()
            .map_err(|e| fail(format!("cannot read its output: {e}")))?;
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let said = || {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let text = [stderr.trim(), stdout.trim()]
                .into_iter()
                .filter(|t| !t.is_empty())
                .collect::<Vec<_>>()
                .join(" ");
            if text.is_empty() {
                String::new()
            } else {
                format!(": {text}")
            }
        };
        match status {
            None => Err(fail(format!(
                "no answer within {} s",
                QUERY_TIMEOUT.as_secs()
            ))),
            Some(s) if !s.success() => Err(fail(format!(
                "no MPS control daemon answers on {} ({s}){}",
                self.dirs.pipe.display(),
                said()
            ))),
            Some(_) if said().contains(NO_DAEMON) => Err(fail(format!(
                "no MPS control daemon answers on {}{}",
                self.dirs.pipe.display(),
                said()
            ))),
            Some(_) => Ok(stdout),
        }
    }

    /// Whether a daemon answers `get_server_list` with a list that parses.
    pub fn answers(&self) -> bool {
        self.server_list().is_ok()
    }

    /// The daemon's servers (`get_server_list`).
    pub fn server_list(&self) -> Result<Vec<u32>, MpsError> {
        let command = "get_server_list";
        parse_pid_list(&self.ask(command)?).map_err(|reason| MpsError::Parse {
            command: command.into(),
            reason,
        })
    }

    /// The clients of server `server` (`get_client_list <pid>`).
    pub fn client_list(&self, server: u32) -> Result<Vec<u32>, MpsError> {
        let command = format!("get_client_list {server}");
        parse_pid_list(&self.ask(&command)?).map_err(|reason| MpsError::Parse { command, reason })
    }

    /// Every server with its clients.
    pub fn servers(&self) -> Result<Vec<MpsServer>, MpsError> {
        self.server_list()?
            .into_iter()
            .map(|pid| {
                Ok(MpsServer {
                    pid,
                    clients: self.client_list(pid)?,
                })
            })
            .collect()
    }

    /// The default active-thread percentage (`get_default_active_thread_percentage`).
    pub fn default_active_thread_percentage(&self) -> Result<f64, MpsError> {
        let command = "get_default_active_thread_percentage";
        parse_percentage(&self.ask(command)?).map_err(|reason| MpsError::Parse {
            command: command.into(),
            reason,
        })
    }
}

/// Waits up to `timeout` for `child`; kills it (and reaps it later) when it takes longer.
/// Returns its status, or `None` on timeout.
fn wait_for(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            _ => {
                let _ = child.kill();
                return None;
            }
        }
    }
}

/// The control pipe a daemon listening on `pipe_dir` creates there.
fn control_pipe_in(pipe_dir: &Path) -> PathBuf {
    pipe_dir.join("control")
}

/// An answer of the MPS control daemon that is not what was asked for, quoting it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    /// A line of a pid list that is not a pid.
    #[error("expected one pid per line, got {0:?}")]
    Pid(String),
    /// A word that is not a percentage in [0, 100].
    #[error("expected a percentage, got {0:?}")]
    Percentage(String),
    /// Not one word.
    #[error("expected one number, got {0:?}")]
    NotOne(String),
}

/// Parses a list of pids, one per line (the answer to `get_server_list` and `get_client_list`).
/// Blank lines and surrounding blanks are ignored; empty output is an empty list. Anything else
/// is an error quoting the first bad line.
pub fn parse_pid_list(text: &str) -> Result<Vec<u32>, AnswerError> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .map(|line| match line.parse::<u32>() {
            Ok(pid) if pid > 0 => Ok(pid),
            _ => Err(AnswerError::Pid(line.to_string())),
        })
        .collect()
}

/// Parses the answer to `get_default_active_thread_percentage`: one number in [0, 100], e.g.
/// `100.0`, possibly surrounded by blanks and blank lines.
pub fn parse_percentage(text: &str) -> Result<f64, AnswerError> {
    let mut words = text.split_whitespace();
    match (words.next(), words.next()) {
        (Some(word), None) => match word.parse::<f64>() {
            Ok(p) if (0.0..=100.0).contains(&p) => Ok(p),
            _ => Err(AnswerError::Percentage(word.to_string())),
        },
        _ => Err(AnswerError::NotOne(text.to_string())),
    }
}

fn create_private_dir(dir: &Path) -> Result<(), MpsError> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .and_then(|()| fs::set_permissions(dir, fs::Permissions::from_mode(0o700)))
        .map_err(|source| MpsError::Io {
            what: format!("cannot create {}", dir.display()),
            source,
        })
}

/// Starts a private control daemon on `dirs` and waits until it answers (up to
/// [`DAEMON_TIMEOUT`]); with `active_thread_percentage`, sets the default for the servers it
/// will start. Errors when MPS is missing here ([`MpsError::Missing`]), when a daemon already
/// answers there, or when the new one does not come up (the error names its log directory).
pub fn start(dirs: &MpsDirs, active_thread_percentage: Option<f64>) -> Result<MpsStatus, MpsError> {
    if let Some(p) = active_thread_percentage
        && !(p > 0.0 && p <= 100.0)
    {
        return Err(MpsError::Invalid(format!(
            "the active-thread percentage must be in (0, 100], got {p}"
        )));
    }
    let control = Control::new(dirs)?;
    if control.answers() {
        return Err(MpsError::AlreadyRunning(dirs.pipe.clone()));
    }
    create_private_dir(&dirs.pipe)?;
    create_private_dir(&dirs.log)?;
    // The daemon forks and the program returns. Its output goes to a file rather than a pipe:
    // a daemon that kept an inherited pipe open would make reading it hang.
    let out_path = dirs.log.join("kplace-start.out");
    let out = fs::File::create(&out_path).map_err(|source| MpsError::Io {
        what: format!("cannot create {}", out_path.display()),
        source,
    })?;
    let err = out.try_clone().map_err(|source| MpsError::Io {
        what: format!("cannot reopen {}", out_path.display()),
        source,
    })?;
    let fail = |reason: String| MpsError::Control {
        command: format!("{CONTROL_PROGRAM} -d"),
        reason,
    };
    let mut child = control
        .command()
        .arg("-d")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(|e| fail(format!("cannot run {}: {e}", control.program.display())))?;
    let said = || {
        let text = kplace::os::files::read_text_bounded(&out_path, MAX_SAID_BYTES, "MPS output")
            .unwrap_or_default();
        if text.trim().is_empty() {
            String::new()
        } else {
            format!(": {}", text.trim())
        }
    };
    match wait_for(&mut child, DAEMON_TIMEOUT) {
        Some(status) if status.success() => {}
        Some(status) => return Err(fail(format!("failed ({status}){}", said()))),
        None => {
            let _ = child.wait();
            return Err(fail(format!(
                "did not return within {} s{}",
                DAEMON_TIMEOUT.as_secs(),
                said()
            )));
        }
    }
    let deadline = Instant::now() + DAEMON_TIMEOUT;
    while !control.answers() {
        if Instant::now() >= deadline {
            return Err(fail(format!(
                "started, but no daemon answers on {} after {} s (see {}/control.log){}",
                dirs.pipe.display(),
                DAEMON_TIMEOUT.as_secs(),
                dirs.log.display(),
                said()
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if let Some(p) = active_thread_percentage {
        control.ask(&format!("set_default_active_thread_percentage {p}"))?;
    }
    status_of(&control)
}

/// Stops the daemon on `dirs` (`quit`) and waits until it no longer answers (up to
/// [`DAEMON_TIMEOUT`]). Returns `false` when none answered in the first place. Errors when MPS
/// is missing here or the daemon does not go.
pub fn stop(dirs: &MpsDirs) -> Result<bool, MpsError> {
    let control = Control::new(dirs)?;
    if !control.answers() {
        return Ok(false);
    }
    control.ask("quit")?;
    let deadline = Instant::now() + DAEMON_TIMEOUT;
    while control.answers() {
        if Instant::now() >= deadline {
            return Err(MpsError::Control {
                command: "quit".into(),
                reason: format!(
                    "the daemon on {} still answers after {} s",
                    dirs.pipe.display(),
                    DAEMON_TIMEOUT.as_secs()
                ),
            });
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(true)
}

/// Whether a daemon answers on `dirs`, its default active-thread percentage, servers and their
/// clients. Without the control program on `PATH` none can answer: not running, with
/// `unavailable` saying why. Queries need no driver. Errors when a running daemon's answers do
/// not parse.
pub fn status(dirs: &MpsDirs) -> Result<MpsStatus, MpsError> {
    match find_on_path(CONTROL_PROGRAM) {
        Some(program) => status_of(&Control::with_program(program, dirs)),
        None => Ok(MpsStatus {
            dirs: dirs.clone(),
            running: false,
            default_active_thread_percentage: None,
            servers: Vec::new(),
            unavailable: Some(
                MpsError::Missing(vec![format!("{CONTROL_PROGRAM} not found on PATH")]).to_string(),
            ),
        }),
    }
}

fn status_of(control: &Control) -> Result<MpsStatus, MpsError> {
    let dirs = control.dirs.clone();
    let servers = match control.server_list() {
        Ok(list) => list,
        // A daemon that answered with something unexpected is running: say so, loudly.
        Err(e @ MpsError::Parse { .. }) => return Err(e),
        Err(_) => {
            return Ok(MpsStatus {
                dirs,
                running: false,
                default_active_thread_percentage: None,
                servers: Vec::new(),
                unavailable: None,
            });
        }
    };
    let servers = servers
        .into_iter()
        .map(|pid| {
            Ok(MpsServer {
                pid,
                clients: control.client_list(pid)?,
            })
        })
        .collect::<Result<_, MpsError>>()?;
    Ok(MpsStatus {
        dirs,
        running: true,
        default_active_thread_percentage: control.default_active_thread_percentage().ok(),
        servers,
        unavailable: None,
    })
}

#[cfg(test)]
mod tests;

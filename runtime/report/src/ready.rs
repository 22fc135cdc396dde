//! The ready file: the moment a `kplace run` takes packets, said to whoever started it.
//!
//! A receiver is ready once its plans, pools, kernel states (NVRTC modules, cuFFT plans) and
//! sockets exist: when its receive loops start. `kplace run --ready-file PATH` then writes
//! `{"schema": "kplace-ready/1", "pid": ..., "sources": ["udp://HOST:PORT", ...]}`, one source
//! per pipeline in pipeline order, so a sender started after it loses nothing.
//!
//! # Guarantees
//! - [`ReadyFile::write`] is atomic (a temporary file beside the target, renamed over it): a
//!   reader sees no file or the whole of it, never a part; it never replaces anything but a
//!   regular file ([`kplace_core::os::write`]). A run checks its ready file before any work
//!   ([`check`]), and a ready file that cannot be written when the run is ready ends the run,
//!   since a sender waiting for it would wait forever.
//! - [`ReadyFile::read`] is strict, like every report ([`super::read_json`]): a file that exists
//!   but is not a ready file of this version, or names a source that is not `udp://ADDR:PORT`,
//!   is an error naming the file and the field, never "not ready yet".
//! - [`Readiness`] announces once, when the last of a run's pipelines is ready, never before.
//! - [`wait_ready`], the other side, never waits longer than it is told, and says why when the
//!   child ended first or wrote a file it cannot read.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use kplace_core::os::write::{self, Kind, WriteError};

/// The schema of a ready file.
pub const READY_SCHEMA: &str = "kplace-ready/1";

/// A ready file's contents.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadyFile {
    /// The schema name and version: `kplace-ready/1`.
    pub schema: String,
    /// The receiving process.
    pub pid: u32,
    /// Where each pipeline takes packets, `udp://ADDR:PORT`, in pipeline order.
    pub sources: Vec<String>,
}

impl super::Versioned for ReadyFile {
    const SCHEMA: &'static str = READY_SCHEMA;
}

/// The most bytes a ready file is read for: far more than any (a line per pipeline).
pub const MAX_READY_BYTES: u64 = 1 << 20;

/// Why a ready file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadyError {
    /// The file exists but cannot be read, or holds more than [`MAX_READY_BYTES`].
    #[error(transparent)]
    Io(#[from] kplace_core::os::files::ReadBoundedError),
    /// The file is not a ready file of this version, or a field is wrong.
    #[error(transparent)]
    Read(#[from] super::ReadError),
    /// A source is not `udp://ADDR:PORT`.
    #[error("{origin}: sources[{index}]: {text:?} is not udp://ADDR:PORT")]
    Source {
        /// The file.
        origin: String,
        /// The source's place in the list.
        index: usize,
        /// What it says.
        text: String,
    },
}

impl ReadyFile {
    /// The ready file of this process, listening on `sources`.
    pub fn new(sources: &[SocketAddr]) -> ReadyFile {
        ReadyFile {
            schema: READY_SCHEMA.to_string(),
            pid: std::process::id(),
            sources: sources.iter().map(|a| format!("udp://{a}")).collect(),
        }
    }

    /// Writes it to `path` atomically.
    pub fn write(&self, path: &Path) -> Result<(), WriteError> {
        // Plain strings and a number: it encodes.
        let text = serde_json::to_string(self).unwrap_or_default() + "\n";
        write::write_whole(path, Kind::File, text.as_bytes())
    }

    /// Reads `path`: `Ok(None)` while it does not exist, the sources once it does.
    pub fn read(path: &Path) -> Result<Option<Vec<SocketAddr>>, ReadyError> {
        let origin = path.display().to_string();
        let text =
            match kplace_core::os::files::read_text_bounded(path, MAX_READY_BYTES, "ready file") {
                Ok(text) => text,
                Err(e) if e.is_not_found() => return Ok(None),
                Err(e) => return Err(e.into()),
            };
        let file: ReadyFile = super::read_json(&text, &origin)?;
        file.addresses(&origin).map(Some)
    }

    /// The sources as socket addresses; `origin` names the file in an error.
    pub fn addresses(&self, origin: &str) -> Result<Vec<SocketAddr>, ReadyError> {
        self.sources
            .iter()
            .enumerate()
            .map(|(index, s)| {
                s.strip_prefix("udp://")
                    .and_then(|a| a.parse().ok())
                    .ok_or_else(|| ReadyError::Source {
                        origin: origin.to_string(),
                        index,
                        text: s.clone(),
                    })
            })
            .collect()
    }
}

/// Collects each pipeline's address and announces readiness when the last one arrives.
#[derive(Debug)]
pub struct Readiness {
    file: Option<PathBuf>,
    sources: Mutex<Vec<Option<SocketAddr>>>,
}

impl Readiness {
    /// Readiness of `pipelines` receivers, written to `file` too if given.
    pub fn new(pipelines: usize, file: Option<PathBuf>) -> Arc<Self> {
        Arc::new(Self {
            file,
            sources: Mutex::new(vec![None; pipelines]),
        })
    }

    /// Pipeline `index` listens on `addr`; the last to arrive announces. Fails when the ready
    /// file cannot be written: the pipeline then ends, since no sender would start.
    pub fn ready(&self, index: usize, addr: SocketAddr) -> Result<(), ReadyWriteError> {
        let mut sources = self.sources.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(place) = sources.get_mut(index) {
            *place = Some(addr);
        }
        if sources.iter().all(Option::is_some) {
            let all: Vec<SocketAddr> = sources.iter().flatten().copied().collect();
            announce(&all, self.file.as_deref())?;
        }
        Ok(())
    }
}

/// A ready file that could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write the ready file: {0}")]
pub struct ReadyWriteError(pub WriteError);

impl From<WriteError> for ReadyWriteError {
    fn from(e: WriteError) -> Self {
        ReadyWriteError(e)
    }
}

/// Checks, before any work, that `path` can become a ready file: a regular file or nothing, in
/// a directory that exists or can be made ([`write::check`]).
pub fn check(path: &Path) -> Result<(), ReadyWriteError> {
    Ok(write::check(path, Kind::File)?)
}

/// Says on stderr (`kplace run: ready: udp://...`, one event) and in the ready file `file`, if
/// given, that `sources` take packets.
pub fn announce(sources: &[SocketAddr], file: Option<&Path>) -> Result<(), ReadyWriteError> {
    let list: Vec<String> = sources.iter().map(|a| format!("udp://{a}")).collect();
    tracing::info!("kplace run: ready: {}", list.join(" "));
    if let Some(path) = file {
        ReadyFile::new(sources).write(path)?;
    }
    Ok(())
}

/// Why a child did not become ready ([`wait_ready`]).
#[derive(Debug, thiserror::Error)]
pub enum NotReady {
    /// Its ready file is there but wrong.
    #[error("its ready file is wrong: {0}")]
    File(ReadyError),
    /// It ended before writing its ready file.
    #[error("it exited ({0}) before it was ready")]
    Exited(std::process::ExitStatus),
    /// Whether it is running could not be asked.
    #[error("cannot check on it: {0}")]
    Wait(std::io::Error),
    /// It was not ready within the time given.
    #[error("it was not ready after {} s", .0.as_secs())]
    Timeout(Duration),
}

/// Waits until `child` writes its ready file `path`, for at most `timeout`; `Err` says why not
/// (the file is wrong, the child ended first, with its status, or the time ran out).
pub fn wait_ready(
    child: &mut Child,
    path: &Path,
    timeout: Duration,
) -> Result<Vec<SocketAddr>, NotReady> {
    let start = Instant::now();
    loop {
        match ReadyFile::read(path) {
            Ok(Some(sources)) => return Ok(sources),
            Ok(None) => {}
            Err(e) => return Err(NotReady::File(e)),
        }
        match child.try_wait() {
            Ok(Some(status)) => return Err(NotReady::Exited(status)),
            Ok(None) => {}
            Err(e) => return Err(NotReady::Wait(e)),
        }
        if start.elapsed() >= timeout {
            return Err(NotReady::Timeout(timeout));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_lists_every_source_once_all_are_ready() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ready.json");
        let r = Readiness::new(2, Some(path.clone()));
        r.ready(1, "127.0.0.1:9001".parse().unwrap()).unwrap();
        assert!(!path.exists(), "not before the last pipeline");
        r.ready(0, "127.0.0.1:9000".parse().unwrap()).unwrap();
        assert_eq!(
            ReadyFile::read(&path).unwrap().unwrap(),
            vec![
                "127.0.0.1:9000".parse::<SocketAddr>().unwrap(),
                "127.0.0.1:9001".parse().unwrap()
            ]
        );
    }

    /// The issue's case: `--ready-file /dev/full` renamed a file onto the device. A ready file
    /// is a file: a device, a FIFO or a directory is refused before any work, and left as it is.
    #[test]
    fn a_ready_file_is_never_written_onto_a_device_or_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        let addr: SocketAddr = "127.0.0.1:9000".parse().unwrap();
        match kplace_testkit::devices::null_device_in(dir.path(), "full") {
            Ok(device) => {
                let e = check(&device).unwrap_err().to_string();
                assert!(
                    e.contains("is a character device, not a regular file"),
                    "{e}"
                );
                let r = Readiness::new(1, Some(device.clone()));
                assert!(r.ready(0, addr).is_err());
                assert!(kplace_testkit::devices::is_char_device(&device));
            }
            Err(why) => eprintln!("skipped the device: {why}"),
        }
        let e = check(dir.path()).unwrap_err().to_string();
        assert!(e.contains("is a directory"), "{e}");
        // A directory that is not there yet is made when the file is written; one that cannot
        // be (a regular file stands in its way) is refused, naming it.
        assert!(check(&dir.path().join("no/such/dir/ready.json")).is_ok());
        std::fs::write(dir.path().join("plain"), b"").unwrap();
        let e = check(&dir.path().join("plain/dir/ready.json")).unwrap_err();
        assert!(e.to_string().contains("plain"), "{e}");
        assert!(check(&dir.path().join("ready.json")).is_ok());
    }

    #[test]
    fn waiting_ends_when_the_child_ends_first() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let why = wait_ready(
            &mut child,
            &dir.path().join("never"),
            Duration::from_secs(30),
        )
        .unwrap_err()
        .to_string();
        assert!(why.contains("before it was ready"), "{why}");
    }

    #[test]
    fn a_written_file_reads_back_and_a_wrong_one_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ready.json");
        assert!(ReadyFile::read(&path).unwrap().is_none(), "not yet");
        let sources: Vec<SocketAddr> = vec![
            "127.0.0.1:9000".parse().unwrap(),
            "[::1]:9001".parse().unwrap(),
        ];
        ReadyFile::new(&sources).write(&path).unwrap();
        assert_eq!(ReadyFile::read(&path).unwrap(), Some(sources));

        let bad = |text: &str| {
            std::fs::write(&path, text).unwrap();
            ReadyFile::read(&path).unwrap_err().to_string()
        };
        let e = bad(r#"{"schema":"kplace-ready/1","pid":1,"sources":["tcp://1.2.3.4:5"]}"#);
        assert!(
            e.contains("sources[0]") && e.contains("tcp://1.2.3.4:5"),
            "{e}"
        );
        let e = bad(r#"{"schema":"kplace-ready/1","pid":1,"ports":[5]}"#);
        assert!(e.contains("ready.json") && e.contains("ports"), "{e}");
        let e = bad(r#"{"schema":"kplace-ready/0","pid":1,"sources":[]}"#);
        assert!(e.contains("kplace-ready/1"), "{e}");
    }
}

//! The ready file: the moment a `kplace run` takes packets, said to whoever started it.
//!
//! A receiver is ready once its plans, pools, kernel states (NVRTC modules, cuFFT plans) and
//! sockets exist: when its receive loops start. `kplace run --ready-file PATH` then writes
//! `{"schema": "kplace-ready/1", "pid": ..., "sources": ["udp://HOST:PORT", ...]}`, one source
//! per pipeline in pipeline order, so a sender started after it loses nothing.
//!
//! # Guarantees
//! - [`ReadyFile::write`] is atomic (a temporary file beside the target, renamed over it): a
//!   reader sees no file or the whole of it, never a part.
//! - [`ReadyFile::read`] is strict, like every report ([`super::read_json`]): a file that exists
//!   but is not a ready file of this version, or names a source that is not `udp://ADDR:PORT`,
//!   is an error naming the file and the field, never "not ready yet".

use std::io::{self, Write as _};
use std::net::SocketAddr;
use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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

/// Why a ready file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadyError {
    /// The file exists but cannot be read.
    #[error("{origin}: {source}")]
    Io {
        /// The file.
        origin: String,
        /// The system's error.
        source: io::Error,
    },
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
    pub fn write(&self, path: &Path) -> io::Result<()> {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
        let text = serde_json::to_string(self).map_err(io::Error::other)?;
        writeln!(tmp, "{text}")?;
        tmp.persist(path).map_err(|e| e.error)?;
        Ok(())
    }

    /// Reads `path`: `Ok(None)` while it does not exist, the sources once it does.
    pub fn read(path: &Path) -> Result<Option<Vec<SocketAddr>>, ReadyError> {
        let origin = path.display().to_string();
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(ReadyError::Io { origin, source }),
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

#[cfg(test)]
mod tests {
    use super::*;

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

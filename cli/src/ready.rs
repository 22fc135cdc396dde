//! Readiness: the moment every pipeline of a `kplace run` takes packets, told once on stderr
//! (`kplace run: ready: udp://HOST:PORT ...`) and, with `--ready-file PATH`, in the typed ready
//! file ([`kplace::report::ready`]), so a sender started then loses nothing.
//!
//! [`wait_ready`] is the other side: it waits for a child's file, never longer than a stated
//! time, and says why when the child ended first or wrote a file it cannot read.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use kplace::report::ready::ReadyFile;

/// Collects each pipeline's address and announces readiness when the last one arrives.
#[derive(Debug)]
pub(crate) struct Readiness {
    file: Option<PathBuf>,
    sources: Mutex<Vec<Option<SocketAddr>>>,
}

impl Readiness {
    /// Readiness of `pipelines` receivers, written to `file` too if given.
    pub(crate) fn new(pipelines: usize, file: Option<PathBuf>) -> Arc<Self> {
        Arc::new(Self {
            file,
            sources: Mutex::new(vec![None; pipelines]),
        })
    }

    /// Pipeline `index` listens on `addr`; the last to arrive announces.
    pub(crate) fn ready(&self, index: usize, addr: SocketAddr) {
        let mut sources = self.sources.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(place) = sources.get_mut(index) {
            *place = Some(addr);
        }
        if sources.iter().all(Option::is_some) {
            let all: Vec<SocketAddr> = sources.iter().flatten().copied().collect();
            announce(&all, self.file.as_deref());
        }
    }
}

/// Says on stderr (one write) and in `file` that `sources` take packets.
pub(crate) fn announce(sources: &[SocketAddr], file: Option<&Path>) {
    let list: Vec<String> = sources.iter().map(|a| format!("udp://{a}")).collect();
    tracing::info!("kplace run: ready: {}", list.join(" "));
    if let Some(path) = file
        && let Err(e) = write_file(path, sources)
    {
        tracing::warn!("kplace run: warning: {e:#}");
    }
}

/// Writes the readiness file atomically (see [`ReadyFile::write`]).
pub(crate) fn write_file(path: &Path, sources: &[SocketAddr]) -> anyhow::Result<()> {
    ReadyFile::new(sources)
        .write(path)
        .with_context(|| format!("cannot write the ready file {}", path.display()))
}

/// Waits until `child` writes its readiness file `path`, for at most `timeout`; `Err` says
/// why not (the child ended first, with its status, or the time ran out).
pub(crate) fn wait_ready(
    child: &mut Child,
    path: &Path,
    timeout: Duration,
) -> Result<Vec<SocketAddr>, String> {
    let start = Instant::now();
    loop {
        match ReadyFile::read(path) {
            Ok(Some(sources)) => return Ok(sources),
            Ok(None) => {}
            Err(e) => return Err(format!("its ready file is wrong: {e}")),
        }
        match child.try_wait() {
            Ok(Some(status)) => return Err(format!("it exited ({status}) before it was ready")),
            Ok(None) => {}
            Err(e) => return Err(format!("cannot check on it: {e}")),
        }
        if start.elapsed() >= timeout {
            return Err(format!("it was not ready after {} s", timeout.as_secs()));
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
        r.ready(1, "127.0.0.1:9001".parse().unwrap());
        assert!(!path.exists(), "not before the last pipeline");
        r.ready(0, "127.0.0.1:9000".parse().unwrap());
        assert_eq!(
            ReadyFile::read(&path).unwrap().unwrap(),
            vec![
                "127.0.0.1:9000".parse::<SocketAddr>().unwrap(),
                "127.0.0.1:9001".parse().unwrap()
            ]
        );
    }
}

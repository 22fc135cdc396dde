//! The control file of `kplace run --control FILE`: parameters a user changes while a run goes
//! on, by editing a file.
//!
//! The file holds lines `STAGE.PARAM=VALUE`, as `--set` takes them; blank lines and lines
//! starting with `#` are ignored. A [`Watcher`] reads it when the run starts and again each
//! time its modification time or length changes (it looks every [`POLL`]); every line whose
//! value differs from what the file said before becomes a [`ParamUpdate`] for the executor,
//! which applies it from the next frame to begin (`kplace_core::executor`'s control). A line that is
//! not `STAGE.PARAM=VALUE` is reported with its line number and the rest of the file still
//! applies. A missing or unreadable file is reported once, and read again once it changes.
//!
//! Guarantees: the file is read at most once per [`POLL`], at most [`MAX_BYTES`] of it: a
//! file that holds more (`/dev/zero`) is refused whole, never applied in part. A line over
//! [`MAX_LINE_BYTES`] is skipped by its number; a bad line is quoted at most
//! [`kplace_core::os::files::EXCERPT_CHARS`] characters long, and at most [`MAX_REPORTED`] are
//! reported each time the file is read, so stderr stays short whatever the file holds. The
//! watcher's thread ends, joined, when the [`Watcher`] is dropped.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use crossbeam::channel::{Receiver, Sender};

use kplace_core::executor::ParamUpdate;

/// How often the file's metadata is looked at.
pub const POLL: Duration = Duration::from_millis(50);

/// The most of the file that is read.
pub const MAX_BYTES: u64 = 1 << 20;

/// The longest a line may be: a value written inline, a list of thousands of taps included.
pub const MAX_LINE_BYTES: usize = 64 << 10;

/// The most skipped lines reported, each by its number, per reading of the file; the others
/// are counted.
pub const MAX_REPORTED: usize = 8;

/// Watches a control file until dropped.
pub struct Watcher {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Watcher {
    /// Starts watching `path`; the updates come on the returned receiver, for
    /// [`kplace_core::executor::RunOptions::control`].
    pub fn start(path: &Path) -> (Watcher, Receiver<ParamUpdate>) {
        let (tx, rx) = crossbeam::channel::unbounded();
        let stop = Arc::new(AtomicBool::new(false));
        let (path, halt) = (path.to_path_buf(), Arc::clone(&stop));
        let thread = std::thread::spawn(move || watch(&path, &tx, &halt));
        let watcher = Watcher {
            stop,
            thread: Some(thread),
        };
        (watcher, rx)
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The watcher's loop: reads the file whenever it changes, sends what changed in it.
fn watch(path: &Path, updates: &Sender<ParamUpdate>, stop: &AtomicBool) {
    let mut seen: Option<(Option<SystemTime>, u64)> = None;
    let mut values: BTreeMap<(String, String), String> = BTreeMap::new();
    let mut reported_missing = false;
    while !stop.load(Ordering::Acquire) {
        let stamp = std::fs::metadata(path).map(|m| (m.modified().ok(), m.len()));
        match stamp {
            Err(e) => {
                if !reported_missing {
                    tracing::warn!("control file {}: {e}; waiting for it", path.display());
                    reported_missing = true;
                }
                seen = None;
            }
            Ok(stamp) if seen != Some(stamp) => {
                seen = Some(stamp);
                reported_missing = false;
                match kplace_core::os::files::read_text_bounded(path, MAX_BYTES, "control file") {
                    Ok(text) => {
                        let found = changes(path, &text, &mut values);
                        for skipped in &found.skipped {
                            tracing::warn!("{skipped}");
                        }
                        for update in found.updates {
                            if updates.send(update).is_err() {
                                return;
                            }
                        }
                    }
                    Err(e) => tracing::warn!("{e}; nothing in it is applied"),
                }
            }
            Ok(_) => {}
        }
        std::thread::sleep(POLL);
    }
}

/// What one reading of the file asks for.
#[derive(Debug, Default, PartialEq)]
pub struct Changes {
    /// The updates, one per stage, in the order of the file's lines.
    pub updates: Vec<ParamUpdate>,
    /// What to say of the lines skipped: at most [`MAX_REPORTED`], each naming its line and
    /// quoting it cut short, then how many more there were.
    pub skipped: Vec<String>,
}

/// The updates `text` asks for against the values the file gave before (`values`, updated),
/// one per stage, in the order of the file's lines; bad lines are skipped, and said in
/// [`Changes::skipped`].
pub fn changes(
    path: &Path,
    text: &str,
    values: &mut BTreeMap<(String, String), String>,
) -> Changes {
    let mut updates: Vec<ParamUpdate> = Vec::new();
    let mut skipped = Vec::new();
    let mut unreported = 0usize;
    let mut skip = |why: String| {
        if skipped.len() < MAX_REPORTED {
            skipped.push(why);
        } else {
            unreported += 1;
        }
    };
    for (number, line) in text.lines().enumerate() {
        let origin = format!("control file {}, line {}", path.display(), number + 1);
        if line.len() > MAX_LINE_BYTES {
            skip(format!(
                "{origin}: {} bytes, longer than a line may be ({} KiB); the line is skipped",
                line.len(),
                MAX_LINE_BYTES >> 10
            ));
            continue;
        }
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let parsed = line.split_once('=').and_then(|(key, value)| {
            let (stage, param) = key.trim().split_once('.')?;
            let ok = !stage.is_empty() && !param.is_empty();
            ok.then(|| {
                (
                    stage.to_string(),
                    param.to_string(),
                    value.trim().to_string(),
                )
            })
        });
        let Some((stage, param, value)) = parsed else {
            skip(format!(
                "{origin}: {} is not STAGE.PARAM=VALUE; the line is skipped",
                kplace_core::os::files::excerpt(line)
            ));
            continue;
        };
        let key = (stage.clone(), param.clone());
        if values.get(&key) == Some(&value) {
            continue;
        }
        values.insert(key, value.clone());
        match updates.iter_mut().find(|u| u.stage == stage) {
            Some(update) => update.params.push((param, value)),
            None => updates.push(ParamUpdate {
                stage,
                params: vec![(param, value)],
                origin,
            }),
        }
    }
    if unreported > 0 {
        skipped.push(format!(
            "control file {}: {unreported} more lines are skipped",
            path.display()
        ));
    }
    Changes { updates, skipped }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_changed_value_becomes_an_update_once() {
        let path = Path::new("c.txt");
        let mut values = BTreeMap::new();
        let first = changes(
            path,
            "# gains\nconvert.scale=0.5\n\nwindow.window = hamming\nnonsense\nconvert.x=1\n",
            &mut values,
        );
        assert_eq!(
            first.skipped,
            [
                "control file c.txt, line 5: \"nonsense\" is not STAGE.PARAM=VALUE; the line is skipped"
            ]
        );
        assert_eq!(
            first.updates,
            [
                ParamUpdate {
                    stage: "convert".into(),
                    params: vec![("scale".into(), "0.5".into()), ("x".into(), "1".into())],
                    origin: "control file c.txt, line 2".into(),
                },
                ParamUpdate {
                    stage: "window".into(),
                    params: vec![("window".into(), "hamming".into())],
                    origin: "control file c.txt, line 4".into(),
                },
            ]
        );
        let again = changes(path, "convert.scale=0.5\nwindow.window=hann\n", &mut values).updates;
        assert_eq!(again.len(), 1, "only what changed: {again:?}");
        assert_eq!(
            again[0].params,
            [("window".to_string(), "hann".to_string())]
        );
        let bad = changes(path, ".x=1\nstage.=2\n=3\n", &mut values);
        assert!(bad.updates.is_empty());
        assert_eq!(bad.skipped.len(), 3);
    }

    #[test]
    fn a_long_line_is_skipped_by_its_number_and_a_bad_one_quoted_short() {
        let mut values = BTreeMap::new();
        let path = Path::new("c.txt");
        let long = format!(
            "fir.gain=1\n{}\nfir.x={}\nfir.y=2\n",
            "z".repeat(200_000),
            "w".repeat(100)
        );
        let found = changes(path, &long, &mut values);
        assert_eq!(found.updates.len(), 1);
        let names: Vec<&str> = found.updates[0]
            .params
            .iter()
            .map(|(n, _)| n.as_str())
            .collect();
        assert_eq!(
            names,
            ["gain", "x", "y"],
            "the lines around the long one still apply"
        );
        assert_eq!(
            found.skipped[0],
            "control file c.txt, line 2: 200000 bytes, longer than a line may be (64 KiB); the line is skipped"
        );
        let text = format!("{}=\n", "q".repeat(60_000));
        let found = changes(path, &text, &mut values);
        assert!(
            found.skipped[0].starts_with("control file c.txt, line 1: \"qqq"),
            "{:?}",
            found.skipped
        );
        assert!(found.skipped[0].contains("... (60001 bytes) is not STAGE.PARAM=VALUE"));
        assert!(found.skipped[0].len() < 300);
        let many = "bad\n".repeat(100_000);
        let found = changes(path, &many, &mut values);
        assert_eq!(found.skipped.len(), MAX_REPORTED + 1);
        assert_eq!(
            found.skipped[MAX_REPORTED],
            format!(
                "control file c.txt: {} more lines are skipped",
                100_000 - MAX_REPORTED
            )
        );
    }

    #[test]
    fn a_watcher_sends_what_the_file_changes_to_and_stops_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("control.txt");
        let (watcher, updates) = Watcher::start(&path);
        std::thread::sleep(POLL * 2);
        assert!(updates.try_recv().is_err(), "no file, no update");
        std::fs::write(&path, "fir.gain=2\n").unwrap();
        let update = updates.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(update.params, [("gain".to_string(), "2".to_string())]);
        // A change of length is seen whatever the clock's resolution.
        std::fs::write(&path, "fir.gain=2.5\n").unwrap();
        let update = updates.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(update.params, [("gain".to_string(), "2.5".to_string())]);
        drop(watcher);
        assert!(
            updates.recv_timeout(Duration::from_secs(10)).is_err(),
            "the watcher's sender is gone once it is dropped"
        );
    }
}

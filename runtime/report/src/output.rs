//! Where a run's outputs go: a file, or standard output for `-`; every one opened before the
//! run starts, so a path that cannot be written fails at once and loses no run.
//!
//! Guarantees, for every output a run writes ([`OutputFile`]):
//! - **Whole or absent.** A file is written as a [`WholeFile`]: under a temporary name beside
//!   its own, renamed into place once complete ([`OutputFile::commit`]), so a run that fails, a
//!   full disk or a vanished directory never leaves a truncated file under the name asked for,
//!   and nothing but a regular file is ever replaced. An existing FIFO or character device
//!   (`/dev/stdout`, a pipe to `kplace verify`) is written directly, as is a progress log that
//!   is there to be watched ([`OutputFile::live`]); a directory, socket or block device is
//!   refused when the output is opened.
//! - **A failed output costs only itself.** A write that fails is kept, not returned: the run
//!   goes on, that output's later writes are dropped, and its commit reports the error, so the
//!   run's report still says everything else it measured.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use kplace_core::os::write::{self, Kind, WholeFile, WriteError};

/// Whether `path` names standard output.
pub fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Fails, naming `option`, when `path` is `-`: an output that only a file can take (a trace,
/// a picture, a recording, or beside a summary that standard output already carries) must
/// never become a file named `-`.
pub fn file_only(path: &Path, option: &str) -> Result<(), OutputError> {
    if is_stdout(path) {
        return Err(OutputError::FileOnly {
            option: option.to_string(),
        });
    }
    Ok(())
}

/// Where an output's bytes go.
enum Target {
    /// A file written whole: a temporary file renamed onto the path, or a FIFO or device.
    Whole(BufWriter<WholeFile>),
    /// A live log, written in place as the run goes.
    Live(BufWriter<File>),
    /// Standard output.
    Stdout(BufWriter<io::Stdout>),
}

impl Target {
    fn writer(&mut self) -> &mut dyn Write {
        match self {
            Target::Whole(w) => w,
            Target::Live(w) => w,
            Target::Stdout(w) => w,
        }
    }
}

struct State {
    target: Option<Target>,
    /// The first write or flush that failed.
    failed: Option<io::Error>,
}

/// One output of a run (see the module docs): [`OutputFile::writer`] is what the run writes
/// to, and [`OutputFile::commit`] completes it afterwards.
pub struct OutputFile {
    path: PathBuf,
    what: &'static str,
    state: Arc<Mutex<State>>,
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

impl OutputFile {
    /// Opens the `what` output at `path` (`-`: standard output), to appear under its name only
    /// when committed.
    pub fn create(path: &Path, what: &'static str) -> Result<OutputFile, OutputError> {
        Self::open(path, what, false)
    }

    /// Opens the `what` output at `path` to be written in place as the run goes (a log to
    /// watch); its failures are still kept and reported by [`OutputFile::commit`].
    pub fn live(path: &Path, what: &'static str) -> Result<OutputFile, OutputError> {
        Self::open(path, what, true)
    }

    fn open(path: &Path, what: &'static str, live: bool) -> Result<OutputFile, OutputError> {
        let cannot = |cause| OutputError::Create {
            what,
            path: path.to_path_buf(),
            cause,
        };
        let target = if is_stdout(path) {
            Target::Stdout(BufWriter::new(io::stdout()))
        } else if live {
            Target::Live(BufWriter::new(
                write::open_in_place(path, Kind::Stream).map_err(cannot)?,
            ))
        } else {
            Target::Whole(BufWriter::new(
                WholeFile::create(path, Kind::Stream).map_err(cannot)?,
            ))
        };
        Ok(OutputFile {
            path: path.to_path_buf(),
            what,
            state: Arc::new(Mutex::new(State {
                target: Some(target),
                failed: None,
            })),
        })
    }

    /// What the run writes to. Its writes never fail: a failure is kept for
    /// [`OutputFile::commit`], and later writes are dropped.
    pub fn writer(&self) -> Box<dyn Write + Send> {
        Box::new(SoftWriter(Arc::clone(&self.state)))
    }

    /// Flushes the output and, for a file, renames it into place. Fails, naming the output
    /// and its path, if any write failed or it cannot be completed; nothing is then left
    /// under its name (but what a live log or a device already took).
    pub fn commit(self) -> Result<(), OutputError> {
        let mut state = lock(&self.state);
        let failed = |cause: io::Error| OutputError::Write {
            what: self.what,
            path: self.path.clone(),
            cause,
        };
        if let Some(cause) = state.failed.take() {
            // Dropping the target removes a temporary file.
            state.target = None;
            return Err(failed(cause));
        }
        match state.target.take() {
            None => Ok(()),
            Some(Target::Whole(w)) => {
                let file = w.into_inner().map_err(|e| failed(e.into_error()))?;
                file.commit().map_err(|cause| OutputError::Commit {
                    what: self.what,
                    cause,
                })
            }
            Some(Target::Live(mut w)) => w.flush().map_err(failed),
            Some(Target::Stdout(mut w)) => w.flush().map_err(failed),
        }
    }
}

/// An output that could not be opened, written or completed.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The file (or its temporary file beside it) could not be created.
    #[error("cannot create the {what} file {}: {cause}", path.display())]
    Create {
        /// What the output is (`report`, `trace`, ...).
        what: &'static str,
        /// Its path.
        path: PathBuf,
        /// Why.
        cause: WriteError,
    },
    /// The file was written but could not be put in place.
    #[error("the {what} file could not be completed: {cause}")]
    Commit {
        /// What the output is.
        what: &'static str,
        /// Why.
        cause: WriteError,
    },
    /// A write, the flush or the rename into place failed.
    #[error("the {what} file {} could not be written: {cause}", path.display())]
    Write {
        /// What the output is.
        what: &'static str,
        /// Its path.
        path: PathBuf,
        /// The first error met.
        cause: io::Error,
    },
    /// `-` was given for an output that only a file can take.
    #[error("{option} -: this output goes to a file, not to standard output: name one")]
    FileOnly {
        /// The option that named it.
        option: String,
    },
    /// A report could not be encoded as JSON.
    #[error("cannot encode the report")]
    Encode(#[source] serde_json::Error),
}

/// The run's side of an [`OutputFile`].
struct SoftWriter(Arc<Mutex<State>>);

impl SoftWriter {
    fn attempt(&self, op: impl FnOnce(&mut dyn Write) -> io::Result<()>) {
        let mut state = lock(&self.0);
        if state.failed.is_some() {
            return;
        }
        if let Some(target) = state.target.as_mut()
            && let Err(e) = op(target.writer())
        {
            state.failed = Some(e);
        }
    }
}

impl Write for SoftWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.attempt(|w| w.write_all(buf));
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.attempt(|w| w.flush());
        Ok(())
    }
}

/// Completes every output in `outputs`, returning the errors of those that failed.
pub fn commit_all(outputs: Vec<OutputFile>) -> Vec<String> {
    outputs
        .into_iter()
        .filter_map(|o| o.commit().err().map(|e| e.to_string()))
        .collect()
}

/// A report destination, opened now and written when the run is over, atomically (see
/// [`OutputFile`]); a run that fails before writing it leaves nothing behind.
pub struct ReportOutput(OutputFile);

impl ReportOutput {
    /// Opens `path` (or standard output for `-`) so that a bad path fails now.
    pub fn open(path: &Path) -> Result<Self, OutputError> {
        Ok(Self(OutputFile::create(path, "report")?))
    }

    /// Writes the report as pretty JSON, and completes the file.
    pub fn write(self, value: &impl serde::Serialize) -> Result<(), OutputError> {
        let text = serde_json::to_string_pretty(value).map_err(OutputError::Encode)? + "\n";
        // The writer keeps a failure for the commit: this write cannot fail.
        let _ = self.0.writer().write_all(text.as_bytes());
        self.0.commit()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_appears_whole_only_when_committed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        let out = OutputFile::create(&path, "test").unwrap();
        let mut w = out.writer();
        w.write_all(b"hello\n").unwrap();
        w.flush().unwrap();
        assert!(!path.exists(), "nothing under the name before the commit");
        drop(w);
        out.commit().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "hello\n");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "no temporary file left: {names:?}");
        // The mode File::create would give it (the umask applied), not a temporary file's.
        use std::os::unix::fs::PermissionsExt;
        let plain = dir.path().join("plain.txt");
        File::create(&plain).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), mode(&plain));
    }

    #[test]
    fn a_failed_write_is_kept_and_leaves_nothing_under_the_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        std::fs::write(&path, "the previous run's\n").unwrap();
        // A full disk, where /dev/full is the device that is one (never created here).
        match kplace_testkit::devices::dev_full() {
            Ok(dev_full) => {
                let full = OutputFile::create(dev_full, "full").unwrap();
                let mut w = full.writer();
                for _ in 0..10_000 {
                    w.write_all(b"0123456789abcdef").unwrap();
                }
                w.flush().unwrap();
                let err = full.commit().unwrap_err().to_string();
                assert!(
                    err.starts_with("the full file /dev/full could not be written: No space left"),
                    "{err}"
                );
                assert!(kplace_testkit::devices::is_char_device(dev_full));
            }
            Err(why) => eprintln!("skipped the full disk: {why}"),
        }
        // A directory removed under a file: the rename fails, the old file is kept.
        let gone = dir.path().join("gone");
        std::fs::create_dir(&gone).unwrap();
        let out = OutputFile::create(&gone.join("r.json"), "report").unwrap();
        out.writer().write_all(b"{}").unwrap();
        std::fs::remove_dir_all(&gone).unwrap();
        let err = out.commit().unwrap_err().to_string();
        assert!(err.contains("the report file"), "{err}");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "the previous run's\n"
        );
    }

    /// The case: a run's output named as a device node must write into it, never
    /// rename a file onto it; a directory is refused when the output is opened.
    #[test]
    fn a_device_is_written_in_place_and_a_directory_refused() {
        let dir = tempfile::tempdir().unwrap();
        match kplace_testkit::devices::null_device_in(dir.path(), "null") {
            Ok(device) => {
                let out = OutputFile::create(&device, "report").unwrap();
                out.writer().write_all(b"{}\n").unwrap();
                out.commit().unwrap();
                assert!(kplace_testkit::devices::is_char_device(&device));
                let live = OutputFile::live(&device, "progress").unwrap();
                live.writer().write_all(b"{}\n").unwrap();
                live.commit().unwrap();
                assert!(kplace_testkit::devices::is_char_device(&device));
                assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
            }
            Err(why) => eprintln!("skipped the device: {why}"),
        }
        let e = OutputFile::create(dir.path(), "report")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("is a directory, not a regular file"), "{e}");
        let e = OutputFile::live(dir.path(), "progress")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("is a directory, not a regular file"), "{e}");
    }

    #[test]
    fn an_uncommitted_output_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        let out = OutputFile::create(&path, "test").unwrap();
        out.writer().write_all(b"half").unwrap();
        drop(out);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}

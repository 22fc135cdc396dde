//! Where a run's outputs go: a file, or standard output for `-`; every one opened before the
//! run starts, so a path that cannot be written fails at once and loses no run.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;

/// Whether `path` names standard output.
pub(crate) fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Fails, naming `option`, when `path` is `-`: an output that only a file can take (a trace,
/// a picture, a recording, or beside a summary that standard output already carries) must
/// never become a file named `-`.
pub(crate) fn file_only(path: &Path, option: &str) -> anyhow::Result<()> {
    if is_stdout(path) {
        anyhow::bail!("{option} -: this output goes to a file, not to standard output: name one");
    }
    Ok(())
}

/// An output opened for writing: `-` is standard output.
pub(crate) fn open(path: &Path, what: &str) -> anyhow::Result<Box<dyn Write + Send>> {
    if is_stdout(path) {
        return Ok(Box::new(BufWriter::new(io::stdout())));
    }
    let file = File::create(path)
        .with_context(|| format!("cannot create the {what} file {}", path.display()))?;
    Ok(Box::new(BufWriter::new(file)))
}

/// A report destination, opened (created) now and written when the run is over; a run that
/// fails before writing it leaves no empty file behind.
pub(crate) struct ReportOutput {
    path: PathBuf,
    file: Option<File>,
    written: bool,
}

impl ReportOutput {
    /// Creates `path` (or takes standard output for `-`) so that a bad path fails now.
    pub(crate) fn open(path: &Path) -> anyhow::Result<Self> {
        let file = if is_stdout(path) {
            None
        } else {
            Some(
                File::create(path)
                    .with_context(|| format!("cannot create the report {}", path.display()))?,
            )
        };
        Ok(Self {
            path: path.to_path_buf(),
            file,
            written: false,
        })
    }

    /// Writes the report as pretty JSON.
    pub(crate) fn write(mut self, value: &impl serde::Serialize) -> anyhow::Result<()> {
        let text = serde_json::to_string_pretty(value).context("cannot encode the report")? + "\n";
        self.written = true;
        let written = match self.file.take() {
            Some(mut f) => f.write_all(text.as_bytes()).and_then(|()| f.flush()),
            None => {
                let mut out = io::stdout().lock();
                out.write_all(text.as_bytes()).and_then(|()| out.flush())
            }
        };
        written.with_context(|| format!("cannot write the report {}", self.path.display()))
    }
}

impl Drop for ReportOutput {
    fn drop(&mut self) {
        if !self.written && self.file.is_some() {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

//! `kplace run --report-every DURATION`: a JSON line per interval per pipeline
//! (`kplace::report::progress`), each written whole to the progress output (a file, written
//! in place as the run goes so it can be watched, or stdout for `-`), and a bar per pipeline
//! on a terminal (none when stderr is not one). A progress file that cannot be written stops
//! nothing: the run goes on, and says so at its end ([`ProgressOut::commit`]).

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use kplace::executor::Progress;
use kplace::report::progress::ProgressLine;
use kplace::workload::run::ProgressReport;

use kplace::report::output::OutputFile;

/// The progress output of a run, shared by its pipelines.
pub(crate) struct ProgressOut {
    file: OutputFile,
    out: Arc<Mutex<Box<dyn Write + Send>>>,
    bars: MultiProgress,
    frames: u64,
}

impl ProgressOut {
    /// Opens `path` (`-`: stdout) for the lines of a run of `frames` frames per pipeline.
    pub(crate) fn open(path: &Path, frames: u64) -> anyhow::Result<ProgressOut> {
        let file = OutputFile::live(path, "progress")?;
        Ok(ProgressOut {
            out: Arc::new(Mutex::new(file.writer())),
            file,
            bars: MultiProgress::new(),
            frames,
        })
    }

    /// Flushes the progress output; the error says why it could not be written.
    pub(crate) fn commit(self) -> Result<(), String> {
        self.file.commit().map_err(|e| e.to_string())
    }

    /// What pipeline `pipeline` (`None`: the only one) does with each report: its line, and
    /// its bar.
    pub(crate) fn reporter(&self, pipeline: Option<usize>) -> ProgressReport {
        let out = Arc::clone(&self.out);
        let bar = self.bars.add(ProgressBar::new(self.frames));
        bar.set_style(
            ProgressStyle::with_template("{prefix}{bar:30} {pos}/{len} frames, {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar.set_prefix(pipeline.map_or_else(String::new, |i| format!("pipeline {i} ")));
        Box::new(move |progress: &Progress| {
            let line = ProgressLine::new(progress, pipeline);
            let mut text = serde_json::to_string(&line).map_err(std::io::Error::other)?;
            text.push('\n');
            {
                let mut out = out.lock().unwrap_or_else(|e| e.into_inner());
                out.write_all(text.as_bytes())?;
                out.flush()?;
            }
            bar.set_position(progress.frames);
            bar.set_message(format!(
                "{:.1} frames/s, dropped {}, partial {}",
                line.frames_per_s, line.dropped_frames, line.partial_frames
            ));
            if progress.last {
                bar.finish_and_clear();
            }
            Ok(())
        })
    }
}

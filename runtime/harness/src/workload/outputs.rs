//! A pipeline's output files: opened before it runs, so that an unwritable path loses no
//! run, and completed after it, each whole or not at all (`kplace_report::output`). With
//! several pipelines each has its own files, `det.p1.txt` beside `det.txt`
//! ([`pipeline_path`]).

use std::path::PathBuf;

use super::run::{Outputs, PipelineError, PreparedRun, ProgressReport};
use super::sinks::SinkFormat;
use crate::session::several::pipeline_path;
use kplace_report::output::{self, OutputError, OutputFile};
use kplace_report::trace::Trace;

/// Where a run's pipelines write, besides their reports.
#[derive(Clone, Debug, Default)]
pub struct OutputPaths {
    /// What the workload reads from each frame, in its own format.
    pub results: Option<PathBuf>,
    /// `frame_id,done_ns` per completed frame.
    pub done_times: Option<PathBuf>,
    /// The run's timeline as Chrome trace events.
    pub trace: Option<PathBuf>,
    /// A directory for every sink tensor of every completed frame, and their format.
    pub sinks: Option<(PathBuf, SinkFormat)>,
}

/// The files one pipeline writes, open while it runs.
pub struct PipelineFiles {
    files: Vec<OutputFile>,
    trace: Option<(PathBuf, OutputFile)>,
}

impl OutputPaths {
    /// Opens pipeline `index`'s files (`None`: the only pipeline's) for a run of `prepared`;
    /// its progress reports go to `progress`.
    pub fn open(
        &self,
        prepared: &PreparedRun,
        index: Option<usize>,
        progress: Option<ProgressReport>,
    ) -> Result<(Outputs, PipelineFiles), PipelineError> {
        let mut files = Vec::new();
        let mut open = |path: &Option<PathBuf>, what| -> Result<_, OutputError> {
            let Some(path) = path else { return Ok(None) };
            let file = OutputFile::create(&pipeline_path(path, index), what)?;
            let writer = file.writer();
            files.push(file);
            Ok(Some(writer))
        };
        let results = open(&self.results, "detections").map_err(output_error)?;
        let done_times = open(&self.done_times, "completion times").map_err(output_error)?;
        let sink_files = self
            .sinks
            .as_ref()
            .map(|(dir, format)| prepared.sink_files(dir, index, *format))
            .transpose()?;
        let trace = self
            .trace
            .as_ref()
            .map(|path| {
                let path = pipeline_path(path, index);
                OutputFile::create(&path, "trace").map(|file| (path, file))
            })
            .transpose()
            .map_err(output_error)?;
        let outputs = Outputs {
            results,
            sink_files,
            done_times,
            progress,
        };
        Ok((outputs, PipelineFiles { files, trace }))
    }
}

fn output_error(e: OutputError) -> PipelineError {
    PipelineError::Output(e.to_string())
}

impl PipelineFiles {
    /// Completes every file, writing `trace` into the trace file; says on stderr and in the
    /// list it returns which could not be completed.
    pub fn finish(self, trace: Option<&Trace>) -> Vec<String> {
        let mut failed = output::commit_all(self.files);
        if let Some((path, file)) = self.trace
            && let Err(e) = write_trace(&path, file, trace)
        {
            failed.push(e.to_string());
        }
        for f in &failed {
            tracing::error!("kplace run: {f}");
        }
        failed
    }
}

/// Why the trace file could not be completed.
#[derive(Debug, thiserror::Error)]
enum TraceFileError {
    /// Writing the trace into it failed.
    #[error("the trace file {} could not be written: {error}", .path.display())]
    Write {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// It could not be completed.
    #[error("{0}")]
    Commit(OutputError),
}

/// Writes `trace` into `file` and completes it; the error says why it could not be.
fn write_trace(
    path: &std::path::Path,
    file: OutputFile,
    trace: Option<&Trace>,
) -> Result<(), TraceFileError> {
    let Some(trace) = trace else {
        return file.commit().map_err(TraceFileError::Commit);
    };
    let mut writer = file.writer();
    trace
        .write_chrome(&mut writer)
        .map_err(|error| TraceFileError::Write {
            path: path.to_path_buf(),
            error,
        })?;
    drop(writer);
    file.commit().map_err(TraceFileError::Commit)?;
    // Said once the file is complete, never of a trace that could not be written.
    tracing::info!(
        "kplace run: trace of {} spans in {}{}",
        trace.spans.len(),
        path.display(),
        match trace.dropped_spans {
            0 => String::new(),
            n => format!(" ({n} more spans past the limit not kept)"),
        }
    );
    Ok(())
}

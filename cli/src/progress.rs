//! `kplace run --report-every DURATION`: a JSON line per interval per pipeline
//! (`kplace::report::progress`), each written whole to the progress output (a file, written
//! in place as the run goes so it can be watched, or stdout for `-`), and a bar per pipeline
//! on a terminal (none when stderr is not one). A progress file that cannot be written stops
//! nothing: the run goes on, and says so at its end ([`ProgressOut::commit`]).
//!
//! `kplace run --metrics ADDR`: the same progress posted to a metrics board that an HTTP
//! endpoint serves as OpenMetrics text ([`Live`]), every `--report-every` or every
//! [`METRICS_EVERY`] without it, and the UDP receiver's counters every [`METRICS_EVERY`].

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use kplace::executor::Progress;
use kplace::report::progress::ProgressLine;
use kplace::workload::run::ProgressReport;

use kplace::net::metrics::{EndpointCounts, MetricsServer};
use kplace::net::udp::{IngestCounters, OnCounters};
use kplace::report::openmetrics::Board;
use kplace::report::output::OutputFile;
use kplace::workload::run::PreparedRun;

/// How often a run with `--metrics` and no `--report-every` posts its progress to the board.
pub(crate) const METRICS_EVERY: Duration = Duration::from_millis(500);

/// What a run reports as it goes: progress lines (`--report-every`), metrics (`--metrics`),
/// either or both.
pub(crate) struct Live {
    lines: Option<ProgressOut>,
    board: Option<(Arc<Board>, MetricsServer)>,
}

impl Live {
    /// Opens the progress output `lines` (for a run of `frames` frames per pipeline) and
    /// starts the metrics endpoint at `metrics`, for `pipelines` pipelines of `prepared`.
    pub(crate) fn open(
        lines: Option<&Path>,
        frames: u64,
        metrics: Option<std::net::SocketAddr>,
        prepared: &PreparedRun,
        pipelines: usize,
    ) -> anyhow::Result<Live> {
        let lines = lines
            .map(|path| ProgressOut::open(path, frames))
            .transpose()?;
        let board = match metrics {
            None => None,
            Some(addr) => {
                let board = Arc::new(Board::new(pipelines, prepared.stage_names()?));
                let server = MetricsServer::start(addr, Arc::clone(&board))?;
                Some((board, server))
            }
        };
        Ok(Live { lines, board })
    }

    /// What pipeline `pipeline` (`None`: the only one) does with each report.
    pub(crate) fn reporter(&self, pipeline: Option<usize>) -> Option<ProgressReport> {
        let mut line = self.lines.as_ref().map(|l| l.reporter(pipeline));
        let board = self.board.as_ref().map(|(b, _)| Arc::clone(b));
        if line.is_none() && board.is_none() {
            return None;
        }
        Some(Box::new(move |progress: &Progress| {
            if let Some(board) = &board {
                board.post(pipeline.unwrap_or(0), progress);
            }
            match &mut line {
                Some(line) => line(progress),
                None => Ok(()),
            }
        }))
    }

    /// What pipeline `pipeline`'s UDP receiver (`None`: the only one) tells the metrics board,
    /// and how often: its counters every [`METRICS_EVERY`]; `None` without `--metrics`.
    pub(crate) fn ingest(&self, pipeline: Option<usize>) -> Option<(Duration, OnCounters)> {
        let board = Arc::clone(&self.board.as_ref()?.0);
        let index = pipeline.unwrap_or(0);
        Some((
            METRICS_EVERY,
            Box::new(move |counters: &IngestCounters| board.post_ingest(index, counters.totals())),
        ))
    }

    /// Stops the endpoint and flushes the progress output: what the endpoint did, and why the
    /// progress output could not be written.
    pub(crate) fn commit(self) -> Committed {
        Committed {
            endpoint: self.board.map(|(_, server)| server.stop()),
            progress: self.lines.map_or(Ok(()), ProgressOut::commit),
        }
    }
}

/// What [`Live::commit`] ends with.
pub(crate) struct Committed {
    /// What the metrics endpoint did, with `--metrics`.
    pub(crate) endpoint: Option<EndpointCounts>,
    /// Whether the progress output was written; the error says why not.
    pub(crate) progress: Result<(), String>,
}

impl Committed {
    /// The summary's line on the metrics endpoint: only when it refused or cut something, or
    /// failed to accept.
    pub(crate) fn endpoint_line(&self) -> Option<String> {
        let counts = self.endpoint.filter(EndpointCounts::troubled)?;
        Some(format!("{counts}\n"))
    }
}

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
    /// its bar. The bar appears at the first report (so nothing the run logs while it starts
    /// lands on a drawn bar) and is cleared at the last, or when the run drops the reporter
    /// without one (an error, a signal): no stale bar is left on the terminal.
    pub(crate) fn reporter(&self, pipeline: Option<usize>) -> ProgressReport {
        let out = Arc::clone(&self.out);
        let (bars, frames) = (self.bars.clone(), self.frames);
        let mut bar: Option<Bar> = None;
        Box::new(move |progress: &Progress| {
            let line = ProgressLine::new(progress, pipeline);
            let mut text = serde_json::to_string(&line).map_err(std::io::Error::other)?;
            text.push('\n');
            {
                let mut out = out.lock().unwrap_or_else(|e| e.into_inner());
                out.write_all(text.as_bytes())?;
                out.flush()?;
            }
            let bar = bar.get_or_insert_with(|| Bar::new(&bars, frames, pipeline));
            bar.0.set_position(progress.frames);
            bar.0.set_message(format!(
                "{:.1} frames/s, dropped {}, partial {}",
                line.frames_per_s, line.dropped_frames, line.partial_frames
            ));
            if progress.last {
                bar.0.finish_and_clear();
            }
            Ok(())
        })
    }
}

/// A pipeline's bar, cleared from the terminal when dropped unless it already was.
struct Bar(ProgressBar);

impl Bar {
    fn new(bars: &MultiProgress, frames: u64, pipeline: Option<usize>) -> Bar {
        let bar = bars.add(ProgressBar::new(frames));
        bar.set_style(
            ProgressStyle::with_template("{prefix}{bar:30} {pos}/{len} frames, {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar.set_prefix(pipeline.map_or_else(String::new, |i| format!("pipeline {i} ")));
        Bar(bar)
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        if !self.0.is_finished() {
            self.0.finish_and_clear();
        }
    }
}

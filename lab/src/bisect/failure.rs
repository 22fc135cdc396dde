//! Why a trial, or a system at a shape, says nothing of the system under test: each kind of
//! failure, with what it names (the file, its line, the port, the child's own words). The
//! sweep's files record it in words: an invalid trial's reason, a skipped system's.

use std::path::PathBuf;

use kplace::model::graph::{GraphError, SourceShapeError};
use kplace::os::files::ReadBoundedError;
use kplace::report::ReadError;
use kplace::report::ready::NotReady;
use kplace::workload::kind::KindError;

/// Why a trial failed, or a system cannot be searched at a shape.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TrialFault {
    /// The sweep's graph cannot be loaded.
    #[error("{}", with_causes(.0.as_ref()))]
    Graph(Box<GraphError>),
    /// A shape does not fit the graph's source.
    #[error("shape {shape}: {why}")]
    Shape {
        /// The shape, as the sweep names it.
        shape: String,
        /// Why it does not fit.
        why: SourceShapeError,
    },
    /// A placement cannot be loaded.
    #[error("{}", with_causes(.0.as_ref()))]
    Placement(Box<kplace::model::placement::PlacementError>),
    /// A placement cannot be planned here (a GPU placement without a GPU).
    #[error("{}", with_causes(.0.as_ref()))]
    Plan(Box<kplace::plan::PlanError>),
    /// The sweep runs on a recording, whose graph names no workload.
    #[error("the sweep runs on a recording: its graph has no workload")]
    NoWorkload,
    /// The graph's workload cannot be prepared, or cannot judge.
    #[error("{0}")]
    Kind(Box<KindError>),
    /// The workload prepared no frames.
    #[error("the workload prepared no frames")]
    NoFrames,
    /// The system under test never listened.
    #[error("the system under test never listened on port {0}")]
    NeverListened(u16),
    /// The system under test did not exit after the last packet.
    #[error("the system under test did not exit within {0} s of the last packet")]
    NoExit(u64),
    /// A file of times cannot be read.
    #[error("{0}")]
    Times(ReadBoundedError),
    /// A line of the system under test's times is not `frame_id,done_ns`.
    #[error("{}:{line}: expected frame_id,done_ns, got {got}", .path.display())]
    TimesLine {
        /// The file.
        path: PathBuf,
        /// The line, from 1.
        line: usize,
        /// An excerpt of it.
        got: String,
    },
    /// The sender failed: the end of its stderr.
    #[error("the sender failed: {0}")]
    Sender(String),
    /// The sender wrote no report.
    #[error("the sender wrote no report {}", .0.display())]
    NoSenderReport(PathBuf),
    /// The sender's report cannot be read.
    #[error("{0}")]
    SenderReportUnreadable(ReadBoundedError),
    /// The sender's report is not one.
    #[error("the sender's report: {0}")]
    SenderReport(ReadError),
    /// A receiver did not become ready: why, and the end of its stderr.
    #[error("{why}: {stderr}")]
    NotReady {
        /// Why.
        why: NotReady,
        /// The end of its stderr.
        stderr: String,
    },
    /// A receiver wrote no report.
    #[error("without a report")]
    NoReport,
    /// A receiver's report cannot be read.
    #[error("with a report that cannot be read: {0}")]
    ReportUnreadable(ReadBoundedError),
    /// A receiver's report is not one.
    #[error("with a report that cannot be read: {0}")]
    ReportInvalid(ReadError),
}

/// An error and its causes, joined by `: `.
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        text = format!("{text}: {e}");
        cause = e.source();
    }
    text
}

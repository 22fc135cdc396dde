//! Why a run's two ends stopped it: [`SourceError`], from the [`super::Source`] that delivers
//! frames, and [`SinkError`], from the [`super::FrameSink`] that takes them. Each names the
//! frame and packet where there is one; a source or sink outside kplace's own (a test's, an
//! application's) gives its own error as [`SourceError::Failed`] or [`SinkError::Failed`].

use super::pool::PoolError;
use crate::os::write::WriteError;

/// Any error a source or sink gives in its own words.
pub type BoxedError = Box<dyn std::error::Error + Send + Sync>;

/// Why a source stopped delivering frames.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// A begun frame's packet has no place in its slot.
    #[error("source: frame {frame}: packet {packet} has no place in the slot")]
    NoPlace {
        /// The frame's id.
        frame: u64,
        /// The packet's index in the frame.
        packet: u64,
    },
    /// The run refused a delivered packet (one already delivered, or of a frame ended).
    #[error("source: frame {frame}: packet {packet} was refused")]
    Refused {
        /// The frame's id.
        frame: u64,
        /// The packet's index in the frame.
        packet: u64,
    },
    /// A source of prepared frames was asked for frames and has none.
    #[error("source: replay has no prepared frames")]
    NoFrames,
    /// A prepared frame is not the size of the graph's source tensor.
    #[error(
        "source: prepared frame {frame} has {bytes} bytes, but the graph's source tensor needs {needs}"
    )]
    FrameBytes {
        /// The frame's index among those prepared.
        frame: usize,
        /// Its bytes.
        bytes: usize,
        /// The source tensor's.
        needs: usize,
    },
    /// The graph's source holds other packets than the source receives.
    #[error(
        "source: the graph's source takes {got} bytes per packet, but a {elements}-element packet has {want}"
    )]
    PacketBytes {
        /// Bytes per packet place in the source tensor.
        got: usize,
        /// Payload bytes of a received packet.
        want: usize,
        /// Elements per packet.
        elements: u32,
    },
    /// Receiving failed: the system call (`recvmmsg`) and the operating system's error.
    #[error("source: {0}: {1}")]
    Receive(&'static str, std::io::Error),
    /// The file saying the source is ready (its address) could not be written.
    #[error("source: cannot write the ready file: {0}")]
    Ready(Box<WriteError>),
    /// The source's own buffers could not be allocated.
    #[error("source: {0}")]
    Buffers(Box<PoolError>),
    /// A source's own failure, in its own error.
    #[error("source: {0}")]
    Failed(BoxedError),
}

impl SourceError {
    /// A source's own failure: an error of its own, or its words (`"the device went away"`).
    pub fn failed(error: impl Into<BoxedError>) -> Self {
        SourceError::Failed(error.into())
    }
}

/// Why a sink refused a frame or a report.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// A frame's outputs are not what they should be: the judge's error.
    #[error("sink: frame {frame}: {why}")]
    Judged {
        /// The frame's id.
        frame: u64,
        /// What is wrong.
        why: BoxedError,
    },
    /// A frame's outputs could not be written.
    #[error("sink: frame {frame}: cannot write {what}: {error}")]
    Write {
        /// The frame's id.
        frame: u64,
        /// What was written (`its sinks`, `completion times`).
        what: &'static str,
        /// The writer's error (with its file, where it names one).
        error: BoxedError,
    },
    /// A progress report could not be written.
    #[error("sink: cannot write the progress: {0}")]
    Progress(BoxedError),
    /// A frame ended partial where the sink takes only whole frames (a replay's).
    #[error("sink: frame {0} of a replay ended partial")]
    Partial(u64),
    /// A sink's own failure, in its own error.
    #[error("sink: {0}")]
    Failed(BoxedError),
}

impl SinkError {
    /// A sink's own failure: an error of its own, or its words (`"frame 3 has no output"`).
    pub fn failed(error: impl Into<BoxedError>) -> Self {
        SinkError::Failed(error.into())
    }
}

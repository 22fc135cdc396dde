//! Workloads: what feeds a graph's source and what judges the frames that come out of it.
//!
//! The runtime moves frames through any graph; what makes a run mean something is the
//! workload: where the source's frames come from, and what each completed frame is checked
//! against. A [`Workload`] is that pair. The radar receiver (`kplace-radar`) is one: a scene's
//! chirps in, its truth judging the clusters out. A graph that names no workload runs with the
//! generic one ([`generic`]): a [`recording`] of the source tensor's frames, replayed in memory
//! or sent over UDP, each completed frame's sinks compared element by element ([`compare`])
//! with a [`reference`](mod@reference) (the same graph on a reference placement, or golden
//! files) within the tolerances the graph declares.
//!
//! [`run::run_pipeline`] runs one pipeline of any workload and builds its report; what a run
//! writes besides (each sink tensor as `.npy` or raw files, [`sinks`]; completion times) is
//! the same for every workload. [`feed`] runs one pipeline whose frames its caller hands over
//! from memory, a batch at a time (what the Python module drives).
//!
//! Guarantees: a judge sees every frame the source began exactly once, a completed frame
//! through [`Judge::frame`] and a partial one through [`Judge::partial`], in the order they
//! began; a run passes only when every expected frame was reported and passed.

pub mod after_loss;
pub mod compare;
pub mod feed;
pub mod generic;
pub mod kind;
pub mod npy;
pub mod outputs;
pub mod recording;
pub mod reference;
pub mod run;
pub mod scalars;
pub mod send;
pub mod sinks;
pub mod synthesis;

use std::io::Write;
use std::sync::Arc;

use kplace_core::executor::CompletedFrame;
use kplace_report::run::{Details, Verification};

/// What feeds a graph's source and judges its frames. Shared by every pipeline of a run.
pub trait Workload: Sync {
    /// What the frames are, for the log: `the scene in memory, seed 1`, `recording x.sigmf-data`.
    fn describe(&self) -> String;

    /// The source frame's shape, innermost axis first (`1024x128` for the radar's CPI).
    fn shape(&self) -> kplace_core::model::shape::FrameShape;

    /// Bytes of one source frame: what the report's input rate counts.
    fn frame_bytes(&self) -> u64;

    /// The distinct frames a replay cycles through (frame `i` carries frame `i % len`), when
    /// the run replays them from memory; `None` when nothing was prepared.
    fn frames(&self) -> Option<&Arc<[Vec<u8>]>>;

    /// The stream's real-time frame period (the radar's CPI duration, a recording's frame at
    /// its sample rate), when the workload has one: a sender's default pace.
    fn real_time_period(&self) -> Option<std::time::Duration> {
        None
    }

    /// A judge for one pipeline expecting `frames_expected` frames; `results` is where the
    /// workload writes what it reads from each frame in its own format (the radar's detection
    /// lines), if asked.
    fn judge(
        &self,
        frames_expected: u64,
        results: Option<Box<dyn Write + Send>>,
    ) -> Result<Box<dyn Judge>, JudgeError>;
}

/// Checks one pipeline's frames as they complete and reaches the run's verdict.
pub trait Judge: Send {
    /// Judges a frame every stage processed (its sinks through [`CompletedFrame::sink`]). An
    /// error is an output that cannot be read or written at all, and stops the run.
    fn frame(&mut self, frame: &CompletedFrame<'_>) -> Result<(), JudgeError>;

    /// Notes a frame that ended with packets missing: never processed, so never reported.
    fn partial(&mut self, frame_id: u64);

    /// The verdict, once the run has ended.
    fn finish(self: Box<Self>) -> Result<Verdict, JudgeError>;
}

/// A judge's verdict on a run.
#[derive(Clone, Debug)]
pub struct Verdict {
    /// The report's entry; `verification.passed` is the run's pass or fail.
    pub verification: Verification,
    /// The verdict as `kplace run` prints it: lines ending in newlines.
    pub text: String,
    /// The workload's own figures for the report's `details` (empty for none).
    pub details: Details,
}

/// Why a judge could not judge: a frame's output it cannot read, or results it cannot write.
#[derive(Debug, thiserror::Error)]
pub enum JudgeError {
    /// A frame's sink bytes are not the workload's outputs: the workload's reading says why.
    #[error("frame {frame}: {why}")]
    Output {
        /// The frame's id.
        frame: u64,
        /// What is wrong with its output.
        why: kplace_core::executor::BoxedError,
    },
    /// The workload's results (`what`: `detections`, `the detections file`) could not be
    /// written, for frame `frame` where the failure is a frame's.
    #[error("{}cannot write {what}: {error}", .frame.map(|f| format!("frame {f}: ")).unwrap_or_default())]
    Write {
        /// The frame whose results were written, if a frame's.
        frame: Option<u64>,
        /// What was written.
        what: &'static str,
        /// The writer's error.
        error: std::io::Error,
    },
}

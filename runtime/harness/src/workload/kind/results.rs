//! What a workload kind writes of each frame, and how it reads such files back
//! ([`ResultsFiles`]): to judge another receiver's results (`kplace verify`, `bisect-rate
//! --sut-cmd`) and to compare two receivers' (`kplace compare-results`).
//!
//! Every method has a default for a kind that writes no results of its own (the recording
//! kind, whose sinks are written as `.npy` files instead).

use std::path::Path;

use super::{KindError, KindOptions, Request};
use crate::workload::Verdict;

/// A kind's results files: what it writes of each frame, how it judges another receiver's,
/// and how it compares two.
pub trait ResultsFiles: KindOptions {
    /// What the workload writes of each frame when a run asks for its results (the
    /// `results` writer of [`Workload::judge`](crate::workload::Workload::judge)), if it
    /// writes any.
    fn results(&self) -> Option<&'static str> {
        None
    }

    /// Judges the results file a receiver other than kplace wrote at `path` (in the format
    /// [`ResultsFiles::results`] names) for the `request.frames` frames of `request`: how
    /// `kplace verify` and `bisect-rate --sut-cmd` check another system. The file is read
    /// as it is written (a pipe works), and reading ends once every frame was reported; a
    /// frame reported twice, or one never sent, counts as failed.
    fn judge_results(&self, request: &Request<'_>, path: &Path) -> Result<Verdict, KindError> {
        let _ = (request, path);
        Err(KindError::Kind(
            format!(
                "workload {} reads no results file of another receiver",
                self.name()
            )
            .into(),
        ))
    }

    /// Compares two results files of the same frames, each in the format
    /// [`ResultsFiles::results`] names: how `kplace compare-results` says whether two
    /// placements, or kplace and another receiver, agree. An input that cannot be read is an
    /// error naming its file and line; a difference is part of the comparison.
    fn compare_results(&self, pair: &ResultsPair<'_>) -> Result<ResultsComparison, KindError> {
        let _ = pair;
        Err(KindError::Kind(
            format!(
                "workload {} writes no results files to compare",
                self.name()
            )
            .into(),
        ))
    }
}

/// Two results files of the same frames, and how closely they must agree.
#[derive(Clone, Copy, Debug)]
pub struct ResultsPair<'a> {
    /// The reference (e.g. the all-cpu placement's results).
    pub reference: &'a Path,
    /// The results judged against it.
    pub candidate: &'a Path,
    /// Values agree within this relative tolerance; `None`: bit for bit.
    pub rel_tol: Option<f64>,
    /// Frames expected (ids `0..frames` on both sides), if known.
    pub frames: Option<u64>,
}

/// What comparing two results files found.
#[derive(Clone, Debug)]
pub struct ResultsComparison {
    /// Whether they agree.
    pub agrees: bool,
    /// The comparison as text: every difference counted, the first ones listed.
    pub text: String,
    /// The same as one JSON object, in the kind's own schema.
    pub json: serde_json::Value,
}

//! The FMCW radar workload of kplace: the scene generator, the f64 reference receiver, the
//! detection line format and the verifier.
//!
//! Every system compared with kplace runs this workload (see `docs/workload.md`):
//! - [`scene`] generates deterministic int16 I/Q frames of point targets in noise, and their
//!   truth;
//! - [`reference`](mod@reference) computes the detections a correct receiver reports, in plain f64 code;
//! - [`detections`] reads and writes the text format in which any receiver reports clusters;
//! - [`verify`] checks reported clusters against the scene's truth, frame by frame;
//! - [`compare`] compares two receivers' detections of the same frames, cell by cell.
#![warn(missing_docs)]

pub mod compare;
pub mod cpi;
pub mod detections;
pub mod reference;
pub mod scene;
pub mod verify;

pub use compare::{CompareError, Comparison, Difference, PowerRule, Side, compare_detections};
pub use cpi::Cpi;
pub use detections::{
    Cluster, DetectionReader, DetectionWriter, FormatError, FrameDetections, read_detections,
};
pub use reference::{CfarParams, Detection64};
pub use scene::{Scene, SceneConfig, SceneError, Target, TruthBin};
pub use verify::{FrameVerdict, Verifier, VerifyConfig, VerifySummary, verify_frame};

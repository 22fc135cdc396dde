//! The FMCW radar workload of kplace: the scene generator, the f64 reference receiver, the
//! detection line format and the verifier.
//!
//! Every system compared with kplace runs this workload (see `docs/workload.md`):
//! - [`graph`] checks that a graph is a radar receiver for a scene, and binds the scene's CPI
//!   and false-alarm probability to it;
//! - [`scene`] generates deterministic int16 I/Q frames of point targets in noise, and their
//!   truth;
//! - [`reference`](mod@reference) computes the detections a correct receiver reports, in plain f64 code;
//! - [`detections`] reads and writes the text format in which any receiver reports clusters;
//! - [`verify`] checks reported clusters against the scene's truth, frame by frame;
//! - [`seen`] keeps the frame ids reported so far in constant memory, for both;
//! - [`compare`] compares two receivers' detections of the same frames, cell by cell;
//! - [`sink`] judges the runtime's completed frames with the verifier and writes their
//!   detections: the workload's one meeting point with the runtime's executor;
//! - [`kind`] registers the workload by name (`workload: fmcw-radar`), for programs that look
//!   workloads up in a registry;
//! - [`run`] prepares what every pipeline of a run shares: the scene, its frames and the
//!   judge, the radar's `Workload`.
#![warn(missing_docs)]

pub mod compare;
pub mod cpi;
pub mod detections;
pub mod graph;
pub mod kind;
pub mod reference;
pub mod run;
pub mod scene;
pub mod seen;
pub mod sink;
pub mod verify;

pub use compare::{
    CompareError, Comparison, Difference, PowerRule, Side, compare_detection_files,
    compare_detections,
};
pub use cpi::Cpi;
pub use detections::{
    Cluster, DetectionReader, DetectionWriter, FormatError, FrameDetections, read_detections,
};
pub use graph::FitError;
pub use kplace_kernels::Detection;
pub use reference::{CfarParams, Detection64};
pub use scene::{Scene, SceneConfig, SceneError, Target, TruthBin};
pub use sink::{RadarJudge, details, verdict_text, verification};
pub use verify::{FrameVerdict, LateReport, Verifier, VerifyConfig, VerifySummary, verify_frame};

//! What a calibration measured, as data: a machine's costs per stage and device, the bus's
//! copy rates, the runtime's fixed costs per frame, and the key a stored calibration is reused
//! for. [`super::calibrate`] measures and stores them; [`super::model`] predicts from them.
//! Plain serde types (the calibration file's fields, unknown ones refused) and one formula,
//! [`Bus::copy_ms`]; nothing here runs or reads anything.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// What a calibration depends on: a stored one is reused only for an equal key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CalibrationKey {
    /// The machine's host name and CPU model.
    pub machine: String,
    /// Cores this process may use.
    pub cores: usize,
    /// The GPU calibrated, by name (`None`: the CPU only).
    pub gpu: Option<String>,
    /// Each kernel library's path and a fingerprint of its build.
    pub libraries: Vec<LibraryBuild>,
    /// The graph's name and a fingerprint of its laid-out text (dimensions and parameters
    /// included).
    pub graph: String,
    /// The frame's shape (`1024x128`).
    pub shape: String,
    /// The workload's frames (`the scene in memory, seed 1`).
    pub workload: String,
    /// The co-tenant calibrated beside, as given; `None`: alone.
    pub cotenant: Option<String>,
}

/// One kernel library as built: a new build changes the fingerprint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LibraryBuild {
    /// The library's path.
    pub path: PathBuf,
    /// Its size and a hash of its bytes, hex.
    pub fingerprint: String,
}

/// A machine's measured costs, from which [`super::model::predict`] predicts any placement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Calibration {
    /// [`super::calibrate::SCHEMA`].
    pub schema: String,
    /// What it depends on.
    pub key: CalibrationKey,
    /// When it was measured, seconds since the Unix epoch.
    pub measured_at_unix_s: u64,
    /// Each stage's costs, in graph order.
    pub stages: Vec<StageCosts>,
    /// Writing one frame into its slot (a replay's source), ms.
    pub source_ms: f64,
    /// Judging one frame (the collector), ms.
    pub collector_ms: f64,
    /// The UDP receiver's CPU time per frame (fed by a local burst), ms; `None`: not measured.
    pub receiver_ms: Option<f64>,
    /// The sender's CPU time per frame when it shares this machine's cores with the pipeline
    /// (as `bisect-rate` runs it), ms; `None`: not measured, or on other cores.
    pub sender_ms: Option<f64>,
    /// The runtime's fixed costs per frame, from the CPU run.
    pub cpu_overheads: Overheads,
    /// The same from the GPU run; `None` without one.
    pub gpu_overheads: Option<Overheads>,
    /// Pinned copy rates; `None` without a GPU.
    pub bus: Option<Bus>,
    /// What each calibration run measured.
    pub runs: Vec<CalibrationRun>,
}

/// One stage's costs per frame, on each device measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageCosts {
    /// The stage.
    pub name: String,
    /// Kernel time on the CPU (one worker), ms per frame; `None`: not offered there.
    pub cpu_ms: Option<f64>,
    /// Costs on the GPU; `None`: not offered or not calibrated.
    pub gpu: Option<GpuStageCosts>,
    /// Whether its CPU kernel carries state from frame to frame, so that it runs one frame at
    /// a time (absent in calibrations from before stateful stages: false).
    #[serde(default)]
    pub serial: bool,
}

/// A GPU stage's costs per frame.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuStageCosts {
    /// Its kernels' time on the device (its copies taken out), ms per frame.
    pub kernel_ms: f64,
    /// Host time to enqueue one launch (with its share of the copies, waits and fences), ms.
    pub host_ms_per_launch: f64,
}

/// The runtime's fixed costs per frame: what a run measured beyond the sum of its parts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Overheads {
    /// Added to every post-frame latency (hand-offs, wake-ups, fences' callbacks), ms.
    pub latency_ms: f64,
    /// Time a slot is held beyond its frame's fill and latency (returning it), ms.
    pub slot_ms: f64,
    /// Host CPU time per frame beyond the stages, source and collector, ms.
    pub host_ms: f64,
}

/// Pinned copies: a copy of `b` bytes takes `latency + b / rate`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bus {
    /// Host to device, bytes per second.
    pub upload_bytes_per_s: f64,
    /// Device to host, bytes per second.
    pub download_bytes_per_s: f64,
    /// Fixed time of each host-to-device copy, ms.
    pub upload_latency_ms: f64,
    /// Fixed time of each device-to-host copy, ms.
    pub download_latency_ms: f64,
}

impl Bus {
    /// The time `pieces` copies of `bytes` in all take in `direction`, ms.
    pub fn copy_ms(&self, direction: kplace::plan::Direction, bytes: u64, pieces: u64) -> f64 {
        let (rate, latency) = match direction {
            kplace::plan::Direction::HostToDevice => {
                (self.upload_bytes_per_s, self.upload_latency_ms)
            }
            kplace::plan::Direction::DeviceToHost => {
                (self.download_bytes_per_s, self.download_latency_ms)
            }
        };
        pieces.max(1) as f64 * latency + bytes as f64 / rate.max(f64::MIN_POSITIVE) * 1e3
    }
}

/// What one calibration run measured, for the record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CalibrationRun {
    /// The placement run, as YAML.
    pub placement: String,
    /// Frames measured.
    pub frames: u64,
    /// Frames per second.
    pub rate: f64,
    /// Post-frame latency, median, ms.
    pub post_frame_p50_ms: f64,
    /// Cores busy.
    pub cores_used: f64,
}

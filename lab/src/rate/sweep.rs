//! The results file of a sweep, `bisect-rate.json` (schema [`SCHEMA`]), as types: its writer
//! (`kplace bisect-rate`) and its readers (`kplace plot`, scripts) agree on every field
//! because they share these, and a renamed or missing field is a parse error, never a zero.
//!
//! One [`SweepFile`] holds one [`SearchEntry`] per system, frame shape and repeat (a skipped system
//! has one entry saying why), each with every trial the search ran ([`TrialEntry`]), the
//! steadiness probes around it, and the budget it was gated on; [`Spread`]s summarize
//! repeated searches.

use kplace::model::shape::FrameShape;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::gates::{LatencyBudget, TrialMeasurement};
use super::search::{GoalResult, LoadEntry, Stage};
use super::steadiness::{Probe, Steadiness};

/// The schema name and version of the results file.
pub const SCHEMA: &str = "kplace-bisect-rate/4";

/// A whole results file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepFile {
    /// [`SCHEMA`].
    pub schema: String,
    /// The machine the results come from (CPU, cores, kernel).
    pub machine: Value,
    /// The options every result depends on.
    pub settings: Value,
    /// One entry per system, frame shape and repeat, in the order searched.
    pub searches: Vec<SearchEntry>,
    /// Per system and frame shape searched more than once: the spread of the results.
    #[serde(default)]
    pub spreads: Vec<Spread>,
    /// Systems searched side by side, trial by trial: each one's answer over the first's.
    #[serde(default)]
    pub comparisons: Vec<Comparison>,
}

/// One system's answer over another's, both searched in the same minutes with their trials
/// alternating, so that the machine's drift hit both alike.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// The frame shape, innermost axis first (the radar's `SAMPLESxCHIRPS`).
    pub shape: FrameShape,
    /// Which repeat.
    pub repeat: u32,
    /// The goal compared (the first).
    pub goal: String,
    /// The system compared.
    pub system: String,
    /// The system it is compared with (the first searched).
    pub baseline: String,
    /// `system`'s answer over `baseline`'s.
    pub ratio: Option<f64>,
    /// The least the ratio can be from the bounds: `system`'s lower bound over `baseline`'s
    /// upper bound.
    pub ratio_low: Option<f64>,
    /// The most it can be: `system`'s upper bound over `baseline`'s lower bound.
    pub ratio_high: Option<f64>,
}

/// One search (or one skipped system at one frame shape).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchEntry {
    /// The system's name as the table shows it (`all-cpu`, `all-cpu x2 thread +cpu-hog`).
    pub system: String,
    /// The placement file searched, for kplace.
    #[serde(default)]
    pub placement: Option<String>,
    /// The command searched, for another receiver.
    #[serde(default)]
    pub sut_cmd: Option<String>,
    /// The frame shape, innermost axis first (the radar's `SAMPLESxCHIRPS`).
    pub shape: FrameShape,
    /// Which repeat of the search, from 0.
    pub repeat: u32,
    /// Why the system was not searched at this frame shape; when set, the fields below are empty.
    #[serde(default)]
    pub skipped: Option<String>,
    /// The unit of every rate of this search: `CPI/s` for the radar, `frames/s` otherwise.
    pub unit: String,
    /// The real-time rate: one frame per frame period of the workload (the radar's CPI
    /// duration, a recording's samples over its sample rate).
    pub real_time_rate: f64,
    /// The budget post-frame p99 was gated on.
    pub latency_budget: LatencyBudget,
    /// The first rate tried.
    #[serde(default)]
    pub start_rate: f64,
    /// Pipelines per trial.
    #[serde(default = "one")]
    pub pipelines: u64,
    /// `thread` or `process`.
    #[serde(default)]
    pub pipeline_mode: String,
    /// The first goal's answer per pipeline; `None` when it has none (see `outcome`).
    #[serde(default)]
    pub sustained_rate: Option<f64>,
    /// The answer times the pipelines.
    #[serde(default)]
    pub aggregate_sustained_rate: Option<f64>,
    /// The first goal's answer in words, with its reason when there is no number.
    #[serde(default)]
    pub outcome: String,
    /// How the first goal's search ended: `regular`, `max_load`, `sender_limit`,
    /// `min_load`, `trial_cap`, `interrupted` (or `skipped`).
    #[serde(default)]
    pub outcome_kind: String,
    /// Every goal's result: bounds, conditional throughput, how it ended.
    #[serde(default)]
    pub goals: Vec<GoalResult>,
    /// Every load measured, ascending, with its classification for every goal.
    #[serde(default)]
    pub loads: Vec<LoadEntry>,
    /// The measured trials' total duration, s of stream.
    #[serde(default)]
    pub trial_seconds: f64,
    /// The search's wall time, s (trials with their start-up, probes, bounds).
    #[serde(default)]
    pub wall_seconds: f64,
    /// The lowest rate the sender could not offer here, if any.
    #[serde(default)]
    pub sender_ceiling: Option<f64>,
    /// The steadiness probes before, between failed trials of, and after the search.
    #[serde(default)]
    pub probes: Vec<ProbeEntry>,
    /// The bounds measured beside the search (`--bounds`).
    #[serde(default)]
    pub bounds: Option<Value>,
    /// The co-tenant's own report, when one ran.
    #[serde(default)]
    pub cotenant: Option<Value>,
    /// Every trial, in the order run.
    #[serde(default)]
    pub trials: Vec<TrialEntry>,
}

fn one() -> u64 {
    1
}

/// A steadiness probe and its judgement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProbeEntry {
    /// What was measured.
    pub probe: Probe,
    /// What it says about the machine.
    pub steadiness: Steadiness,
}

/// Whether a trial passed, failed, or said nothing about the system (invalid, retried).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrialStatus {
    /// Every gate passed.
    Passed,
    /// A gate failed.
    Failed,
    /// The sender could not offer the rate: the trial says nothing of the system.
    Invalid,
}

/// One trial of a search.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrialEntry {
    /// The offered rate.
    pub rate: f64,
    /// Why the search chose it (`start`, `up`, `down`, `bisect`, `again`).
    pub phase: String,
    /// The goal the trial served.
    #[serde(default)]
    pub goal: String,
    /// Its stage: short trials (`coarse`) or full-length ones (`final`).
    pub stage: Stage,
    /// The measured window's duration, s of stream.
    #[serde(default)]
    pub duration_s: f64,
    /// The fraction of the trial's frames lost, as the goals count them; `None` when the
    /// sender could not offer the rate (the trial is `invalid`).
    #[serde(default)]
    pub loss_ratio: Option<f64>,
    /// Passed, failed or invalid.
    pub status: TrialStatus,
    /// Every reason it failed (empty unless failed).
    #[serde(default)]
    pub failures: Vec<String>,
    /// Why it was invalid (only when invalid).
    #[serde(default)]
    pub invalid: Option<String>,
    /// The latency budget at this rate, ms.
    #[serde(default)]
    pub budget_ms: f64,
    /// What the gates were given.
    #[serde(default)]
    pub measurement: Option<TrialMeasurement>,
    /// Post-frame latency of the pipeline the table shows (the worst, with several).
    #[serde(default)]
    pub latency: Option<TrialLatency>,
    /// Per-stage time of that pipeline.
    #[serde(default)]
    pub stages: Vec<StageTime>,
    /// CPU cores the system used on average over the trial (CPU time / wall time).
    #[serde(default)]
    pub cores_used: Option<f64>,
    /// What the sender reported about its own schedule.
    #[serde(default)]
    pub sender: Option<SenderEntry>,
    /// The trial's run report (relative to the results file's directory), when one exists.
    #[serde(default)]
    pub report: Option<String>,
}

/// A trial's post-frame latency.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrialLatency {
    /// Median, ms.
    pub p50_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// 99.9th percentile, ms.
    pub p999_ms: f64,
    /// The histogram of every measured frame's post-frame latency in nanoseconds, as a
    /// base64 HdrHistogram V2 (deflate) record, when the system reported one.
    #[serde(default)]
    pub histogram: Option<String>,
}

/// One stage's time per frame in a trial.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StageTime {
    /// The stage.
    pub name: String,
    /// Where it ran (`cpu`, `gpu0`, ...).
    pub device: String,
    /// Host time per frame, ms.
    pub per_frame_ms: f64,
    /// A GPU stage's stream time per frame, ms (with its transfers), when profiled.
    #[serde(default)]
    pub gpu_ms_per_frame: Option<f64>,
}

/// The sender's account of its own schedule in one trial.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SenderEntry {
    /// The worst lateness of a packet against its deadline, ms.
    pub max_lag_ms: f64,
    /// The longest time the sender was away between two wake-ups beyond its tick, ms.
    pub max_stall_ms: f64,
    /// Involuntary context switches of the sender during the run.
    pub involuntary_switches: u64,
    /// The rate the sender achieved, frames/s (frames over the time it took).
    #[serde(default)]
    pub sent_per_s: Option<f64>,
}

/// The spread of repeated searches of one system at one frame shape.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// The system.
    pub system: String,
    /// The frame shape.
    pub shape: FrameShape,
    /// Searches run.
    pub searches: usize,
    /// Of those, searches that found a rate.
    pub measured: usize,
    /// The lowest, median and highest rate found, frames/s.
    pub min: Option<f64>,
    /// See `min`.
    pub median: Option<f64>,
    /// See `min`.
    pub max: Option<f64>,
    /// `(max - min) / median` of the rates found.
    pub spread: Option<f64>,
    /// `(max - min) / median` of every steadiness probe's median over the same searches.
    #[serde(default)]
    pub probe_spread: Option<f64>,
    /// `(max - min) / median` of each bound measured beside them (`--bounds`), the larger of
    /// the kernel-only and the ingest-only bound's.
    #[serde(default)]
    pub bounds_spread: Option<f64>,
    /// The machine's own spread over the same searches: the larger of the probe's and the
    /// bounds'.
    pub machine_spread: Option<f64>,
    /// Whether the rates' spread is no larger than the machine's: the differences between
    /// the searches are within the machine's noise.
    pub within_noise: bool,
}

/// The schema of a `--sut-cmd` trial's record (`trial-N.json`).
pub const SUT_TRIAL_SCHEMA: &str = "kplace-sut-trial/1";

/// What one trial of another receiver (`bisect-rate --sut-cmd`) measured, left beside its
/// detections and log as `trial-N.json`, as kplace's own trials leave their run report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SutTrialReport {
    /// [`SUT_TRIAL_SCHEMA`].
    pub schema: String,
    /// Frames verified per second of the trial.
    pub frames_per_s: f64,
    /// The same in input bits: 4 bytes of int16 I/Q per cell.
    pub input_gbit_per_s: f64,
    /// CPU time of the receiver and its reaped descendants over the trial's wall time.
    pub cores_used: f64,
    /// Its post-frame latency, when it wrote per-frame completion times (`{times}`).
    pub latency: Option<SutTrialLatency>,
}

/// A `--sut-cmd` receiver's post-frame latency: completion minus the sender's last packet.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SutTrialLatency {
    /// Its distribution.
    pub post_frame: kplace::report::run::LatencyEntry,
    /// Least-squares slope against completion time, ms per s.
    pub post_frame_trend_ms_per_s: f64,
}

//! What a sweep is asked to do ([`BisectConfig`]), and what follows from it for every search
//! and trial: the search's settings, the gates and budget at a frame shape, a trial's frames, the scene
//! sent, and the settings recorded beside the results.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kplace::model::files::GraphFiles;
use kplace::model::graph::{Graph, GraphSource, Overrides};
use kplace::model::rate;
use kplace::model::shape::FrameShape;
use kplace::os::CpuSet;
use kplace::session::child::{ChildFrames, Pace, SendChild};
use kplace::session::several::PipelineMode;
use kplace::workload::kind::{Request, WorkloadKind, WorkloadOptions};
use serde_json::{Value, json};

use super::failure::TrialFault;
use crate::hog::CotenantSpec;
use crate::rate::{BudgetRule, Gates, Goal, LatencyBudget, SearchConfig, SteadyLimits};

/// What is searched: kplace placements, or another receiver.
#[derive(Clone, Debug)]
pub enum Systems {
    /// Placement files, or directories whose every `.yaml` file is a placement.
    Placements(Vec<PathBuf>),
    /// Another receiver: a shell command with placeholders ([`super::sut`]) and its name.
    Command {
        /// The command.
        command: String,
        /// Its name in the table, the results file and the plots.
        name: String,
    },
}

/// A recording every trial streams instead of the graph's workload's frames, and what each
/// trial's frames are checked against (`kplace run --recording FILE --check CHECK`).
#[derive(Clone, Debug)]
pub struct RecordingFeed {
    /// The recording (`kplace record` makes one).
    pub path: PathBuf,
    /// The check, as `kplace run --check` takes it: `reference:PLACEMENT` or `golden:DIR`.
    pub check: String,
}

/// A frame shape the sweep searches at, and what follows from it for the workload.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchShape {
    /// The source frame's shape, innermost axis first, as `--shape` takes it.
    pub shape: FrameShape,
    /// The workload's real-time frame period at this shape (the radar's CPI duration, a
    /// recording's frame at its sample rate); `None` when it has none, and the searches then
    /// start at `--start-rate`.
    pub frame_period: Option<Duration>,
    /// Bytes of one source frame.
    pub frame_bytes: u64,
}

impl std::fmt::Display for SearchShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.shape.fmt(f)
    }
}

/// What a sweep searches and how: every setting of `kplace bisect-rate`, checked by its
/// caller with [`BisectConfig::check`], its shapes and workload resolved with
/// [`BisectConfig::resolve_workload`] (each is documented on that command's option of the same
/// name).
#[derive(Clone, Debug)]
pub struct BisectConfig {
    /// The graph file.
    pub graph: PathBuf,
    /// The systems searched.
    pub systems: Systems,
    /// The frame shapes searched, each a sweep of its own.
    pub shapes: Vec<SearchShape>,
    /// The graph's workload kind (none on a recording): the unit of its rates, and the judge
    /// of another system's results (`--sut-cmd`).
    pub workload: Option<Arc<dyn WorkloadKind>>,
    /// Options every run, sender and judge of the workload is given (`--opt NAME=VALUE`).
    pub workload_options: Vec<(String, String)>,
    /// The first rate tried; `None`: the workload's real-time rate.
    pub start_rate: Option<f64>,
    /// The first rate tried per placement file, before `start_rate` (`kplace tune` starts each
    /// candidate at its predicted rate).
    pub start_rates: std::collections::BTreeMap<PathBuf, f64>,
    /// The search's goals, the first the answer (RFC 9971's search goals).
    pub goals: Vec<Goal>,
    /// Searches per system and frame shape.
    pub repeat: u32,
    /// Warm-up per trial, seconds of stream (at least 10 frames).
    pub warmup_s: f64,
    /// The budget post-frame p99 must stay within.
    pub latency_budget: BudgetRule,
    /// Trials per search at most.
    pub max_trials: usize,
    /// Where the results and every trial's files go.
    pub out: PathBuf,
    /// The seed of what the workload generates.
    pub seed: u64,
    /// A recording streamed instead of the scene: any graph's trials, checked against a
    /// reference.
    pub recording: Option<RecordingFeed>,
    /// The sender's pacing tick in microseconds (0: spin).
    pub sender_tick_us: u64,
    /// The sender's nice value.
    pub sender_nice: i32,
    /// A sender further behind its schedule, or kept off the CPU longer, makes a trial invalid.
    pub max_sender_lag_ms: f64,
    /// Trials in a row at one rate the sender may fail to offer before that rate is the
    /// sender's limit here.
    pub unoffered_retries: u32,
    /// The rate below which the sweep's exit status says so ([`super::exit::BELOW_REQUIRED`]).
    pub require_rate: Option<f64>,
    /// CPUs the sender runs on.
    pub sender_cpus: Option<CpuSet>,
    /// CPUs the system under test runs on.
    pub sut_cpus: Option<CpuSet>,
    /// Measure the bounds (receiver alone, kernels alone) beside each search.
    pub bounds: bool,
    /// Pipelines per trial, each with its own sender.
    pub pipelines: u64,
    /// How the pipelines run.
    pub pipeline_mode: PipelineMode,
    /// Also search kplace switching between the placements while the stream runs, in the
    /// order given (the first preferred): `kplace run --adapt`, judged against each trial's
    /// latency budget.
    pub adapt: bool,
    /// The co-tenant beside every search.
    pub cotenant: Option<CotenantSpec>,
    /// The co-tenant's intensity as given, for the record.
    pub cotenant_intensity: Option<f64>,
    /// `Some`: trials run as clients of a private MPS daemon started for the sweep, with this
    /// default active-thread percentage, if any.
    pub mps: Option<Option<f64>>,
}

impl BisectConfig {
    /// The search every system gets at `shape` (`placement`'s own start rate, if it has one).
    pub(super) fn search_config(
        &self,
        shape: &SearchShape,
        placement: Option<&PathBuf>,
    ) -> SearchConfig {
        let start = placement
            .and_then(|p| self.start_rates.get(p).copied())
            .or(self.start_rate)
            .unwrap_or(1.0 / self.frame_period(shape).as_secs_f64())
            .clamp(rate::MIN_FRAME_RATE, rate::MAX_FRAME_RATE);
        let search = SearchConfig::new(start, self.goals.first().map_or(1.0, |g| g.final_trial_s));
        SearchConfig {
            goals: self.goals.clone(),
            max_trials: self.max_trials,
            unoffered_retries: self.unoffered_retries,
            // Every trial's rate is one a run takes (`kplace run --stream-rate`).
            min_load: search.min_load.max(rate::MIN_FRAME_RATE),
            max_load: search.max_load.min(rate::MAX_FRAME_RATE),
            ..search
        }
    }

    /// The goals every search answers.
    pub(super) fn search_goals(&self) -> &[Goal] {
        &self.goals
    }

    /// The workload's frame period at `shape`: its real-time period where it has one, else
    /// one frame at `--start-rate` (the caller checks one is given, and
    /// [`BisectConfig::check`] that it is in [`rate`]'s range; one that is not is taken as the
    /// longest period).
    pub fn frame_period(&self, shape: &SearchShape) -> Duration {
        shape.frame_period.unwrap_or_else(|| {
            rate::frame_period("--start-rate", self.start_rate.unwrap_or(1.0))
                .unwrap_or(rate::MAX_PERIOD)
        })
    }

    /// The unit of every rate: the workload's (`frames/s` for the radar), `frames/s` for a
    /// recording.
    pub fn unit(&self) -> &'static str {
        self.workload.as_ref().map_or("frames/s", |w| w.rate_unit())
    }

    /// What the tables call the workload's frame: its shape, innermost axis first.
    pub fn shape_label(&self, shape: &SearchShape) -> String {
        shape.shape.to_string()
    }

    /// The gates of every trial at `shape`.
    pub(super) fn gates(&self, shape: &SearchShape) -> Gates {
        Gates::new(self.latency_budget(shape))
    }

    /// The latency budget of every trial at `shape`: with `deadline`, the workload's frame
    /// period (or one period at the offered rate when that is longer).
    pub fn latency_budget(&self, shape: &SearchShape) -> LatencyBudget {
        self.latency_budget.at_period(self.frame_period(shape))
    }

    /// Frames of a trial at `rate` whose measured window is `duration_s` s of stream:
    /// warm-up (at least 10) and measured window (at least 30: over fewer, a few ms of
    /// scheduling move the processed rate by more than the 1% its gate allows).
    pub(super) fn trial_frames(&self, rate: f64, duration_s: f64) -> (u64, u64) {
        (
            ((rate * self.warmup_s).ceil() as u64).max(10),
            ((rate * duration_s).ceil() as u64).max(30),
        )
    }

    /// Whose frames `kplace run` receives, and what it checks them against.
    pub(super) fn receiver_frames(&self) -> ChildFrames {
        match &self.recording {
            Some(r) => ChildFrames::Recording {
                path: r.path.clone(),
                check: Some(r.check.clone()),
            },
            None => self.workload_frames(),
        }
    }

    /// `kplace send` of `frames` frames at `shape` to `dest` at `pace`: the graph's
    /// workload's frames, or the recording.
    pub(super) fn sender(
        &self,
        shape: &SearchShape,
        dest: SocketAddr,
        pace: Pace,
        frames: u64,
    ) -> SendChild {
        let (graph, shape, frames_of) = match &self.recording {
            Some(r) => (
                None,
                None,
                ChildFrames::Recording {
                    path: r.path.clone(),
                    check: None,
                },
            ),
            None => (
                Some(self.graph.clone()),
                Some(shape.shape.clone()),
                self.workload_frames(),
            ),
        };
        SendChild {
            dest,
            graph,
            shape,
            frames_of: Some(frames_of),
            pace,
            frames,
            nice: None,
            times: None,
            report: None,
        }
    }

    /// The dimensions `shape` binds in the sweep's graph.
    pub(crate) fn dims(&self, shape: &SearchShape) -> Result<Vec<(String, u64)>, TrialFault> {
        let graph = Graph::load(&self.graph, &Overrides::default())
            .map_err(|e| TrialFault::Graph(Box::new(e)))?;
        graph
            .bind_source_shape(shape.shape.extents())
            .map_err(|why| TrialFault::Shape {
                shape: shape.to_string(),
                why,
            })
    }

    /// The graph's workload as `count` frames of it are prepared at `shape`, or why it cannot
    /// be.
    pub(super) fn workload_request<T>(
        &self,
        shape: &SearchShape,
        count: u64,
        with: impl FnOnce(&dyn WorkloadKind, &Request<'_>) -> Result<T, TrialFault>,
    ) -> Result<T, TrialFault> {
        let Some(kind) = &self.workload else {
            return Err(TrialFault::NoWorkload);
        };
        let graph = GraphSource::read(&self.graph).map_err(|e| TrialFault::Graph(Box::new(e)))?;
        let files = GraphFiles {
            dims: self.dims(shape)?,
            ..GraphFiles::of_graph(graph)
        };
        let options = self.kind_options();
        let request = Request {
            files: &files,
            options: &options,
            recording: None,
            seed: self.seed,
            frames: count,
            pipelines: 0,
            replay: true,
        };
        with(kind.as_ref(), &request)
    }

    /// The workload options of the sweep, as its workload kind checks them.
    pub(crate) fn kind_options(&self) -> WorkloadOptions {
        let mut options = WorkloadOptions::default();
        for (name, value) in &self.workload_options {
            options.push(name.as_str(), value.as_str());
        }
        options
    }

    /// The graph's workload's frames: its seed and options.
    fn workload_frames(&self) -> ChildFrames {
        ChildFrames::Workload {
            seed: self.seed,
            options: self.workload_options.clone(),
        }
    }

    /// The options every result depends on, recorded beside the results.
    pub(super) fn settings(&self) -> Value {
        json!({
            "warmup_s": self.warmup_s,
            "goals": self.goals,
            "latency_budget": self.latency_budget.to_string(),
            "sender_tick_us": self.sender_tick_us,
            "sender_nice": self.sender_nice,
            "max_sender_lag_ms": self.max_sender_lag_ms,
            "unoffered_retries": self.unoffered_retries,
            "require_rate": self.require_rate,
            "steady_limits": SteadyLimits::default(),
            "sender_cpus": self.sender_cpus.as_ref().map(ToString::to_string),
            "sut_cpus": self.sut_cpus.as_ref().map(ToString::to_string),
            "seed": self.seed,
            "recording": self.recording.as_ref().map(|r| r.path.display().to_string()),
            "frame_period_ms": self.shapes.first().and_then(|s| s.frame_period).map(|p| p.as_secs_f64() * 1e3),
            "workload": self.workload.as_ref().map(|w| w.name()),
            "workload_options": self.workload_options.iter().map(|(n, v)| format!("{n}={v}")).collect::<Vec<_>>(),
            "check": self.recording.as_ref().map(|r| r.check.clone()),
            "pipelines": self.pipelines,
            "adapt": self.adapt,
            "pipeline_mode": self.pipeline_mode.name(),
            "cotenant": self.cotenant.as_ref().map_or("none", CotenantSpec::kind),
            "cotenant_intensity": self.cotenant_intensity,
            "mps": self.mps.is_some(),
            "mps_threads": self.mps.flatten(),
        })
    }
}

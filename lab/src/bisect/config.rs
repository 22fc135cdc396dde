//! What a sweep is asked to do ([`BisectConfig`]), and what follows from it for every search
//! and trial: the search's settings, the gates and budget at a CPI, a trial's frames, the scene
//! sent, and the settings recorded beside the results.

use std::path::PathBuf;
use std::time::Duration;

use kplace::os::CpuSet;
use kplace::session::several::PipelineMode;
use kplace_radar::{Cpi, Scene, SceneConfig};
use serde_json::{Value, json};

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

/// A recording every trial streams instead of the radar scene, and what each trial's frames
/// are checked against (`kplace run --recording FILE --check CHECK`).
#[derive(Clone, Debug)]
pub struct RecordingFeed {
    /// The recording (`kplace record` makes one).
    pub path: PathBuf,
    /// The check, as `kplace run --check` takes it: `reference:PLACEMENT` or `golden:DIR`.
    pub check: String,
    /// Its frame shape, as the tables name it (`8x64x128`).
    pub shape: String,
    /// Its frame period, from its sample rate and frame shape: the workload's real-time
    /// pace. `None` when it states no sample rate (then `--start-rate` is needed).
    pub frame_period: Option<Duration>,
}

/// What a sweep searches and how: every setting of `kplace bisect-rate`, checked by its
/// caller (each is documented on that command's option of the same name).
#[derive(Clone, Debug)]
pub struct BisectConfig {
    /// The graph file.
    pub graph: PathBuf,
    /// The systems searched.
    pub systems: Systems,
    /// CPI sizes.
    pub cpi: Vec<Cpi>,
    /// The first rate tried; `None`: the workload's real-time rate.
    pub start_rate: Option<f64>,
    /// The first rate tried per placement file, before `start_rate` (`kplace tune` starts each
    /// candidate at its predicted rate).
    pub start_rates: std::collections::BTreeMap<PathBuf, f64>,
    /// The search's goals, the first the answer (RFC 9971's search goals).
    pub goals: Vec<Goal>,
    /// Searches per system and CPI.
    pub repeat: u32,
    /// Warm-up per trial, seconds of stream (at least 10 frames).
    pub warmup_s: f64,
    /// The budget post-CPI p99 must stay within.
    pub latency_budget: BudgetRule,
    /// Trials per search at most.
    pub max_trials: usize,
    /// Where the results and every trial's files go.
    pub out: PathBuf,
    /// The scene's noise seed.
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
    /// The co-tenant beside every search.
    pub cotenant: Option<CotenantSpec>,
    /// The co-tenant's intensity as given, for the record.
    pub cotenant_intensity: Option<f64>,
    /// `Some`: trials run as clients of a private MPS daemon started for the sweep, with this
    /// default active-thread percentage, if any.
    pub mps: Option<Option<f64>>,
}

impl BisectConfig {
    /// The search every system gets at `cpi` (`placement`'s own start rate, if it has one).
    pub(super) fn search_config(&self, cpi: Cpi, placement: Option<&PathBuf>) -> SearchConfig {
        let start = placement
            .and_then(|p| self.start_rates.get(p).copied())
            .or(self.start_rate)
            .unwrap_or(1.0 / self.frame_period(cpi).as_secs_f64());
        SearchConfig {
            goals: self.goals.clone(),
            max_trials: self.max_trials,
            unoffered_retries: self.unoffered_retries,
            ..SearchConfig::new(start, self.goals.first().map_or(1.0, |g| g.final_trial_s))
        }
    }

    /// The goals every search answers.
    pub(super) fn search_goals(&self) -> &[Goal] {
        &self.goals
    }

    /// The workload's frame period at `cpi`: a recording's own (from its sample rate and
    /// frame shape), else the radar CPI's physical duration. A recording that states no
    /// sample rate has none; its searches then start at `--start-rate` (the caller checks
    /// one is given), and this is one frame at that rate.
    pub fn frame_period(&self, cpi: Cpi) -> Duration {
        match &self.recording {
            Some(RecordingFeed {
                frame_period: Some(period),
                ..
            }) => *period,
            Some(_) => Duration::from_secs_f64(1.0 / self.start_rate.unwrap_or(1.0)),
            None => Duration::from_secs_f64(cpi.period_s()),
        }
    }

    /// The unit of every rate: `CPI/s` for the radar scene, `frames/s` for a recording.
    pub fn unit(&self) -> &'static str {
        if self.recording.is_some() {
            "frames/s"
        } else {
            "CPI/s"
        }
    }

    /// What the tables call the workload's frame: the CPI, or the recording's frame shape.
    pub fn shape_label(&self, cpi: Cpi) -> String {
        match &self.recording {
            Some(r) => r.shape.clone(),
            None => cpi.to_string(),
        }
    }

    /// The gates of every trial at `cpi`.
    pub(super) fn gates(&self, cpi: Cpi) -> Gates {
        Gates::new(self.latency_budget(cpi))
    }

    /// The latency budget of every trial at `cpi`: with `deadline`, the workload's frame
    /// period (or one period at the offered rate when that is longer).
    pub fn latency_budget(&self, cpi: Cpi) -> LatencyBudget {
        self.latency_budget.at_cpi(self.frame_period(cpi))
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

    /// The scene every trial sends: the default targets at `cpi`, with the sweep's seed.
    pub(super) fn scene(&self, cpi: Cpi) -> Result<Scene, String> {
        let mut config = SceneConfig::new(cpi);
        config.seed = self.seed;
        Scene::new(config).map_err(|e| format!("invalid scene: {e}"))
    }

    /// What `kplace run` is told of the frames it receives and how it checks them.
    pub(super) fn receiver_source_args(&self) -> Vec<String> {
        match &self.recording {
            Some(r) => vec![
                "--recording".into(),
                r.path.display().to_string(),
                "--check".into(),
                r.check.clone(),
            ],
            None => vec![
                "--seed".into(),
                self.seed.to_string(),
                "--scene-frames".into(),
                "16".into(),
            ],
        }
    }

    /// What `kplace send` sends at `cpi`: the scene, or the recording.
    pub(super) fn sender_source_args(&self, cpi: Cpi) -> Vec<String> {
        match &self.recording {
            Some(r) => vec!["--recording".into(), r.path.display().to_string()],
            None => vec![
                "--graph".into(),
                self.graph.display().to_string(),
                "--cpi".into(),
                cpi.to_string(),
                "--seed".into(),
                self.seed.to_string(),
                "--scene-frames".into(),
                "16".into(),
            ],
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
            "frame_period_ms": self.recording.as_ref().and_then(|r| r.frame_period).map(|p| p.as_secs_f64() * 1e3),
            "check": self.recording.as_ref().map(|r| r.check.clone()),
            "pipelines": self.pipelines,
            "pipeline_mode": self.pipeline_mode.name(),
            "cotenant": self.cotenant.as_ref().map_or("none", CotenantSpec::kind),
            "cotenant_intensity": self.cotenant_intensity,
            "mps": self.mps.is_some(),
            "mps_threads": self.mps.flatten(),
        })
    }
}

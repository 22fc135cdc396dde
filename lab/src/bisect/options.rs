//! A sweep's options as a command gives them, made ready to run: [`BisectConfig::check`]
//! refuses those that cannot work together or have no meaning, and
//! [`BisectConfig::resolve_workload`] resolves what the sweep runs: its frame shapes
//! ([`super::shapes`]) and the graph's workload with its options, the sweep's defaults
//! ([`sweep_defaults`]) included. Every error names the option to fix, as `kplace bisect-rate`
//! spells it.

use kplace::model::shape::FrameShape;
use kplace::os::CpuSet;
use kplace::os::affinity::CpuSetError;
use kplace::workload::kind::{KindError, Registry, WorkloadKind};
use kplace::workload::reference::CheckSpec;

use super::config::{BisectConfig, SearchShape, Systems};
use super::shapes::ShapeError;
use crate::rate::{ConfigError, SearchConfig};

/// Why a sweep's options cannot work, naming the option to fix.
#[derive(Debug, thiserror::Error)]
pub enum OptionError {
    /// A CPU list this process may not use, or that is not one.
    #[error("{option} {cpus}: {error}")]
    Cpus {
        /// `--sender-cpus` or `--sut-cpus`.
        option: &'static str,
        /// The list.
        cpus: CpuSet,
        /// Why, in the message.
        error: CpuSetError,
    },
    /// The recording's check is not one.
    #[error("--check: {0}")]
    Check(kplace::workload::reference::UnknownCheck),
    /// The recording's check is `none`, which no trial could pass on.
    #[error(
        "--check none gates nothing: a trial passes only on checked frames (reference:PLACEMENT or golden:DIR)"
    )]
    CheckNothing,
    /// An MPS thread percentage without MPS.
    #[error("--mps-threads needs --mps on")]
    MpsThreads,
    /// Several pipelines of another receiver.
    #[error("--pipelines measures kplace's own pipelines; it cannot be combined with --sut-cmd")]
    CommandPipelines,
    /// A sender lag that is not a positive number of ms.
    #[error("--max-sender-lag-ms must be a positive number of ms, not {0}")]
    SenderLag(f64),
    /// A duration out of its range.
    #[error("{option} must be 0 to 3600 seconds, not {seconds}")]
    Seconds {
        /// `--window-s`, `--initial-window-s` or `--warmup-s`.
        option: &'static str,
        /// The duration given.
        seconds: f64,
    },
    /// Short trials that are not shorter than the full-length ones.
    #[error(
        "--initial-window-s must be positive and at most --window-s ({window_s}), not {initial_s}"
    )]
    InitialWindow {
        /// The full-length trials' window, s.
        window_s: f64,
        /// The short trials' window, s.
        initial_s: f64,
    },
    /// A rate (`--start-rate`, `--require-rate`) whose frame period is out of the range a
    /// run can represent ([`kplace::model::rate`]).
    #[error(transparent)]
    Rate(#[from] kplace::model::rate::RateError),
    /// The goals cannot be searched.
    #[error("--goals/--width/--window-s: {0}")]
    Goals(ConfigError),
    /// The shapes searched cannot be resolved.
    #[error(transparent)]
    Shapes(#[from] ShapeError),
    /// A workload option the graph's workload does not take.
    #[error(transparent)]
    Workload(KindError),
    /// A workload option on a recording's sweep.
    #[error("--opt sets an option of the graph's workload; a sweep on a recording has none")]
    RecordingOptions,
}

impl BisectConfig {
    /// Refuses options that cannot work together or have no meaning, naming the option: CPU
    /// lists this process may not use, a recording's check that is not one (or `none`),
    /// several pipelines of another receiver, a sender lag, window or warm-up out of range
    /// (the windows are every goal's trial durations), a start or required rate whose frame
    /// period is out of [`kplace::model::rate`]'s range, and goals that cannot be searched.
    pub fn check(&self) -> Result<(), OptionError> {
        for (option, cpus) in [
            ("--sender-cpus", &self.sender_cpus),
            ("--sut-cpus", &self.sut_cpus),
        ] {
            if let Some(cpus) = cpus {
                cpus.check_allowed().map_err(|error| OptionError::Cpus {
                    option,
                    cpus: cpus.clone(),
                    error,
                })?;
            }
        }
        if let Some(feed) = &self.recording {
            let check: CheckSpec = feed.check.parse().map_err(OptionError::Check)?;
            if check == CheckSpec::Nothing {
                return Err(OptionError::CheckNothing);
            }
        }
        if matches!(self.systems, Systems::Command { .. }) && self.pipelines > 1 {
            return Err(OptionError::CommandPipelines);
        }
        let lag = self.max_sender_lag_ms;
        if !(lag.is_finite() && lag > 0.0) {
            return Err(OptionError::SenderLag(lag));
        }
        self.check_windows()?;
        for (option, rate) in [
            ("--start-rate", self.start_rate),
            ("--require-rate", self.require_rate),
        ] {
            if let Some(rate) = rate {
                kplace::model::rate::frame_rate(option, rate)?;
            }
        }
        let first_window = self.goals.first().map_or(1.0, |g| g.final_trial_s);
        SearchConfig {
            goals: self.goals.clone(),
            ..SearchConfig::new(self.start_rate.unwrap_or(1.0), first_window)
        }
        .validate()
        .map_err(OptionError::Goals)
    }

    /// Refuses trial windows (every goal's full-length and short trials) and a warm-up out of
    /// 0 to 3600 s, and short trials that are not positive and at most the full-length ones.
    fn check_windows(&self) -> Result<(), OptionError> {
        let windows = self.goals.iter().flat_map(|g| {
            [
                ("--window-s", g.final_trial_s),
                ("--initial-window-s", g.initial_trial_s),
            ]
        });
        for (option, seconds) in windows.chain([("--warmup-s", self.warmup_s)]) {
            if !(seconds.is_finite() && (0.0..=3600.0).contains(&seconds)) {
                return Err(OptionError::Seconds { option, seconds });
            }
        }
        for goal in &self.goals {
            let (window_s, initial_s) = (goal.final_trial_s, goal.initial_trial_s);
            if !(initial_s > 0.0 && initial_s <= window_s) {
                return Err(OptionError::InitialWindow {
                    window_s,
                    initial_s,
                });
            }
        }
        Ok(())
    }

    /// The [`BisectConfig::mps`] setting of `--mps on` (`on`) and `--mps-threads`
    /// (`threads`), which needs MPS on.
    pub fn mps_setting(on: bool, threads: Option<f64>) -> Result<Option<Option<f64>>, OptionError> {
        match (on, threads) {
            (false, Some(_)) => Err(OptionError::MpsThreads),
            (on, threads) => Ok(on.then_some(threads)),
        }
    }

    /// Resolves what the sweep runs, from its graph, its recording and `asked` (the shapes
    /// `--shape` gives): its `shapes` ([`SearchShape::for_recording`], or
    /// [`SearchShape::for_workload`] without a recording), and without a recording its
    /// `workload` (the graph's kind in `registry`) and `workload_options`, the sweep's
    /// defaults added ([`sweep_defaults`]) and all checked by the kind. A recording's sweep
    /// has no workload, so no workload option.
    pub fn resolve_workload(
        &mut self,
        registry: &Registry,
        asked: &[FrameShape],
    ) -> Result<(), OptionError> {
        match &self.recording {
            Some(feed) => {
                self.shapes =
                    SearchShape::for_recording(&self.graph, asked, &feed.path, self.start_rate)?;
                self.workload = None;
                if !self.workload_options.is_empty() {
                    return Err(OptionError::RecordingOptions);
                }
            }
            None => {
                let (shapes, kind) = SearchShape::for_workload(registry, &self.graph, asked)?;
                sweep_defaults(kind.as_ref(), &mut self.workload_options);
                self.kind_options()
                    .check(kind.as_ref())
                    .map_err(OptionError::Workload)?;
                self.shapes = shapes;
                self.workload = Some(kind);
            }
        }
        Ok(())
    }
}

/// Adds the options a sweep (`bisect-rate`, `tune`) gives `kind` unless told otherwise
/// ([`SweepWords::sweep_options`](kplace::workload::kind::SweepWords::sweep_options)).
pub fn sweep_defaults(kind: &dyn WorkloadKind, options: &mut Vec<(String, String)>) {
    for &(name, value) in kind.sweep_options() {
        if !options.iter().any(|(n, _)| n == name) {
            options.push((name.into(), value.into()));
        }
    }
}

#[cfg(test)]
pub(super) mod tests;

//! What a search establishes: every goal's result ([`GoalResult`]: its bounds, conditional
//! throughput and how it ended), every load measured with its classification, and every
//! trial ([`SearchResult`]).

use serde::{Deserialize, Serialize};

use super::{Class, Goal, TrialRecord};

/// How a goal's search ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Ending {
    /// Lower and upper bound within the goal's width.
    Regular,
    /// The highest load allowed meets the goal.
    MaxLoad,
    /// The load generator could not offer loads from `ceiling` up: the result is a lower
    /// bound on the system's rate, the sender's limit on this machine. A ceiling at or below
    /// the result (the sender offered the result, then failed a lower load) only stopped the
    /// search from narrowing it.
    SenderLimit {
        /// The lowest load the sender could not offer.
        ceiling: f64,
        /// Why, as the last unoffered trial there said.
        why: String,
    },
    /// Even the lowest load allowed fails the goal: no rate meets it.
    MinLoad,
    /// The trial cap came before the goal's width.
    TrialCap,
    /// The search was stopped from outside before the goal's width.
    Interrupted,
}

impl Ending {
    /// The ending as one word, for tables and scripts.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Regular => "regular",
            Self::MaxLoad => "max_load",
            Self::SenderLimit { .. } => "sender_limit",
            Self::MinLoad => "min_load",
            Self::TrialCap => "trial_cap",
            Self::Interrupted => "interrupted",
        }
    }
}

/// What the search established for one goal.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GoalResult {
    /// The goal.
    pub goal: Goal,
    /// The relevant lower bound: the highest load classified as meeting the goal below every
    /// load classified as not meeting it. The goal's answer.
    pub lower: Option<f64>,
    /// The relevant upper bound: the lowest load classified as not meeting the goal.
    pub upper: Option<f64>,
    /// The lower bound times one minus the loss ratio its trials allow at the exceed ratio.
    pub conditional_throughput: Option<f64>,
    /// Full-length trials measured at the lower bound, and their seconds.
    pub trials_at_lower: usize,
    /// Their duration, s.
    pub seconds_at_lower: f64,
    /// How the goal's search ended.
    pub ending: Ending,
}

impl GoalResult {
    /// The relative width `(upper - lower) / upper` reached, when both bounds exist.
    pub fn width(&self) -> Option<f64> {
        Some((self.upper? - self.lower?) / self.upper?)
    }

    /// The result in one line, with loads in `unit` (`CPI/s`, `frames/s`).
    pub fn describe(&self, unit: &str) -> String {
        let width = self
            .width()
            .map_or(String::new(), |w| format!(", width {:.1}%", w * 100.0));
        let upper = self
            .upper
            .map_or(String::new(), |u| format!(", fails at {u:.1}"));
        match (&self.ending, self.lower) {
            (Ending::Regular, Some(l)) => format!("{l:.1} {unit}{upper}{width}"),
            (Ending::MaxLoad, Some(l)) => {
                format!("at least {l:.1} {unit}: the highest load allowed meets the goal")
            }
            (Ending::SenderLimit { ceiling, why }, Some(l)) if *ceiling <= l => format!(
                "at least {l:.1} {unit}{upper}: the sender offered it, but later not \
                 {ceiling:.1} {unit} ({why}), so no higher rate was tried"
            ),
            (Ending::SenderLimit { ceiling, why }, Some(l)) => format!(
                "at least {l:.1} {unit}: the sender could not offer {ceiling:.1} {unit} here ({why})"
            ),
            (Ending::SenderLimit { ceiling, why }, None) => format!(
                "none measurable: the sender could not offer {ceiling:.1} {unit} here ({why})"
            ),
            (Ending::MinLoad, _) => format!(
                "none: even the lowest load, {:.3} {unit}, fails",
                self.upper.unwrap_or(f64::NAN)
            ),
            (Ending::TrialCap, Some(l)) => {
                format!("{l:.1} {unit}{upper}{width} (the trial cap came before the goal's width)")
            }
            (Ending::Interrupted, Some(l)) => format!("{l:.1} {unit}{upper}{width} (interrupted)"),
            (Ending::TrialCap, None) => {
                "none yet: the trial cap came before any load met the goal".into()
            }
            (Ending::Interrupted, None) => "none yet: interrupted".into(),
            (Ending::Regular | Ending::MaxLoad, None) => "none".into(),
        }
    }
}

/// One load the search measured, classified for every goal's final stage.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoadEntry {
    /// The load.
    pub load: f64,
    /// Measured trials, and their seconds.
    pub trials: usize,
    /// Their duration, s.
    pub seconds: f64,
    /// Trials the load generator could not offer.
    pub unoffered: usize,
    /// The classification for each goal, in the goals' order.
    pub classes: Vec<Class>,
}

/// What the search found; see the module documentation for its guarantees.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchResult {
    /// One result per goal, in the goals' order.
    pub goals: Vec<GoalResult>,
    /// Every load measured, ascending.
    pub loads: Vec<LoadEntry>,
    /// Every trial, in the order run.
    pub trials: Vec<TrialRecord>,
    /// The measured trials' total duration, s.
    pub trial_seconds: f64,
    /// The lowest load the sender could not offer, if any.
    pub sender_ceiling: Option<f64>,
}

//! What a search goal asks, and how one load's trials are judged against it: RFC 9971's
//! search goal ([`Goal`]) and its `--goals` form ([`GoalSpec`]), the stages a goal is searched
//! in ([`Target`]), and the load classification ([`classify`]) and conditional throughput that
//! every result rests on.

use serde::{Deserialize, Serialize};

use super::ConfigError;

/// What a search must establish: RFC 9971's search goal.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Goal {
    /// The goal's name in tables (`robust`, `strict`).
    pub name: String,
    /// A trial is high-loss when the fraction of its frames lost exceeds this (0: any loss).
    pub loss_ratio: f64,
    /// The fraction of the duration sum high-loss trials may take at a load that meets the
    /// goal (0: none; 0.5: a median-like goal that rides out a minority of bad trials).
    pub exceed_ratio: f64,
    /// The duration of a full-length trial, s of stream.
    pub final_trial_s: f64,
    /// The full-length trial duration a load needs before it is decided either way, s.
    pub duration_sum_s: f64,
    /// The relative width `(upper - lower) / upper` at which the goal's search ends.
    pub width: f64,
    /// The duration of the coarse stage's short trials, s (at most `final_trial_s`).
    pub initial_trial_s: f64,
}

impl Goal {
    /// The strict goal: no frame lost in any full-length trial; one trial decides a load.
    pub fn strict(final_trial_s: f64, width: f64) -> Self {
        Self {
            name: "strict".into(),
            loss_ratio: 0.0,
            exceed_ratio: 0.0,
            final_trial_s,
            duration_sum_s: final_trial_s,
            width,
            initial_trial_s: final_trial_s / 4.0,
        }
    }

    /// The robust goal: at most 1% of a trial's frames lost (the latency gate's p99 within
    /// the budget), in trials taking at most half of five full-length trials' time, so that
    /// the trials a stall of the machine spoiled never decide a load alone.
    pub fn robust(final_trial_s: f64, width: f64) -> Self {
        Self {
            name: "robust".into(),
            loss_ratio: 0.01,
            exceed_ratio: 0.5,
            final_trial_s,
            duration_sum_s: 5.0 * final_trial_s,
            width,
            initial_trial_s: final_trial_s / 4.0,
        }
    }

    /// Checks every field's range, naming the goal and the field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |field: &'static str, value: f64, range: &'static str| {
            Err(ConfigError::Goal {
                goal: self.name.clone(),
                field,
                value,
                range,
            })
        };
        if !(0.0..1.0).contains(&self.loss_ratio) {
            return bad("loss ratio", self.loss_ratio, "[0, 1)");
        }
        if !(0.0..1.0).contains(&self.exceed_ratio) {
            return bad("exceed ratio", self.exceed_ratio, "[0, 1)");
        }
        if !(self.final_trial_s.is_finite() && self.final_trial_s > 0.0) {
            return bad("final trial duration", self.final_trial_s, "(0, inf) s");
        }
        if !(self.duration_sum_s.is_finite() && self.duration_sum_s >= self.final_trial_s) {
            return bad(
                "duration sum",
                self.duration_sum_s,
                "[final trial duration, inf) s",
            );
        }
        if !(self.width > 0.0 && self.width < 1.0) {
            return bad("width", self.width, "(0, 1)");
        }
        if !(self.initial_trial_s > 0.0 && self.initial_trial_s <= self.final_trial_s) {
            return bad(
                "initial trial duration",
                self.initial_trial_s,
                "(0, final trial duration] s",
            );
        }
        Ok(())
    }

    /// The goal's two stages: coarse (one short trial decides a load, four times the width,
    /// capped at 0.5; only when the initial trials are shorter) and final.
    pub(super) fn targets(&self) -> Vec<Target> {
        let last = Target {
            loss_ratio: self.loss_ratio,
            exceed_ratio: self.exceed_ratio,
            trial_s: self.final_trial_s,
            duration_sum_s: self.duration_sum_s,
            width: self.width,
            stage: Stage::Final,
        };
        if self.initial_trial_s >= self.final_trial_s {
            return vec![last];
        }
        let coarse = Target {
            trial_s: self.initial_trial_s,
            duration_sum_s: self.initial_trial_s,
            width: (4.0 * self.width).min(0.5).max(self.width),
            stage: Stage::Coarse,
            ..last
        };
        vec![coarse, last]
    }
}

/// A search goal as `kplace bisect-rate --goals` gives it, `NAME:LOSS:EXCEED:TRIALS`: a trial
/// is high-loss when more than LOSS of its frames are lost, and a load meets the goal when
/// high-loss trials take at most EXCEED of TRIALS full-length trials' time. The trials'
/// durations and the width are the sweep's, given to [`GoalSpec::goal`].
#[derive(Clone, Debug, PartialEq)]
pub struct GoalSpec {
    /// The goal's name (letters, digits, `-` or `_`).
    pub name: String,
    /// LOSS: the goal's loss ratio, in [0, 1).
    pub loss_ratio: f64,
    /// EXCEED: the goal's exceed ratio, in [0, 1).
    pub exceed_ratio: f64,
    /// TRIALS: the duration sum, in full-length trials (1 to 100).
    pub trials: f64,
}

impl GoalSpec {
    /// The goal with full-length trials of `window_s`, short ones of `initial_s`, and `width`.
    pub fn goal(&self, window_s: f64, initial_s: f64, width: f64) -> Goal {
        Goal {
            name: self.name.clone(),
            loss_ratio: self.loss_ratio,
            exceed_ratio: self.exceed_ratio,
            final_trial_s: window_s,
            duration_sum_s: self.trials * window_s,
            width,
            initial_trial_s: initial_s,
        }
    }
}

/// Why a `--goals` entry is not a [`GoalSpec`]: each names the entry and the part that is
/// wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GoalSpecError {
    /// Not four parts separated by `:`.
    #[error("{text:?}: expected NAME:LOSS:EXCEED:TRIALS, e.g. robust:0.01:0.5:5")]
    Form {
        /// The entry.
        text: String,
    },
    /// The name is empty or has other characters.
    #[error("{text:?}: the name must be letters, digits, - or _")]
    Name {
        /// The entry.
        text: String,
    },
    /// A number that is not one, or out of its range.
    #[error("{text:?}: {part} {value:?} must be {range}")]
    Number {
        /// The entry.
        text: String,
        /// The part: `LOSS`, `EXCEED` or `TRIALS`.
        part: &'static str,
        /// Its text.
        value: String,
        /// What it must be.
        range: &'static str,
    },
}

impl std::str::FromStr for GoalSpec {
    type Err = GoalSpecError;

    /// Parses `NAME:LOSS:EXCEED:TRIALS` (parts trimmed), naming the part that is wrong.
    fn from_str(text: &str) -> Result<Self, GoalSpecError> {
        let parts: Vec<&str> = text.split(':').map(str::trim).collect();
        let [name, loss, exceed, trials] = parts[..] else {
            return Err(GoalSpecError::Form { text: text.into() });
        };
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(GoalSpecError::Name { text: text.into() });
        }
        let number = |part: &'static str, value: &str, ok: fn(f64) -> bool, range| {
            value
                .parse::<f64>()
                .ok()
                .filter(|&v| ok(v))
                .ok_or_else(|| GoalSpecError::Number {
                    text: text.into(),
                    part,
                    value: value.into(),
                    range,
                })
        };
        let fraction = |v: f64| (0.0..1.0).contains(&v);
        Ok(GoalSpec {
            name: name.to_string(),
            loss_ratio: number("LOSS", loss, fraction, "a fraction in [0, 1)")?,
            exceed_ratio: number("EXCEED", exceed, fraction, "a fraction in [0, 1)")?,
            trials: number(
                "TRIALS",
                trials,
                |v| (1.0..=100.0).contains(&v),
                "1 to 100 trials",
            )?,
        })
    }
}

/// One stage of a goal's search: what [`classify`] judges a load against.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Target {
    /// The goal's loss ratio.
    pub loss_ratio: f64,
    /// The goal's exceed ratio.
    pub exceed_ratio: f64,
    /// A full-length trial for this stage, s.
    pub trial_s: f64,
    /// The stage's duration sum, s.
    pub duration_sum_s: f64,
    /// The stage's relative width.
    pub width: f64,
    /// Coarse or final.
    pub stage: Stage,
}

/// Which stage of a goal's search a trial served.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Short trials, a wide bracket.
    Coarse,
    /// Full-length trials, the goal's width.
    Final,
}

/// A load's classification for one stage of a goal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// The load meets the goal, whatever further trials would show.
    Lower,
    /// The load does not meet the goal, whatever further trials would show.
    Upper,
    /// Not enough evidence either way.
    Undecided,
}

/// Full-length trials may be this much shorter than asked (the runner's frame counts are
/// rounded, its durations computed): a float's error, never a frame.
pub(super) const FULL_LENGTH_SLACK: f64 = 1e-9;

/// Classifies a load for `target` from its measured trials `(duration_s, loss_ratio)`
/// (RFC 9971's load classification): high-loss trials are those whose loss ratio exceeds the
/// target's; full-length ones count whole, short high-loss ones count as far as short low-loss
/// ones do not offset them (at `exceed / (1 - exceed)` s per s); the duration missing to the
/// duration sum counts as high-loss when asking "is it surely a lower bound", as low-loss when
/// asking "is it surely an upper bound".
pub fn classify(trials: impl IntoIterator<Item = (f64, f64)>, target: &Target) -> Class {
    let (mut full_high, mut full_low, mut short_high, mut short_low) = (0.0, 0.0, 0.0, 0.0);
    for (duration, loss) in trials {
        // A NaN loss ratio is high-loss: nothing passes by default.
        let high = loss
            .partial_cmp(&target.loss_ratio)
            .is_none_or(|o| o.is_gt());
        let full = duration >= target.trial_s * (1.0 - FULL_LENGTH_SLACK);
        match (full, high) {
            (true, true) => full_high += duration,
            (true, false) => full_low += duration,
            (false, true) => short_high += duration,
            (false, false) => short_low += duration,
        }
    }
    let exceed = target.exceed_ratio;
    let balancing = short_low * exceed / (1.0 - exceed);
    let high = full_high + (short_high - balancing).max(0.0);
    let counted = high + full_low;
    let missing = (target.duration_sum_s - counted).max(0.0);
    let whole = target.duration_sum_s.max(counted);
    if high / whole > exceed {
        Class::Upper
    } else if (high + missing) / whole <= exceed {
        Class::Lower
    } else {
        Class::Undecided
    }
}

/// The loss ratio a goal's exceed ratio allows at a load, from its full-length trials: the
/// exceed-ratio quantile of their loss ratios, weighted by duration, with the duration missing
/// to the sum counted as total loss (RFC 9971's conditional throughput is the load times one
/// minus this).
pub(super) fn quantile_loss(trials: &[(f64, f64)], goal: &Goal) -> f64 {
    let mut full: Vec<(f64, f64)> = trials
        .iter()
        .copied()
        .filter(|(d, _)| *d >= goal.final_trial_s * (1.0 - FULL_LENGTH_SLACK))
        .collect();
    full.sort_by(|a, b| b.1.total_cmp(&a.1));
    let sum = super::seconds(&full);
    let mut remaining = goal.duration_sum_s.max(sum) * goal.exceed_ratio;
    remaining -= (goal.duration_sum_s - sum).max(0.0);
    if remaining < 0.0 {
        return 1.0;
    }
    for (duration, loss) in full {
        remaining -= duration;
        if remaining < 0.0 {
            return loss;
        }
    }
    0.0
}

#[cfg(test)]
mod tests {
    use super::{GoalSpec, GoalSpecError};

    #[test]
    fn a_goal_entry_gives_the_goal_at_the_sweeps_durations() {
        let spec: GoalSpec = " robust : 0.01 : 0.5 : 5 ".parse().unwrap();
        assert_eq!(
            spec,
            GoalSpec {
                name: "robust".into(),
                loss_ratio: 0.01,
                exceed_ratio: 0.5,
                trials: 5.0,
            }
        );
        let goal = spec.goal(2.0, 0.5, 0.02);
        assert_eq!(goal.name, "robust");
        assert_eq!((goal.loss_ratio, goal.exceed_ratio), (0.01, 0.5));
        assert_eq!((goal.final_trial_s, goal.duration_sum_s), (2.0, 10.0));
        assert_eq!((goal.initial_trial_s, goal.width), (0.5, 0.02));
        assert_eq!(goal.validate(), Ok(()));
        let strict: GoalSpec = "strict_2-b:0:0:1".parse().unwrap();
        assert_eq!(strict.goal(1.0, 1.0, 0.1).duration_sum_s, 1.0);
    }

    #[test]
    fn a_wrong_goal_entry_names_the_part_that_is_wrong() {
        let refused = |text: &str| text.parse::<GoalSpec>().unwrap_err();
        for text in ["robust:0.01:0.5", "robust:0.01:0.5:5:1", ""] {
            assert_eq!(refused(text), GoalSpecError::Form { text: text.into() });
        }
        assert_eq!(
            refused("robust:0.001:0.5").to_string(),
            "\"robust:0.001:0.5\": expected NAME:LOSS:EXCEED:TRIALS, e.g. robust:0.01:0.5:5"
        );
        for (text, part, value, range) in [
            ("robust:2:0.5:5", "LOSS", "2", "a fraction in [0, 1)"),
            ("robust:x:0.5:5", "LOSS", "x", "a fraction in [0, 1)"),
            ("robust:0.01:1:5", "EXCEED", "1", "a fraction in [0, 1)"),
            (
                "robust:0.01:-0.1:5",
                "EXCEED",
                "-0.1",
                "a fraction in [0, 1)",
            ),
            ("robust:0.01:0.5:0.5", "TRIALS", "0.5", "1 to 100 trials"),
            ("robust:0.01:0.5:101", "TRIALS", "101", "1 to 100 trials"),
            ("robust:0.01:0.5:NaN", "TRIALS", "NaN", "1 to 100 trials"),
        ] {
            let error = refused(text);
            assert_eq!(
                error,
                GoalSpecError::Number {
                    text: text.into(),
                    part,
                    value: value.into(),
                    range,
                }
            );
            assert_eq!(
                error.to_string(),
                format!("{text:?}: {part} {value:?} must be {range}")
            );
        }
    }

    #[test]
    fn a_goal_name_is_letters_digits_dashes_or_underscores() {
        for text in [
            ":0.01:0.5:5",
            "ro bust:0.01:0.5:5",
            "rob.ust:0.01:0.5:5",
            "é:0:0:1",
        ] {
            let error = text.parse::<GoalSpec>().unwrap_err();
            assert_eq!(error, GoalSpecError::Name { text: text.into() });
            assert_eq!(
                error.to_string(),
                format!("{text:?}: the name must be letters, digits, - or _")
            );
        }
    }
}

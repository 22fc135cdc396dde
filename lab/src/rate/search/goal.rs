//! What a search goal asks, and how one load's trials are judged against it: RFC 9971's
//! search goal ([`Goal`]), the stages a goal is searched in ([`Target`]), and the load
//! classification ([`classify`]) and conditional throughput that every result rests on.

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

//! The switching rule: given each delivered frame's post-frame latency and the slots in use,
//! when to move the stream to another placement (docs/adapt.md explains it with its limits).
//!
//! A run that adapts has placements in order of preference: the first is the one it would
//! rather run (fewer cores, the GPU to itself), each later one keeps up under more pressure at
//! a higher cost. [`Switcher`] judges the frames of the running placement in windows of
//! [`Rule::window`] frames:
//!
//! - **Pressure** is a window with more than [`Rule::over_share`] of its frames *late*: past
//!   [`Rule::trigger`] of the latency budget (half, by default, so that the rule moves before
//!   the budget itself is broken), or slots on average at least [`Rule::occupancy`] full, or a frame that
//!   found no free slot (the executor then runs it on another placement, or drops it). Under
//!   pressure the rule moves one placement on, if there is one. Late frames and slot misses
//!   decide as soon as there are too many for a window, without waiting for its end.
//! - **Relief.** A window without pressure, on a placement the rule moved to at least
//!   [`Rule::hold`] ago (the current hold), moves one placement back: a *probe* of the cheaper
//!   one. Nothing on the cheaper placement can be measured while it does not run, so trying it
//!   is the only evidence that the pressure is gone.
//! - **Hysteresis.** A probe's first window may hold no late frame: the first one ends the
//!   probe. A probe that meets pressure before it has run [`Rule::hold`] doubles the hold (up
//!   to [`Rule::max_hold`]) before the next one; one that lasts resets it. So probes come at
//!   most once a hold, and a pressure that stays costs about one late frame per probe, ever
//!   more rarely.
//!
//! Frames of the placement left behind (those in flight when it switched) finish there and
//! are not judged: each window holds only frames that began on the placement it judges.
//!
//! Pure: no clock, no I/O, no threads; the same observations give the same switches.

use std::time::Duration;

/// When to switch: the latency budget and how much evidence a switch takes.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    /// Post-frame latency (completion minus the frame's last packet) a frame should stay
    /// within.
    pub budget: Duration,
    /// The share of the budget past which a frame counts as late for the rule, in (0, 1]:
    /// below 1, the rule moves before frames break the budget itself.
    pub trigger: f64,
    /// Frames each judgement covers.
    pub window: u32,
    /// Share of a window's frames that may be late; more is pressure.
    pub over_share: f64,
    /// Mean share of the slots in use over a window that is pressure: the pipeline is
    /// falling behind before any frame is late.
    pub occupancy: f64,
    /// How long a placement runs without pressure before the rule tries the preferred one
    /// again, at first.
    pub hold: Duration,
    /// The longest hold, after probes that failed.
    pub max_hold: Duration,
}

impl Rule {
    /// The rule for `budget`, with the defaults docs/adapt.md gives.
    pub fn for_budget(budget: Duration) -> Rule {
        Rule {
            budget,
            trigger: 0.5,
            window: 16,
            over_share: 0.25,
            occupancy: 0.75,
            hold: Duration::from_secs(2),
            max_hold: Duration::from_secs(32),
        }
    }

    /// Refuses a rule that could never judge or never settle, naming the field.
    pub fn check(&self) -> Result<(), RuleError> {
        if self.budget.is_zero() {
            return Err(RuleError::Budget);
        }
        if !(self.trigger > 0.0 && self.trigger <= 1.0) {
            return Err(RuleError::Trigger(self.trigger));
        }
        if self.window == 0 {
            return Err(RuleError::Window);
        }
        if !(0.0..1.0).contains(&self.over_share) {
            return Err(RuleError::OverShare(self.over_share));
        }
        if !(self.occupancy > 0.0 && self.occupancy <= 1.0) {
            return Err(RuleError::Occupancy(self.occupancy));
        }
        if self.hold.is_zero() || self.max_hold < self.hold {
            return Err(RuleError::Hold);
        }
        Ok(())
    }
}

/// A rule that could never judge or never settle, by the field at fault.
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
pub enum RuleError {
    /// [`Rule::budget`] is zero.
    #[error("the latency budget must be longer than zero")]
    Budget,
    /// [`Rule::trigger`] is outside (0, 1].
    #[error(
        "the trigger (the share of the budget past which a frame is late) must be in (0, 1], not {0}"
    )]
    Trigger(f64),
    /// [`Rule::window`] is zero.
    #[error("the window must hold at least one frame")]
    Window,
    /// [`Rule::over_share`] is outside [0, 1).
    #[error("the share of late frames that is pressure must be in [0, 1), not {0}")]
    OverShare(f64),
    /// [`Rule::occupancy`] is outside (0, 1].
    #[error("the occupancy that is pressure must be in (0, 1], not {0}")]
    Occupancy(f64),
    /// [`Rule::hold`] is zero or longer than [`Rule::max_hold`].
    #[error("the hold must be longer than zero and at most the longest hold")]
    Hold,
}

/// One delivered frame, as the rule sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Observation {
    /// When it was delivered, on the run's clock.
    pub at: Duration,
    /// The placement (index in preference order) the frame began on.
    pub placement: usize,
    /// Its post-frame latency.
    pub post_frame: Duration,
    /// Frames of its placement in flight when it was delivered, itself included.
    pub in_flight: u64,
    /// Slots of the placement it began on.
    pub slots: u64,
    /// Frames that found no free slot on the running placement since the run began.
    pub slot_misses: u64,
}

/// Why the rule switched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// The running placement was not keeping up.
    Pressure,
    /// The running placement kept up for a hold: the preferred one is tried again.
    Relief,
}

impl Reason {
    /// The reason as reports name it.
    pub fn name(self) -> &'static str {
        match self {
            Reason::Pressure => "pressure",
            Reason::Relief => "relief",
        }
    }
}

/// What a window of frames showed: the evidence behind a switch.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Evidence {
    /// Frames judged.
    pub frames: u32,
    /// Of those, frames later than the trigger ([`Rule::trigger`] of the budget).
    pub late: u32,
    /// The late frames the window could hold without pressure: its share of a whole window,
    /// or 0 in a probe's first window.
    pub late_allowed: u32,
    /// The highest post-frame latency among them, ms.
    pub worst_ms: f64,
    /// The mean share of the slots in use.
    pub occupancy: f64,
    /// Frames that found no free slot on the placement during the window.
    pub slot_misses: u64,
    /// How long the placement had run when it was judged, s.
    pub ran_s: f64,
    /// The hold in force, s: how long a placement must keep up before a probe.
    pub hold_s: f64,
}

/// A switch from one placement to another.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Switch {
    /// When it was decided, s on the run's clock.
    pub at_s: f64,
    /// The placement left (index in preference order).
    pub from: usize,
    /// The placement taken.
    pub to: usize,
    /// Why.
    pub reason: Reason,
    /// What the last window showed.
    pub evidence: Evidence,
}

/// A window of frames being judged.
#[derive(Clone, Copy, Debug, Default)]
struct Window {
    frames: u32,
    over: u32,
    worst: Duration,
    occupancy_sum: f64,
    misses_at_start: Option<u64>,
}

/// The rule applied to a run: which placement runs, and when it changes.
#[derive(Clone, Debug)]
pub struct Switcher {
    rule: Rule,
    placements: usize,
    active: usize,
    /// When the active placement began.
    since: Duration,
    /// Whether the active placement is a probe that has not yet lasted a base hold.
    probing: bool,
    /// Whether the window being judged is a probe's first, which may hold no late frame.
    strict: bool,
    hold: Duration,
    window: Window,
}

impl Switcher {
    /// A switcher over `placements` placements (at least one), starting on the first.
    pub fn new(rule: Rule, placements: usize) -> Switcher {
        let hold = rule.hold;
        Switcher {
            rule,
            placements: placements.max(1),
            active: 0,
            since: Duration::ZERO,
            probing: false,
            strict: false,
            hold,
            window: Window::default(),
        }
    }

    /// The placement new frames begin on.
    pub fn active(&self) -> usize {
        self.active
    }

    /// The hold in force.
    pub fn hold(&self) -> Duration {
        self.hold
    }

    /// Takes one delivered frame; returns the switch it decides, if any. The caller begins
    /// every later frame on [`Switcher::active`].
    pub fn observe(&mut self, frame: Observation) -> Option<Switch> {
        if frame.placement != self.active {
            return None;
        }
        let w = &mut self.window;
        let misses_at_start = *w.misses_at_start.get_or_insert(frame.slot_misses);
        w.frames += 1;
        if frame.post_frame > self.rule.budget.mul_f64(self.rule.trigger) {
            w.over += 1;
        }
        w.worst = w.worst.max(frame.post_frame);
        w.occupancy_sum += frame.in_flight as f64 / frame.slots.max(1) as f64;
        // Late frames past what a window may hold, or a frame without a slot, decide at once;
        // a probe's first window may hold none. Occupancy is a mean, judged at the window's end.
        let late_limit = if self.strict {
            0
        } else {
            (self.rule.over_share * f64::from(self.rule.window)).floor() as u32
        };
        let early = w.over > late_limit || frame.slot_misses > misses_at_start;
        if !early && w.frames < self.rule.window {
            return None;
        }
        let window = std::mem::take(&mut self.window);
        self.strict = false;
        let late_allowed = late_limit;
        let ran = frame.at.saturating_sub(self.since);
        let evidence = Evidence {
            frames: window.frames,
            late: window.over,
            late_allowed,
            worst_ms: window.worst.as_secs_f64() * 1e3,
            occupancy: window.occupancy_sum / f64::from(window.frames),
            slot_misses: frame
                .slot_misses
                .saturating_sub(window.misses_at_start.unwrap_or(frame.slot_misses)),
            ran_s: ran.as_secs_f64(),
            hold_s: self.hold.as_secs_f64(),
        };
        let pressure = early || evidence.occupancy >= self.rule.occupancy;
        let to = if pressure {
            if self.probing {
                // The probe failed: wait longer before the next.
                self.hold = (self.hold * 2).min(self.rule.max_hold);
            }
            (self.active + 1 < self.placements).then_some((self.active + 1, Reason::Pressure))
        } else {
            if self.probing && ran >= self.rule.hold {
                self.probing = false;
                self.hold = self.rule.hold;
            }
            (self.active > 0 && ran >= self.hold).then(|| (self.active - 1, Reason::Relief))
        };
        let (to, reason) = to?;
        let switch = Switch {
            at_s: frame.at.as_secs_f64(),
            from: self.active,
            to,
            reason,
            evidence,
        };
        self.active = to;
        self.since = frame.at;
        self.probing = reason == Reason::Relief;
        self.strict = self.probing;
        Some(switch)
    }
}

#[cfg(test)]
mod tests;

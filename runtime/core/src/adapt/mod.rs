//! Re-placement while the stream runs: a run holds several placements of one graph, each
//! planned up front with its own slots, pools, kernel states, streams and workers, and moves
//! the stream between them at frame boundaries when the one running stops keeping up (the
//! executor's `run_adaptive`). [`rule`] decides when; this module holds what a run records.
//!
//! Guarantees, from the executor: a frame runs wholly on the placement it began on; frames in
//! flight at a switch finish there while the next frame begins on the new one; every frame is
//! delivered once, in the order frames began, whatever placement ran it.

pub mod rule;

pub use rule::{Evidence, Reason, Rule, RuleError, Switch, Switcher};

/// What a run that adapts did: its placements, the frames each ran, and every switch with
/// its evidence.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Adaptation {
    /// The placements' names, in order of preference.
    pub placements: Vec<String>,
    /// Frames delivered per placement (those that began on it), processed or partial.
    pub frames: Vec<u64>,
    /// The latency budget the rule judged against, ms.
    pub budget_ms: f64,
    /// Past this a frame counted as late for the rule, ms (a share of the budget).
    pub trigger_ms: f64,
    /// Frames per judgement.
    pub window: u32,
    /// Frames that found no free slot on the running placement and ran on another one
    /// instead of being dropped.
    pub spilled_frames: u64,
    /// Every switch, in order.
    pub switches: Vec<Switch>,
}

impl Adaptation {
    /// The name of placement `index`, or `?`.
    pub fn name(&self, index: usize) -> &str {
        self.placements.get(index).map_or("?", String::as_str)
    }
}

impl std::fmt::Display for Adaptation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ran: Vec<String> = self
            .placements
            .iter()
            .zip(&self.frames)
            .map(|(p, n)| format!("{p} {n}"))
            .collect();
        writeln!(
            f,
            "adapted: {} switch{} against a {:.3} ms budget (late past {:.3} ms); frames per placement: {}; {} spilled to another placement for want of a slot",
            self.switches.len(),
            if self.switches.len() == 1 { "" } else { "es" },
            self.budget_ms,
            self.trigger_ms,
            ran.join(", "),
            self.spilled_frames
        )?;
        for s in &self.switches {
            let e = &s.evidence;
            writeln!(
                f,
                "  {:8.3} s  {} -> {} ({}): {}/{} frames late, worst {:.3} ms, slots {:.0}% used, {} without a slot, after {:.2} s (hold {:.2} s)",
                s.at_s,
                self.name(s.from),
                self.name(s.to),
                s.reason.name(),
                e.late,
                e.frames,
                e.worst_ms,
                e.occupancy * 100.0,
                e.slot_misses,
                e.ran_s,
                e.hold_s
            )?;
        }
        Ok(())
    }
}

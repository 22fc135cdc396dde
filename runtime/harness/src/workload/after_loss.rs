//! Frames that follow a loss, judged as the stream the run saw: with a stateful stage, a lost
//! frame is filled (zeros, or a fresh carry, as the kernel's rule says), so the frames after it
//! in the same cycle of the recording differ from a reference computed without the loss.
//!
//! [`Losses`] follows the frames as they reach the judge (in the order they began, as the
//! collector delivers them): which were lost (partial, or never begun: dropped for want of a
//! slot, never sent) in the current cycle of the recording. A frame that differs from the
//! reference after a loss in its cycle is kept ([`Losses::defer`]) rather than failed, and
//! [`Losses::recheck`] replays each such cycle on the [`Replay`]'s placement with the same
//! frames lost, and judges the kept frames against that.
//!
//! Guarantees: what is kept is bounded ([`RECHECK_BUDGET_BYTES`] of frames, the lost ids of the
//! cycles that kept one); a frame past the budget, or in a cycle whose frames did not begin in
//! increasing order (the stream restarted), is not re-judged and fails, saying why. A run that
//! loses nothing keeps nothing and replays nothing.

use std::sync::Arc;

use super::reference::{Replay, replay_outputs};

/// Bytes of frames kept to be judged again at most.
pub const RECHECK_BUDGET_BYTES: u64 = 256 << 20;

/// Lost ids listed in a verdict at most.
pub const FIRST_LOST: usize = 8;

/// A frame kept to be judged again.
#[derive(Debug)]
pub struct Kept {
    /// Its id.
    pub frame: u64,
    /// Its sinks, as the run computed them.
    pub sinks: Vec<Vec<u8>>,
}

/// The frames kept in one cycle, and the ids lost in it before the last of them.
#[derive(Debug)]
struct Cycle {
    index: u64,
    lost: Vec<u64>,
    kept: Vec<Kept>,
}

/// Why a kept frame could not be judged again: it then fails.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotRejudged {
    /// More frames than [`RECHECK_BUDGET_BYTES`] followed losses and differed.
    Budget,
    /// The cycle's frames did not begin in increasing order.
    Disordered,
    /// The replay failed, for this reason.
    Replay(String),
}

/// What the judge learns of the run's losses as frames arrive.
#[derive(Debug)]
pub struct Losses {
    /// Frames per cycle of the recording.
    period: u64,
    /// The id after the last frame that arrived.
    next: u64,
    /// The cycle of the last frame that arrived.
    cycle: u64,
    /// The ids lost in that cycle, increasing.
    lost_here: Vec<u64>,
    /// Whether a frame of that cycle arrived out of order.
    disordered: bool,
    /// Ids lost in the whole run, and the first few.
    lost: u64,
    first_lost: Vec<u64>,
    /// The cycles with frames kept, in order.
    cycles: Vec<Cycle>,
    kept_bytes: u64,
    /// Frames that differed after a loss but could not be kept.
    unkept: u64,
}

impl Losses {
    /// Nothing lost yet, in a stream cycling through `period` recording frames.
    pub fn new(period: u64) -> Self {
        Losses {
            period: period.max(1),
            next: 0,
            cycle: 0,
            lost_here: Vec::new(),
            disordered: false,
            lost: 0,
            first_lost: Vec::new(),
            cycles: Vec::new(),
            kept_bytes: 0,
            unkept: 0,
        }
    }

    /// Frame `id` arrived, `complete` or partial (lost). Frames between the last one and it
    /// never began: lost.
    pub fn arrived(&mut self, id: u64, complete: bool) {
        let cycle = id / self.period;
        if cycle != self.cycle {
            self.cycle = cycle;
            self.lost_here.clear();
            self.disordered = false;
        }
        if id < self.next {
            self.disordered = true;
        } else {
            for missing in self.next.max(cycle * self.period)..id {
                self.lost_here.push(missing);
            }
            for missing in self.next..id {
                self.note_lost(missing);
            }
            self.next = id + 1;
        }
        if !complete {
            self.lost_here.push(id);
            self.note_lost(id);
        }
    }

    fn note_lost(&mut self, id: u64) {
        self.lost += 1;
        if self.first_lost.len() < FIRST_LOST {
            self.first_lost.push(id);
        }
    }

    /// Whether a frame lost earlier in the current cycle may have changed the frame that just
    /// arrived: if it differs from the reference, it is to be kept and judged again.
    pub fn after_loss(&self) -> bool {
        !self.lost_here.is_empty() || self.disordered
    }

    /// Keeps frame `frame`, which arrived last and differed from the reference after a loss,
    /// to be judged again; `false` when the budget is spent (it then fails as it is).
    pub fn defer(&mut self, frame: u64, sinks: Vec<Vec<u8>>) -> bool {
        let bytes: u64 = sinks.iter().map(|s| s.len() as u64).sum();
        let ids = (self.lost_here.len() * std::mem::size_of::<u64>()) as u64;
        if self.kept_bytes + bytes + ids > RECHECK_BUDGET_BYTES {
            self.unkept += 1;
            return false;
        }
        self.kept_bytes += bytes;
        let kept = Kept { frame, sinks };
        let disordered = self.disordered;
        match self.cycles.last_mut() {
            Some(c) if c.index == self.cycle => {
                // The lost list only grows within a cycle.
                self.kept_bytes += ((self.lost_here.len() - c.lost.len()) * 8) as u64;
                c.lost.clone_from(&self.lost_here);
                c.kept.push(kept);
            }
            _ => {
                self.kept_bytes += ids;
                self.cycles.push(Cycle {
                    index: self.cycle,
                    lost: self.lost_here.clone(),
                    kept: vec![kept],
                });
            }
        }
        if disordered && let Some(c) = self.cycles.last_mut() {
            // An id of no frame: marks the cycle as one the replay cannot follow.
            c.lost.push(u64::MAX);
        }
        true
    }

    /// Frames lost in the run so far (partial, or never begun before a later one arrived),
    /// and the first few.
    pub fn lost(&self) -> (u64, &[u64]) {
        (self.lost, &self.first_lost)
    }

    /// Frames kept to be judged again.
    pub fn kept(&self) -> usize {
        self.cycles.iter().map(|c| c.kept.len()).sum()
    }

    /// Frames that differed after a loss past the budget, judged failed as they were.
    pub fn unkept(&self) -> u64 {
        self.unkept
    }

    /// Replays each cycle that kept frames on `replay`'s placement, from the cycle's first
    /// frame to its last kept one, the run's lost frames left out, and calls `judge` with each
    /// kept frame and the replay's sinks for it (or why there are none).
    pub fn recheck(
        self,
        replay: &Replay,
        frames: &Arc<[Vec<u8>]>,
        judge: &mut dyn FnMut(Kept, Result<Vec<Vec<u8>>, NotRejudged>),
    ) {
        for cycle in self.cycles {
            if cycle.lost.last() == Some(&u64::MAX) {
                for kept in cycle.kept {
                    judge(kept, Err(NotRejudged::Disordered));
                }
                continue;
            }
            let start = cycle.index * self.period;
            let end = cycle.kept.last().map_or(start, |k| k.frame + 1);
            let mut lost = cycle.lost.iter().peekable();
            let ids: Vec<u64> = (start..end)
                .filter(|id| {
                    while lost.next_if(|&&l| l < *id).is_some() {}
                    lost.peek() != Some(&id)
                })
                .collect();
            let wanted: Vec<u64> = cycle.kept.iter().map(|k| k.frame).collect();
            match replay_outputs(replay, frames, ids, &wanted) {
                Ok(outputs) if outputs.len() == wanted.len() => {
                    for (kept, want) in cycle.kept.into_iter().zip(outputs) {
                        judge(kept, Ok(want));
                    }
                }
                Ok(outputs) => {
                    let why = format!(
                        "the replay gave {} of the {} frames asked for",
                        outputs.len(),
                        wanted.len()
                    );
                    for kept in cycle.kept {
                        judge(kept, Err(NotRejudged::Replay(why.clone())));
                    }
                }
                Err(e) => {
                    let why = e.to_string();
                    for kept in cycle.kept {
                        judge(kept, Err(NotRejudged::Replay(why.clone())));
                    }
                }
            }
        }
    }

    /// The ids each cycle that kept frames replays, for the tests: `(first, lost, last kept)`.
    #[cfg(test)]
    fn plan(&self) -> Vec<(u64, Vec<u64>, u64)> {
        self.cycles
            .iter()
            .map(|c| {
                (
                    c.index * self.period,
                    c.lost.clone(),
                    c.kept.last().map_or(0, |k| k.frame),
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_never_begun_and_partial_frames_are_lost_in_their_cycle() {
        let mut l = Losses::new(10);
        for id in [0, 1, 2] {
            l.arrived(id, true);
            assert!(!l.after_loss());
        }
        l.arrived(5, true); // 3 and 4 never began
        assert!(l.after_loss());
        assert!(l.defer(5, vec![vec![1, 2]]));
        l.arrived(6, false); // partial
        l.arrived(7, true);
        assert!(l.defer(7, vec![vec![3]]));
        // 8 to 11 never began: 8 and 9 are lost in the first cycle, 10 and 11 in the second,
        // which starts clean of the first's.
        l.arrived(12, true);
        assert!(l.after_loss(), "10 and 11 were lost in this cycle");
        assert!(l.defer(12, vec![]));
        l.arrived(13, true);
        assert_eq!(l.lost(), (7, &[3, 4, 6, 8, 9, 10, 11][..]));
        assert_eq!(l.kept(), 3);
        assert_eq!(
            l.plan(),
            vec![(0, vec![3, 4, 6], 7), (10, vec![10, 11], 12)]
        );
    }

    #[test]
    fn a_cycle_without_a_loss_keeps_nothing_and_the_budget_bounds_what_is_kept() {
        let mut l = Losses::new(4);
        for id in 0..100 {
            l.arrived(id, true);
            assert!(!l.after_loss());
        }
        assert_eq!(l.lost(), (0, &[][..]));
        let mut l = Losses::new(1_000_000);
        l.arrived(1, true);
        let big = vec![vec![0u8; (RECHECK_BUDGET_BYTES / 2) as usize]];
        assert!(l.defer(1, big.clone()));
        l.arrived(2, true);
        assert!(!l.defer(2, big), "past the budget");
        assert_eq!((l.kept(), l.unkept()), (1, 1));
    }

    #[test]
    fn frames_out_of_order_mark_their_cycle() {
        let mut l = Losses::new(10);
        l.arrived(0, true);
        l.arrived(2, true);
        l.arrived(1, true); // began after 2
        assert!(l.after_loss());
        assert!(l.defer(1, vec![]));
        assert_eq!(l.plan(), vec![(0, vec![1, u64::MAX], 1)]);
    }
}

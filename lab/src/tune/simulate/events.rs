//! The simulation's events, and their order in its queue: by time, then by order of scheduling.

use std::cmp::Ordering;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ev {
    /// The source may begin its next frame (replay).
    SourceFree,
    /// Frame `f` starts arriving (paced).
    Arrive(usize),
    /// Tile `t` of streamed stage `s` of frame `f` has its packets.
    TileReady(usize, usize, u32),
    /// Frame `f`'s last packet.
    Written(usize),
    /// A worker finished a task of stage `s` of frame `f`.
    TaskDone(usize, usize),
    /// Engine `e` finished the current operation of the stream of stage `s` of frame `f`.
    EngineDone(usize, usize, usize),
    /// Frame `f` is complete (after the fixed latency).
    Complete(usize),
    /// The collector handed frame `f` on.
    Collected(usize),
    /// A slot is free again.
    SlotFree,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Timed {
    pub(super) at: f64,
    pub(super) seq: u64,
    pub(super) ev: Ev,
}

impl PartialEq for Timed {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Timed {}
impl PartialOrd for Timed {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Timed {
    fn cmp(&self, other: &Self) -> Ordering {
        // A min-heap on time, then on order of scheduling.
        other.at.total_cmp(&self.at).then(other.seq.cmp(&self.seq))
    }
}

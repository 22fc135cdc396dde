//! The set of frame ids reported so far, in memory that does not grow with the run.
//!
//! Receivers report frames in order, or nearly: the set keeps a watermark below which every
//! id is present, and only the ids reported ahead of the first missing one. A run of any
//! length in order costs a few words; ids out of order cost an entry each until the gap
//! before them fills, at most [`AHEAD_MAX`] of them, after which an insert is refused. The
//! line each id was first reported on is kept while it is ahead, and for the last
//! [`RECENT_LINES`] ids passed below the watermark, so a duplicate can name it.

use std::collections::{BTreeMap, VecDeque};

/// Ids kept ahead of the first missing one at most.
pub const AHEAD_MAX: usize = 1 << 16;

/// Ids below the watermark whose first line is still remembered.
pub const RECENT_LINES: usize = 1024;

/// What [`SeenFrames::insert`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Insert {
    /// The id was new.
    New,
    /// The id was present already, first on this line if it is still remembered.
    Again(Option<usize>),
    /// The id is new, but [`AHEAD_MAX`] ids are already kept ahead of the first missing one:
    /// not inserted.
    TooFarAhead,
}

/// Frame ids seen: every id below a watermark, and the few seen beyond it.
#[derive(Clone, Debug)]
pub struct SeenFrames {
    /// Every id below this is present.
    below: u64,
    /// Present ids above `below` (never `below` itself), with their first line.
    ahead: BTreeMap<u64, usize>,
    /// The first lines of the ids most recently passed below the watermark.
    recent: VecDeque<(u64, usize)>,
}

impl SeenFrames {
    /// An empty set. It allocates here once; inserting ids in order never allocates again.
    pub fn new() -> Self {
        Self {
            below: 0,
            ahead: BTreeMap::new(),
            recent: VecDeque::with_capacity(RECENT_LINES),
        }
    }

    /// Adds `id`, first seen on `line` (any number, for callers without lines).
    pub fn insert(&mut self, id: u64, line: usize) -> Insert {
        if id < self.below {
            let first = self.recent.iter().find(|(i, _)| *i == id).map(|&(_, l)| l);
            return Insert::Again(first);
        }
        if let Some(&first) = self.ahead.get(&id) {
            return Insert::Again(Some(first));
        }
        if id > self.below {
            if self.ahead.len() >= AHEAD_MAX {
                return Insert::TooFarAhead;
            }
            self.ahead.insert(id, line);
            return Insert::New;
        }
        self.pass(id, line);
        while let Some(line) = self.ahead.remove(&self.below) {
            self.pass(self.below, line);
        }
        Insert::New
    }

    /// Moves the watermark past `id` (== `below`), remembering its line.
    fn pass(&mut self, id: u64, line: usize) {
        if self.recent.len() == RECENT_LINES {
            self.recent.pop_front();
        }
        self.recent.push_back((id, line));
        self.below = id + 1;
    }

    /// Whether `id` is present.
    pub fn contains(&self, id: u64) -> bool {
        id < self.below || self.ahead.contains_key(&id)
    }

    /// Ids present below `end`.
    pub fn count_below(&self, end: u64) -> u64 {
        self.below.min(end) + self.ahead.range(..end).count() as u64
    }

    /// The first `n` ids below `end` that are absent, in order.
    pub fn first_missing(&self, end: u64, n: usize) -> Vec<u64> {
        let mut out = Vec::with_capacity(n);
        let mut id = self.below;
        for &present in self.ahead.keys() {
            while id < present && id < end && out.len() < n {
                out.push(id);
                id += 1;
            }
            if id >= end || out.len() == n {
                return out;
            }
            id = present + 1;
        }
        while id < end && out.len() < n {
            out.push(id);
            id += 1;
        }
        out
    }

    /// Ids kept ahead of the watermark: what the set holds beyond a few words.
    pub fn ahead(&self) -> usize {
        self.ahead.len()
    }
}

impl Default for SeenFrames {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_run_in_order_keeps_nothing_ahead() {
        let mut s = SeenFrames::new();
        for id in 0..1_000_000 {
            assert_eq!(s.insert(id, id as usize + 2), Insert::New);
        }
        assert_eq!((s.ahead(), s.count_below(u64::MAX)), (0, 1_000_000));
        assert_eq!(s.insert(999_999, 0), Insert::Again(Some(1_000_001)));
        assert_eq!(
            s.insert(5, 0),
            Insert::Again(None),
            "too old to name its line"
        );
        assert_eq!(
            s.first_missing(1_000_003, 8),
            vec![1_000_000, 1_000_001, 1_000_002]
        );
    }

    #[test]
    fn ids_far_ahead_are_bounded() {
        let mut s = SeenFrames::new();
        for k in 0..AHEAD_MAX as u64 {
            assert_eq!(s.insert(2 + 2 * k, 0), Insert::New);
        }
        assert_eq!(s.insert(1_000_000_000, 0), Insert::TooFarAhead);
        assert!(!s.contains(1_000_000_000));
        // Filling the gaps, in order, brings the watermark past them all.
        assert_eq!(s.insert(0, 0), Insert::New);
        for k in 0..=AHEAD_MAX as u64 {
            assert_eq!(s.insert(2 * k + 1, 0), Insert::New);
        }
        assert_eq!(s.ahead(), 0);
        assert_eq!(s.count_below(u64::MAX), 2 * AHEAD_MAX as u64 + 2);
    }

    proptest! {
        /// Against a plain set: membership, counts, the first missing ids, and duplicates.
        #[test]
        fn it_is_the_set_of_ids_inserted(ids in proptest::collection::vec(0..200u64, 0..400)) {
            let mut s = SeenFrames::new();
            let mut plain = BTreeSet::new();
            for (line, &id) in ids.iter().enumerate() {
                let got = s.insert(id, line);
                prop_assert_eq!(matches!(got, Insert::New), plain.insert(id));
            }
            for id in 0..210 {
                prop_assert_eq!(s.contains(id), plain.contains(&id));
            }
            for end in [0, 1, 50, 199, 200, 300] {
                prop_assert_eq!(s.count_below(end), plain.range(..end).count() as u64);
                let missing: Vec<u64> = (0..end).filter(|i| !plain.contains(i)).take(8).collect();
                prop_assert_eq!(s.first_missing(end, 8), missing);
            }
        }
    }
}

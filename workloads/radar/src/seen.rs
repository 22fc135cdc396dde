//! The set of frame ids reported so far, in memory that does not grow with the run.
//!
//! A window of [`WINDOW`] ids, from [`SeenFrames::base`] up to the newest id inserted, is kept
//! exactly, one bit per id; every id below the window is *settled*: it was reported, or it is
//! counted as missing (the count, and the first [`MISSING_KEPT`] such ids). An id beyond the
//! window slides it, settling the ids it passes word by word, so a run of any length with any
//! loss pattern costs the same few tens of KiB and no allocation per id.
//!
//! What it guarantees: within the window, membership and duplicates are exact; the count of
//! ids present and the first missing ones below any `end` at or above the base are exact. An id
//! below the window ([`Insert::TooLate`]) came [`WINDOW`] or more ids after a newer one: it
//! can no longer be told from a duplicate, and callers refuse it. The line each id was first
//! reported on is kept for the last [`RECENT_LINES`] ids inserted, so a duplicate can name it.

/// Ids the window holds exactly, up to the newest: an id may be reported fewer than this many
/// ids after a newer one.
pub const WINDOW: u64 = 1 << 16;

/// Ids whose first line is still remembered: the last ones inserted.
pub const RECENT_LINES: usize = 1024;

/// Settled missing ids kept by value, the first ones: [`SeenFrames::first_missing`] lists at
/// least this many when there are as many.
pub const MISSING_KEPT: usize = 16;

const WORDS: usize = (WINDOW / 64) as usize;

/// What [`SeenFrames::insert`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Insert {
    /// The id was new.
    New,
    /// The id was present already, first on this line if it is still remembered.
    Again(Option<usize>),
    /// The id is below the window: it came [`WINDOW`] or more ids after `newest`, the newest
    /// id inserted, and can no longer be told from a duplicate. Not inserted.
    TooLate {
        /// The newest id inserted.
        newest: u64,
    },
}

/// Frame ids seen: a window of ids kept exactly, and the settled ids below it counted.
#[derive(Clone, Debug)]
pub struct SeenFrames {
    /// Every id below this is settled; ids `base..base + WINDOW` are kept in `bits`.
    base: u64,
    /// Bit `id % 64` of word `(id / 64) % WORDS` is set when `id` (in the window) is present.
    bits: Box<[u64]>,
    /// The newest id inserted, if any: always in the window.
    newest: Option<u64>,
    /// Settled ids that were never inserted.
    settled_missing: u64,
    /// The first of them, ascending; `missing_kept` are valid.
    missing: [u64; MISSING_KEPT],
    missing_kept: usize,
    /// `(id, line)` of the last inserts, a ring written at `recent_next`.
    recent: Box<[(u64, usize)]>,
    recent_next: usize,
    recent_len: usize,
}

impl SeenFrames {
    /// An empty set. It allocates here once and never again.
    pub fn new() -> Self {
        Self {
            base: 0,
            bits: vec![0; WORDS].into_boxed_slice(),
            newest: None,
            settled_missing: 0,
            missing: [0; MISSING_KEPT],
            missing_kept: 0,
            recent: vec![(0, 0); RECENT_LINES].into_boxed_slice(),
            recent_next: 0,
            recent_len: 0,
        }
    }

    /// Adds `id`, first seen on `line` (any number, for callers without lines).
    pub fn insert(&mut self, id: u64, line: usize) -> Insert {
        if id < self.base {
            return Insert::TooLate {
                // Something was inserted: the base only moves for a newer id.
                newest: self.newest.unwrap_or(self.base),
            };
        }
        if id - self.base >= WINDOW {
            self.slide_to(id - (WINDOW - 1));
        }
        let (word, bit) = slot(id);
        if self.bits[word] & bit != 0 {
            let first = self.recent[..self.recent_len]
                .iter()
                .find(|(i, _)| *i == id)
                .map(|&(_, l)| l);
            return Insert::Again(first);
        }
        self.bits[word] |= bit;
        self.newest = Some(self.newest.map_or(id, |n| n.max(id)));
        self.recent[self.recent_next] = (id, line);
        self.recent_next = (self.recent_next + 1) % RECENT_LINES;
        self.recent_len = (self.recent_len + 1).min(RECENT_LINES);
        Insert::New
    }

    /// Settles every id below `new_base` (> `base`) and moves the window there.
    fn slide_to(&mut self, new_base: u64) {
        // The window's ids below the new base, at most the whole window; every id beyond the
        // window was never inserted.
        let in_window_end = new_base.min(self.window_end());
        self.settle_window(self.base, in_window_end);
        let beyond = new_base - in_window_end;
        if beyond > 0 {
            self.settled_missing += beyond;
            let keep = (MISSING_KEPT - self.missing_kept)
                .min(usize::try_from(beyond).unwrap_or(usize::MAX));
            for k in 0..keep {
                self.missing[self.missing_kept] = in_window_end + k as u64;
                self.missing_kept += 1;
            }
        }
        self.base = new_base;
    }

    /// Settles window ids `from..to` (within the window): counts and keeps the absent ones and
    /// clears their bits for the ids that will take their places.
    fn settle_window(&mut self, from: u64, to: u64) {
        let mut id = from;
        while id < to {
            let (word, _) = slot(id);
            let offset = id % 64;
            let span = (64 - offset).min(to - id);
            let mask = span_mask(offset, span);
            let absent = !self.bits[word] & mask;
            self.settled_missing += u64::from(absent.count_ones());
            let mut rest = absent;
            while rest != 0 && self.missing_kept < MISSING_KEPT {
                self.missing[self.missing_kept] = id - offset + u64::from(rest.trailing_zeros());
                self.missing_kept += 1;
                rest &= rest - 1;
            }
            self.bits[word] &= !mask;
            id += span;
        }
    }

    /// Whether `id` is present: always known from the base on; below it, only where the
    /// settled ids allow (a kept missing id, or none missing beyond those kept), else `None`.
    pub fn contains(&self, id: u64) -> Option<bool> {
        if id >= self.base {
            if id - self.base >= WINDOW {
                return Some(false);
            }
            let (word, bit) = slot(id);
            return Some(self.bits[word] & bit != 0);
        }
        if self.missing[..self.missing_kept].contains(&id) {
            Some(false)
        } else if self.settled_missing == self.missing_kept as u64 {
            Some(true)
        } else {
            None
        }
    }

    /// The first id of the window: every id below it is settled.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// The end of the window: ids from it on were never inserted. Saturates at `u64::MAX`,
    /// which no range below an `end` holds.
    fn window_end(&self) -> u64 {
        self.base.saturating_add(WINDOW)
    }

    /// The newest (greatest) id inserted, if any.
    pub fn newest(&self) -> Option<u64> {
        self.newest
    }

    /// Ids present below `end`.
    ///
    /// Exact for `end >= base()`, which holds for any `end` above every id inserted (ids
    /// below the base are settled into a count, not kept one by one); below the base it
    /// answers for `base()` (a debug build panics).
    pub fn count_below(&self, end: u64) -> u64 {
        debug_assert!(end >= self.base, "end {end} below the base {}", self.base);
        let end = end.max(self.base);
        let window_end = end.min(self.window_end());
        let mut present = 0;
        let mut id = self.base;
        while id < window_end {
            let (word, _) = slot(id);
            let offset = id % 64;
            let span = (64 - offset).min(window_end - id);
            present += u64::from((self.bits[word] & span_mask(offset, span)).count_ones());
            id += span;
        }
        self.base - self.settled_missing + present
    }

    /// The first `n` ids below `end` that are absent, in order.
    ///
    /// Exact for `end >= base()` (see [`count_below`](Self::count_below)) and `n` up to
    /// [`MISSING_KEPT`]; a longer list stops at the last settled id kept when more were
    /// settled missing, so it is always the start of the true list.
    pub fn first_missing(&self, end: u64, n: usize) -> Vec<u64> {
        debug_assert!(end >= self.base, "end {end} below the base {}", self.base);
        let mut out: Vec<u64> = self.missing[..self.missing_kept]
            .iter()
            .copied()
            .filter(|&id| id < end)
            .take(n)
            .collect();
        if out.len() == n || self.settled_missing > self.missing_kept as u64 {
            return out;
        }
        let window_end = end.min(self.window_end());
        let mut id = self.base;
        while id < window_end && out.len() < n {
            let (word, _) = slot(id);
            let offset = id % 64;
            let span = (64 - offset).min(window_end - id);
            let mut absent = !self.bits[word] & span_mask(offset, span);
            while absent != 0 && out.len() < n {
                out.push(id - offset + u64::from(absent.trailing_zeros()));
                absent &= absent - 1;
            }
            id += span;
        }
        // Beyond the window nothing was inserted.
        let mut id = window_end.max(self.window_end());
        while id < end && out.len() < n {
            out.push(id);
            id += 1;
        }
        out
    }

    /// Bytes the set holds on the heap: the same from [`new`](Self::new) on, whatever is
    /// inserted.
    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.bits) + std::mem::size_of_val(&*self.recent)
    }
}

impl Default for SeenFrames {
    fn default() -> Self {
        Self::new()
    }
}

/// The word of the window holding `id`, and its bit there.
fn slot(id: u64) -> (usize, u64) {
    (((id / 64) % WORDS as u64) as usize, 1 << (id % 64))
}

/// `span` (1 to 64) bits from bit `offset`, with `offset + span <= 64`.
fn span_mask(offset: u64, span: u64) -> u64 {
    let ones = if span == 64 {
        u64::MAX
    } else {
        (1 << span) - 1
    };
    ones << offset
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use proptest::prelude::*;
    use rand::{Rng, SeedableRng};

    use super::*;

    #[test]
    fn a_run_in_order_keeps_its_window_and_names_recent_lines() {
        let mut s = SeenFrames::new();
        for id in 0..1_000_000 {
            assert_eq!(s.insert(id, id as usize + 2), Insert::New);
        }
        assert_eq!(s.count_below(u64::MAX), 1_000_000);
        assert_eq!(s.insert(999_999, 0), Insert::Again(Some(1_000_001)));
        assert_eq!(
            s.insert(990_000, 0),
            Insert::Again(None),
            "in the window, but too old to name its line"
        );
        assert_eq!(
            s.insert(5, 0),
            Insert::TooLate { newest: 999_999 },
            "below the window: cannot be told from a duplicate"
        );
        assert_eq!(
            s.first_missing(1_000_003, 8),
            vec![1_000_000, 1_000_001, 1_000_002]
        );
    }

    /// The case: a lost frame is a gap that never fills; every id after it still
    /// counts, and the gap is the one id missing.
    #[test]
    fn one_lost_frame_in_a_long_run_is_one_missing_frame() {
        let mut s = SeenFrames::new();
        let heap = s.heap_bytes();
        for id in (0..70_000).filter(|&id| id != 5) {
            assert_eq!(s.insert(id, 0), Insert::New, "id {id}");
        }
        assert_eq!(s.count_below(70_000), 69_999);
        assert_eq!(s.first_missing(70_000, 8), vec![5]);
        for id in 70_000..1_000_000 {
            assert_eq!(s.insert(id, 0), Insert::New, "id {id}");
            assert_eq!(s.heap_bytes(), heap, "after id {id}");
        }
        assert_eq!(s.count_below(1_000_000), 999_999);
        assert_eq!(s.first_missing(1_000_002, 8), vec![5, 1_000_000, 1_000_001]);
        assert_eq!(s.contains(5), Some(false));
        assert_eq!(s.contains(6), Some(true));
    }

    #[test]
    fn memory_is_constant_whatever_the_loss_pattern() {
        let mut s = SeenFrames::new();
        let heap = s.heap_bytes();
        assert!(heap <= 32 * 1024, "{heap} bytes");
        // Every other id lost, then huge jumps: nothing is allocated per id or per gap.
        for id in (0..1_000_000).step_by(2) {
            s.insert(id, 0);
        }
        for k in 1..=1000u64 {
            s.insert(k << 40, 0);
        }
        assert_eq!(s.heap_bytes(), heap);
        assert_eq!(s.count_below(u64::MAX), 500_000 + 1000);
        assert_eq!(s.first_missing(u64::MAX, 4), vec![1, 3, 5, 7]);
    }

    #[test]
    fn a_huge_jump_settles_every_id_it_passes() {
        let mut s = SeenFrames::new();
        for id in [0, 1, 3] {
            s.insert(id, 0);
        }
        let far = 1u64 << 40;
        assert_eq!(s.insert(far, 7), Insert::New);
        assert_eq!(s.base(), far - WINDOW + 1);
        assert_eq!(s.count_below(far + 1), 4);
        assert_eq!(s.count_below(far), 3);
        assert_eq!(s.first_missing(far + 3, 4), vec![2, 4, 5, 6]);
        assert_eq!(s.insert(3, 0), Insert::TooLate { newest: far });
        assert_eq!(s.insert(far, 0), Insert::Again(Some(7)));
        // The window's oldest id is still exact.
        assert_eq!(s.insert(far - WINDOW + 1, 0), Insert::New);
        assert_eq!(s.count_below(far + 1), 5);
        // And at the top of the id space.
        assert_eq!(s.insert(u64::MAX, 0), Insert::New);
        assert_eq!(s.insert(u64::MAX - 1, 0), Insert::New);
        assert_eq!(s.base(), u64::MAX - WINDOW + 1);
        assert_eq!(s.count_below(u64::MAX), 6);
        assert_eq!(s.contains(u64::MAX), Some(true));
        assert_eq!(s.insert(u64::MAX, 0), Insert::Again(Some(0)));
    }

    /// The rule the set follows, kept plainly: every id, the newest, and the order of inserts.
    #[derive(Default)]
    struct Model {
        present: BTreeSet<u64>,
        /// Each id's insert ordinal and line.
        first: BTreeMap<u64, (usize, usize)>,
        inserted: usize,
        newest: Option<u64>,
    }

    impl Model {
        fn base(&self) -> u64 {
            self.newest.map_or(0, |n| (n + 1).saturating_sub(WINDOW))
        }

        fn insert(&mut self, id: u64, line: usize) -> Insert {
            if id < self.base() {
                return Insert::TooLate {
                    newest: self.newest.unwrap_or_default(),
                };
            }
            if let Some(&(ordinal, first_line)) = self.first.get(&id) {
                let recent = self.inserted - ordinal <= RECENT_LINES;
                return Insert::Again(recent.then_some(first_line));
            }
            self.present.insert(id);
            self.first.insert(id, (self.inserted, line));
            self.inserted += 1;
            self.newest = Some(self.newest.map_or(id, |n| n.max(id)));
            Insert::New
        }

        fn first_missing(&self, end: u64, n: usize) -> Vec<u64> {
            let mut out = Vec::new();
            let mut next = 0u64;
            for &id in self.present.range(..end) {
                while next < id && out.len() < n {
                    out.push(next);
                    next += 1;
                }
                next = id + 1;
            }
            while next < end && out.len() < n {
                out.push(next);
                next += 1;
            }
            out
        }
    }

    /// Compares everything the set answers with the model's.
    fn same_answers(s: &SeenFrames, m: &Model, every: usize) -> Result<(), TestCaseError> {
        let base = m.base();
        prop_assert_eq!(s.base(), base);
        prop_assert_eq!(s.newest(), m.newest);
        let newest = m.newest.unwrap_or_default();
        for end in [
            base,
            base + 1,
            base + WINDOW / 2,
            newest,
            newest + 1,
            newest + 70,
            base.saturating_add(WINDOW + 100),
            u64::MAX,
        ] {
            if end < base {
                continue;
            }
            prop_assert_eq!(
                s.count_below(end),
                m.present.range(..end).count() as u64,
                "end {}",
                end
            );
            for n in [1, 3, MISSING_KEPT] {
                prop_assert_eq!(
                    s.first_missing(end, n),
                    m.first_missing(end, n),
                    "end {}, n {}",
                    end,
                    n
                );
            }
        }
        for id in (base..base.saturating_add(WINDOW + 3)).step_by(every) {
            prop_assert_eq!(s.contains(id), Some(m.present.contains(&id)), "id {}", id);
        }
        for id in (base.saturating_sub(WINDOW)..base).step_by(every) {
            if let Some(present) = s.contains(id) {
                prop_assert_eq!(present, m.present.contains(&id), "settled id {}", id);
            }
        }
        Ok(())
    }

    /// A stream of reports: ids `0..len`, shifted at each jump, with some lost, some arriving
    /// late (up to two windows late) instead, bounded local reordering, and duplicates, near
    /// and far.
    #[derive(Clone, Debug)]
    struct Stream {
        len: u64,
        lost_per_mille: u32,
        late_per_mille: u32,
        reorder: u64,
        duplicate_per_mille: u32,
        jumps: Vec<(u64, u64)>,
        seed: u64,
    }

    fn stream() -> impl Strategy<Value = Stream> {
        let jump = prop_oneof![
            Just(WINDOW - 1),
            Just(WINDOW),
            Just(WINDOW + 1),
            1..3 * WINDOW,
            Just(1u64 << 40),
        ];
        (
            1..300_000u64,
            0..40u32,
            0..10u32,
            0..200u64,
            0..20u32,
            proptest::collection::vec((0..300_000u64, jump), 0..3),
            any::<u64>(),
        )
            .prop_map(
                |(len, lost, late, reorder, duplicate, jumps, seed)| Stream {
                    len,
                    lost_per_mille: lost,
                    late_per_mille: late,
                    reorder,
                    duplicate_per_mille: duplicate,
                    jumps,
                    seed,
                },
            )
    }

    impl Stream {
        fn ids(&self) -> Vec<u64> {
            let mut rng = rand_pcg::Pcg64::seed_from_u64(self.seed);
            let mut events: Vec<(u64, u64)> = Vec::new();
            let mut shift = 0;
            for i in 0..self.len {
                shift += self
                    .jumps
                    .iter()
                    .filter(|&&(at, _)| at == i)
                    .map(|&(_, by)| by)
                    .sum::<u64>();
                let id = i + shift;
                let at = i * 16;
                let roll = rng.random_range(0..1000);
                if roll < self.lost_per_mille {
                    continue;
                }
                let key = if roll < self.lost_per_mille + self.late_per_mille {
                    at + rng.random_range(0..2 * WINDOW) * 16
                } else {
                    at + rng.random_range(0..=self.reorder * 16)
                };
                events.push((key, id));
                if rng.random_range(0..1000) < self.duplicate_per_mille {
                    let after = if rng.random_bool(0.8) {
                        rng.random_range(0..100)
                    } else {
                        rng.random_range(0..2 * WINDOW)
                    };
                    events.push((key + 1 + after * 16, id));
                }
            }
            events.sort_by_key(|&(key, _)| key);
            events.into_iter().map(|(_, id)| id).collect()
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// Against a plain set under the window's rule: every insert's outcome (duplicates
        /// with their first line, `TooLate` only below the window), membership in the window,
        /// and the count and first ids missing below any end from the base on.
        #[test]
        fn long_streams_with_gaps_match_a_plain_set(stream in stream()) {
            let mut s = SeenFrames::new();
            let heap = s.heap_bytes();
            let mut m = Model::default();
            let ids = stream.ids();
            for (line, &id) in ids.iter().enumerate() {
                let base = m.base();
                let want = m.insert(id, line);
                prop_assert_eq!(s.insert(id, line), want, "report {} of id {}", line, id);
                prop_assert_eq!(matches!(want, Insert::TooLate { .. }), id < base);
                if line % 50_000 == 49_999 {
                    same_answers(&s, &m, 97)?;
                }
            }
            same_answers(&s, &m, 1)?;
            prop_assert_eq!(s.heap_bytes(), heap);
        }

        /// Small ids, any order: the window is never passed, so the set is exactly the ids
        /// inserted.
        #[test]
        fn it_is_the_set_of_ids_inserted(ids in proptest::collection::vec(0..200u64, 0..400)) {
            let mut s = SeenFrames::new();
            let mut plain = BTreeSet::new();
            for (line, &id) in ids.iter().enumerate() {
                let got = s.insert(id, line);
                prop_assert_eq!(matches!(got, Insert::New), plain.insert(id));
            }
            for id in 0..210 {
                prop_assert_eq!(s.contains(id), Some(plain.contains(&id)));
            }
            for end in [0, 1, 50, 199, 200, 300] {
                prop_assert_eq!(s.count_below(end), plain.range(..end).count() as u64);
                let missing: Vec<u64> = (0..end).filter(|i| !plain.contains(i)).take(8).collect();
                prop_assert_eq!(s.first_missing(end, 8), missing);
            }
        }
    }
}

//! Stateful stages: one frame at a time, in the order frames began, each seeing the carry the
//! frame before it left, whichever placement ran it.
//!
//! A stateful kernel keeps what it carries from frame to frame (a filter's history, an
//! oscillator's phase) in one carry per stage, which the runtime owns. Its launches must
//! therefore not overlap, and must come in stream order, while frames run concurrently in
//! their slots. A [`Turnstile`] per stateful stage admits the stage of the frame numbered `s`
//! in the order frames began only once the stage of frame `s - 1` has ended, or will never run
//! because that frame ended partial ([`Turnstile::skip`]). Other stages of other frames go on
//! around it: only this stage serializes.
//!
//! A run that switches placements ([`super::run_adaptive`]) has one turnstile per stage for
//! all its lanes: frames are placed by lane and slot ([`At`]). Each lane keeps its own carry
//! (in its kernel's memory, `super::carry`); when the frame admitted runs in another lane
//! than the one before, the carry moves ([`Admission::from_lane`]). A GPU lane's launch lets
//! the next frame of its own lane in once it is enqueued (that frame's stream waits on its
//! event), but another lane's only once it has executed ([`Turnstile::executed`]), so the
//! carry it left is complete in host memory before anyone reads it.
//!
//! It also says what each admitted launch is told ([`Admission`]): the frames lost since the
//! carry's previous launch, counted by the source's frame numbers (a partial frame, one
//! dropped for want of a slot, one that never arrived), and whether the carry was zeroed
//! first: at the stream's first frame, when the numbers go back (the sender restarted) or
//! cross into a new cycle of a recording replayed in cycles (the stream starts again), and
//! after a loss when the kernel asked for a reset. It counts each of them for the report.
//!
//! Guarantees: at most one launch of the stage is admitted at a time; frames are admitted in
//! increasing sequence, each at most once; a frame whose stage is ready is admitted as soon as
//! every earlier frame's stage has ended or been skipped (and, in another lane than a GPU
//! launch before it, once that launch has executed). Each call takes one short lock and
//! allocates nothing.

use std::sync::Mutex;

use crate::measure::metrics::CarryCounts;
use crate::plan::PlannedCarry;

/// Where a frame runs: its lane and its slot there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct At {
    pub(crate) lane: usize,
    pub(crate) slot: usize,
}

/// What the frame in a slot is doing at this stage's gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// Nothing the gate knows of.
    Away,
    /// The stage's inputs are complete; it waits for its turn.
    Ready { sequence: u64, frame: u64 },
    /// The frame ended partial: the stage will not run for it.
    Skipped { sequence: u64 },
}

/// What an admitted launch is told about the carry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Admission {
    /// The frame's number, as the source gave it.
    pub(crate) frame: u64,
    /// Frames lost since the carry's previous launch; 0 when it was zeroed.
    pub(crate) frames_missing: u64,
    /// Whether the carry must be zeroed before the launch.
    pub(crate) fresh: bool,
    /// The slot of the frame admitted before, if it ran in the same lane: on a GPU, the
    /// launch's stream waits for that frame's stage to have run.
    pub(crate) after_slot: Option<usize>,
    /// The lane that ran the frame admitted before, if it is another and the carry is kept:
    /// the carry moves from that lane's memory before the launch.
    pub(crate) from_lane: Option<usize>,
}

struct Gate {
    /// The sequence whose turn it is.
    next: u64,
    /// Whether a launch is admitted and has not ended (or been enqueued).
    running: bool,
    /// Per lane, per slot.
    places: Vec<Vec<Place>>,
    /// The number of the frame last admitted, and where it ran.
    last_frame: Option<u64>,
    last_at: Option<At>,
    /// The GPU launch enqueued last, while no later launch has ended: its lane and sequence.
    on_device: Option<(usize, u64)>,
    /// Per lane: the latest sequence whose GPU launch has executed. It may be heard before
    /// the launch's enqueue is ([`Turnstile::done`]).
    executed: Vec<Option<u64>>,
    /// The sequence of the launch admitted last.
    current_sequence: u64,
    /// What the launch admitted last is told.
    current: Admission,
    counts: CarryCounts,
}

/// The gate of one stateful stage, for every lane of a run.
pub(crate) struct Turnstile {
    carry: PlannedCarry,
    /// Frames per cycle of a recording replayed in cycles.
    cycle: Option<u64>,
    gate: Mutex<Gate>,
}

impl Turnstile {
    /// A gate for a run whose lanes have `slots` slots each, before its first frame; with
    /// `cycle`, the stream starts again at every multiple of it.
    pub(crate) fn new(carry: PlannedCarry, slots: &[usize], cycle: Option<u64>) -> Turnstile {
        Turnstile {
            carry,
            cycle: cycle.filter(|&n| n > 0),
            gate: Mutex::new(Gate {
                next: 0,
                running: false,
                places: slots.iter().map(|&n| vec![Place::Away; n]).collect(),
                last_frame: None,
                last_at: None,
                on_device: None,
                executed: vec![None; slots.len()],
                current_sequence: 0,
                current: Admission::default(),
                counts: CarryCounts::default(),
            }),
        }
    }

    fn gate(&self) -> std::sync::MutexGuard<'_, Gate> {
        self.gate.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The stage of frame `sequence`, numbered `frame` by the source, at `at`, has its
    /// inputs. Returns where the stage runs now, if anywhere (here, when it is its turn).
    pub(crate) fn ready(&self, at: At, sequence: u64, frame: u64) -> Option<At> {
        let mut gate = self.gate();
        gate.places[at.lane][at.slot] = Place::Ready { sequence, frame };
        self.admit_next(&mut gate)
    }

    /// Frame `sequence` at `at` ended partial: its stage will not run. Returns where the
    /// stage runs now, if anywhere.
    pub(crate) fn skip(&self, at: At, sequence: u64) -> Option<At> {
        let mut gate = self.gate();
        gate.places[at.lane][at.slot] = Place::Skipped { sequence };
        self.admit_next(&mut gate)
    }

    /// The admitted launch ended or, `on_device`, was enqueued on a GPU stream, where it has
    /// yet to execute ([`executed`](Self::executed)). Returns where the stage runs next, if
    /// anywhere.
    pub(crate) fn done(&self, on_device: bool) -> Option<At> {
        let mut gate = self.gate();
        gate.running = false;
        gate.next += 1;
        gate.on_device = gate
            .last_at
            .filter(|_| on_device)
            .map(|at| (at.lane, gate.current_sequence));
        self.admit_next(&mut gate)
    }

    /// The GPU launch of frame `sequence` in `lane` has executed, and so has every earlier one
    /// of the lane (each waited for the one before). Returns where the stage runs next, if
    /// anywhere (a frame of another lane waits for this). Only a run of several lanes need
    /// call it: with one, nothing waits for it.
    pub(crate) fn executed(&self, lane: usize, sequence: u64) -> Option<At> {
        let mut gate = self.gate();
        let latest = &mut gate.executed[lane];
        *latest = Some(latest.map_or(sequence, |s| s.max(sequence)));
        self.admit_next(&mut gate)
    }

    /// What the admitted launch is told; zeroing or moving the carry, when it must, is the
    /// caller's.
    pub(crate) fn admitted(&self) -> Admission {
        self.gate().current
    }

    /// What happened to the carry so far.
    pub(crate) fn counts(&self) -> CarryCounts {
        self.gate().counts
    }

    /// Passes skipped frames whose turn it is, then admits the frame whose turn it is if its
    /// stage is ready, nothing runs and, in another lane than a GPU launch still on its
    /// device, that launch has executed; decides what its launch is told.
    fn admit_next(&self, gate: &mut Gate) -> Option<At> {
        if gate.running {
            return None;
        }
        loop {
            let next = gate.next;
            let found = gate.places.iter().enumerate().find_map(|(lane, places)| {
                let slot = places.iter().position(|p| match *p {
                    Place::Ready { sequence, .. } | Place::Skipped { sequence } => sequence == next,
                    Place::Away => false,
                })?;
                Some(At { lane, slot })
            })?;
            let place = gate.places[found.lane][found.slot];
            match place {
                Place::Ready { frame, .. } => {
                    let pending = |(lane, sequence): (usize, u64)| {
                        lane != found.lane && gate.executed[lane].is_none_or(|e| e < sequence)
                    };
                    if gate.on_device.is_some_and(pending) {
                        return None;
                    }
                    gate.places[found.lane][found.slot] = Place::Away;
                    gate.running = true;
                    gate.current_sequence = next;
                    let before = gate.last_at.replace(found);
                    let mut admission = self.admission(gate, frame);
                    admission.after_slot = before.filter(|b| b.lane == found.lane).map(|b| b.slot);
                    admission.from_lane = before
                        .filter(|b| b.lane != found.lane && !admission.fresh)
                        .map(|b| b.lane);
                    gate.counts.moves += u64::from(admission.from_lane.is_some());
                    gate.current = admission;
                    return Some(found);
                }
                _ => {
                    gate.places[found.lane][found.slot] = Place::Away;
                    gate.next += 1;
                }
            }
        }
    }

    /// What the launch of frame `frame` is told of its loss and zeroing, given the frame
    /// admitted before it; counts it.
    fn admission(&self, gate: &mut Gate, frame: u64) -> Admission {
        let counts = &mut gate.counts;
        counts.launches += 1;
        let fresh = |frame| Admission {
            frame,
            fresh: true,
            ..Admission::default()
        };
        let admission = match gate.last_frame {
            None => fresh(frame),
            Some(last) if frame <= last || self.cycle.is_some_and(|n| frame / n != last / n) => {
                counts.restarts += 1;
                fresh(frame)
            }
            Some(last) => {
                let missing = frame - last - 1;
                counts.frames_missing += missing;
                let reset = missing > 0 && self.carry.reset_on_gap;
                counts.resets += u64::from(reset);
                Admission {
                    frame,
                    frames_missing: if reset { 0 } else { missing },
                    fresh: reset,
                    ..Admission::default()
                }
            }
        };
        gate.last_frame = Some(frame);
        admission
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(reset_on_gap: bool, slots: usize) -> Turnstile {
        cycled(reset_on_gap, &[slots], None)
    }

    fn cycled(reset_on_gap: bool, slots: &[usize], cycle: Option<u64>) -> Turnstile {
        Turnstile::new(
            PlannedCarry {
                bytes: 64,
                reset_on_gap,
            },
            slots,
            cycle,
        )
    }

    /// Slot `slot` of the only lane.
    fn at(slot: usize) -> At {
        At { lane: 0, slot }
    }

    #[test]
    fn each_cycle_of_a_replayed_recording_starts_the_stream_again() {
        let t = cycled(false, &[1], Some(3));
        let mut told = Vec::new();
        for (sequence, frame) in [0u64, 1, 2, 3, 4, 7, 9].into_iter().enumerate() {
            assert_eq!(t.ready(at(0), sequence as u64, frame), Some(at(0)));
            let a = t.admitted();
            told.push((a.frame, a.fresh, a.frames_missing));
            t.done(false);
        }
        assert_eq!(
            told,
            [
                (0, true, 0),
                (1, false, 0),
                (2, false, 0),
                (3, true, 0),
                (4, false, 0),
                (7, true, 0),
                (9, true, 0),
            ],
            "fresh at 3, 6 (7 comes first, 5 and 6 lost) and 9"
        );
        let counts = t.counts();
        assert_eq!((counts.restarts, counts.frames_missing), (3, 0));
    }

    #[test]
    fn admits_in_the_order_frames_began_one_at_a_time() {
        let t = gate(false, 3);
        assert_eq!(t.ready(at(2), 2, 2), None, "frame 2 waits for 0 and 1");
        assert_eq!(t.ready(at(1), 1, 1), None);
        assert_eq!(t.ready(at(0), 0, 0), Some(at(0)), "frame 0's turn");
        let told = |frame, fresh, after_slot| Admission {
            frame,
            frames_missing: 0,
            fresh,
            after_slot,
            from_lane: None,
        };
        assert_eq!(t.admitted(), told(0, true, None));
        assert_eq!(t.done(false), Some(at(1)));
        assert_eq!(
            t.admitted(),
            told(1, false, Some(0)),
            "after slot 0's frame"
        );
        assert_eq!(t.ready(at(0), 3, 3), None, "one launch at a time");
        assert_eq!(t.done(false), Some(at(2)));
        assert_eq!(t.done(false), Some(at(0)));
        assert_eq!(t.admitted().frame, 3);
        assert_eq!(t.done(false), None, "nothing else is ready");
        assert_eq!(t.counts().launches, 4);
        assert_eq!(t.counts().moves, 0, "one lane: the carry never moves");
    }

    #[test]
    fn a_partial_frame_is_passed_and_its_loss_counted_or_reset() {
        for reset_on_gap in [false, true] {
            let t = gate(reset_on_gap, 2);
            assert_eq!(t.ready(at(0), 0, 10), Some(at(0)));
            assert_eq!(t.ready(at(0), 2, 12), None, "frame 1 has not ended yet");
            assert_eq!(t.done(false), None);
            assert_eq!(t.skip(at(1), 1), Some(at(0)), "the partial frame is passed");
            let told = t.admitted();
            assert_eq!(told.frame, 12);
            if reset_on_gap {
                assert_eq!((told.frames_missing, told.fresh), (0, true));
            } else {
                assert_eq!((told.frames_missing, told.fresh), (1, false));
            }
            let counts = t.counts();
            assert_eq!(counts.frames_missing, 1);
            assert_eq!(counts.resets, u64::from(reset_on_gap));
        }
    }

    #[test]
    fn frames_never_begun_count_as_lost_and_numbers_going_back_restart() {
        let t = gate(false, 1);
        assert_eq!(t.ready(at(0), 0, 5), Some(at(0)));
        assert_eq!(t.done(false), None);
        assert_eq!(t.ready(at(0), 1, 9), Some(at(0)), "6, 7 and 8 never began");
        assert_eq!(t.admitted().frames_missing, 3);
        assert_eq!(t.done(false), None);
        assert_eq!(t.ready(at(0), 2, 0), Some(at(0)));
        assert_eq!(
            t.admitted(),
            Admission {
                frame: 0,
                frames_missing: 0,
                fresh: true,
                after_slot: Some(0),
                from_lane: None,
            },
            "the sender restarted"
        );
        let counts = t.counts();
        assert_eq!(
            (counts.restarts, counts.frames_missing, counts.resets),
            (1, 3, 0)
        );
    }

    /// Frames move between two lanes: the carry moves with them, from the lane that ran the
    /// frame before, unless it starts afresh.
    #[test]
    fn the_carry_moves_with_frames_between_lanes() {
        let t = cycled(false, &[2, 2], None);
        let lane = |lane, slot| At { lane, slot };
        assert_eq!(t.ready(lane(0, 0), 0, 0), Some(lane(0, 0)));
        assert_eq!(
            t.admitted().from_lane,
            None,
            "the first frame starts afresh"
        );
        assert_eq!(t.done(false), None);
        assert_eq!(t.ready(lane(1, 0), 1, 1), Some(lane(1, 0)));
        let told = t.admitted();
        assert_eq!((told.from_lane, told.after_slot), (Some(0), None));
        assert_eq!(t.done(false), None);
        assert_eq!(t.ready(lane(1, 1), 2, 2), Some(lane(1, 1)));
        let told = t.admitted();
        assert_eq!((told.from_lane, told.after_slot), (None, Some(0)));
        assert_eq!(t.done(false), None);
        // Back to lane 0 after a restart: nothing to move, the carry is zeroed.
        assert_eq!(t.ready(lane(0, 1), 3, 0), Some(lane(0, 1)));
        let told = t.admitted();
        assert_eq!((told.from_lane, told.fresh), (None, true));
        assert_eq!(t.counts().moves, 1);
    }

    /// A GPU launch lets its own lane's next frame in once enqueued, another lane's only once
    /// it has executed.
    #[test]
    fn another_lane_waits_for_a_gpu_launch_to_execute() {
        let t = cycled(false, &[2, 2], None);
        let lane = |lane, slot| At { lane, slot };
        assert_eq!(t.ready(lane(0, 0), 0, 0), Some(lane(0, 0)));
        assert_eq!(t.ready(lane(0, 1), 1, 1), None);
        assert_eq!(t.done(true), Some(lane(0, 1)), "its own lane at once");
        assert_eq!(t.done(true), None);
        assert_eq!(
            t.ready(lane(1, 0), 2, 2),
            None,
            "frame 1 is still on the GPU"
        );
        assert_eq!(t.executed(0, 0), None, "frame 0's end is not frame 1's");
        assert_eq!(t.executed(1, 1), None, "nor is another lane's");
        assert_eq!(t.executed(0, 1), Some(lane(1, 0)));
        assert_eq!(t.admitted().from_lane, Some(0));
        assert_eq!(t.done(false), None);
        assert_eq!(
            t.ready(lane(0, 0), 3, 3),
            Some(lane(0, 0)),
            "a CPU lane's end"
        );
        assert_eq!(t.admitted().from_lane, Some(1));
        assert_eq!(t.counts().moves, 2);
    }

    /// The driver may run a launch's completion before the worker that enqueued it says so:
    /// the execution still counts.
    #[test]
    fn an_execution_heard_before_the_enqueue_ends_counts() {
        let t = cycled(false, &[1, 1], None);
        let lane = |lane, slot| At { lane, slot };
        assert_eq!(t.ready(lane(0, 0), 0, 0), Some(lane(0, 0)));
        assert_eq!(t.ready(lane(1, 0), 1, 1), None);
        assert_eq!(t.executed(0, 0), None, "frame 0 has not been enqueued yet");
        assert_eq!(t.done(true), Some(lane(1, 0)), "it has executed already");
        assert_eq!(t.admitted().from_lane, Some(0));
    }

    /// Frames end in a scrambled order, some partial, in random lanes, launches end late
    /// (some on a GPU lane, whose executions are heard late, or before their enqueue ends):
    /// every complete frame is admitted once, in sequence order, never two at a time, never in
    /// another lane before the GPU launch before it has executed, and told where its carry
    /// comes from.
    #[test]
    fn scrambled_arrivals_are_admitted_in_sequence() {
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut random = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for _ in 0..300 {
            let slots = 1 + random(4) as usize;
            let lanes = 1 + random(3) as usize;
            let gpu: Vec<bool> = (0..lanes).map(|_| random(2) == 0).collect();
            let t = cycled(false, &vec![slots; lanes], None);
            let frames = 40u64;
            let partial: Vec<bool> = (0..frames).map(|_| random(4) == 0).collect();
            let lane_of: Vec<usize> = (0..frames).map(|_| random(lanes as u64) as usize).collect();
            // Frames take slots in turn, and a slot is free again once its frame and every
            // earlier one have settled (delivered in order): admitted and ended, or skipped.
            let mut settled = vec![false; frames as usize];
            let mut arrived = 0u64;
            let mut admitted: Vec<u64> = Vec::new();
            let mut running: Option<u64> = None;
            // GPU launches admitted whose execution has not been heard, and per lane the
            // latest heard.
            let mut unheard: Vec<u64> = Vec::new();
            let mut heard: Vec<Option<u64>> = vec![None; lanes];
            let mut pending: Vec<u64> = Vec::new();
            while settled.iter().any(|s| !s) || !unheard.is_empty() {
                let delivered = settled.iter().take_while(|s| **s).count() as u64;
                while arrived < frames && arrived < delivered + slots as u64 {
                    pending.push(arrived);
                    arrived += 1;
                }
                let pick = random(pending.len() as u64 + 2) as usize;
                let at = |s: u64| At {
                    lane: lane_of[s as usize],
                    slot: (s % slots as u64) as usize,
                };
                let got = if pick == pending.len() {
                    let Some(s) = running.take() else { continue };
                    settled[s as usize] = true;
                    t.done(gpu[lane_of[s as usize]])
                } else if pick > pending.len() {
                    if unheard.is_empty() {
                        continue;
                    }
                    let s = unheard.swap_remove(random(unheard.len() as u64) as usize);
                    let lane = lane_of[s as usize];
                    heard[lane] = heard[lane].max(Some(s));
                    t.executed(lane, s)
                } else {
                    let s = pending.swap_remove(pick);
                    if partial[s as usize] {
                        settled[s as usize] = true;
                        t.skip(at(s), s)
                    } else {
                        t.ready(at(s), s, s)
                    }
                };
                if let Some(place) = got {
                    assert!(running.is_none(), "two launches admitted at once");
                    let told = t.admitted();
                    let frame = told.frame;
                    assert_eq!(place, at(frame), "the frame's own lane and slot");
                    let before = admitted.last().map(|&p| (p, lane_of[p as usize]));
                    if let Some((p, lane)) = before.filter(|&(_, l)| gpu[l] && l != place.lane) {
                        assert!(
                            heard[lane] >= Some(p),
                            "admitted in another lane before the GPU launch before it executed"
                        );
                    }
                    let moved = before
                        .map(|(_, l)| l)
                        .filter(|&l| l != place.lane && !told.fresh);
                    assert_eq!(told.from_lane, moved);
                    if gpu[place.lane] {
                        unheard.push(frame);
                    }
                    running = Some(frame);
                    admitted.push(frame);
                }
            }
            let expected: Vec<u64> = (0..frames).filter(|&s| !partial[s as usize]).collect();
            assert_eq!(admitted, expected);
        }
    }
}

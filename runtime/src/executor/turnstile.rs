//! Stateful stages: one frame at a time, in the order frames began, each seeing the carry the
//! frame before it left.
//!
//! A stateful kernel keeps what it carries from frame to frame (a filter's history, an
//! oscillator's phase) in one carry per stage, which the runtime owns. Its launches must
//! therefore not overlap, and must come in stream order, while frames run concurrently in
//! their slots. A [`Turnstile`] per stateful stage admits the stage of the frame numbered `s`
//! in the order frames began only once the stage of frame `s - 1` has ended, or will never run
//! because that frame ended partial ([`Turnstile::skip`]). Other stages of other frames go on
//! around it: only this stage serializes.
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
//! every earlier frame's stage has ended or been skipped. Each call takes one short lock and
//! allocates nothing.

use std::sync::Mutex;

use super::pool::Block;
use crate::plan::PlannedCarry;
use crate::plugin::CarryArgs;
use crate::report::metrics::CarryCounts;

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
    /// The slot of the frame admitted before, if any: on a GPU, the launch's stream waits
    /// for that frame's stage to have run.
    pub(crate) after_slot: Option<usize>,
}

struct Gate {
    /// The sequence whose turn it is.
    next: u64,
    /// Whether a launch is admitted and has not ended.
    running: bool,
    /// Per slot.
    places: Vec<Place>,
    /// The number and slot of the frame last admitted.
    last_frame: Option<u64>,
    last_slot: Option<usize>,
    /// What the launch admitted last is told.
    current: Admission,
    counts: CarryCounts,
}

/// The gate of one stateful stage.
pub(crate) struct Turnstile {
    carry: PlannedCarry,
    /// Frames per cycle of a recording replayed in cycles.
    cycle: Option<u64>,
    gate: Mutex<Gate>,
}

impl Turnstile {
    /// A gate for a run of `slots` slots, before its first frame; with `cycle`, the stream
    /// starts again at every multiple of it.
    pub(crate) fn new(carry: PlannedCarry, slots: usize, cycle: Option<u64>) -> Turnstile {
        Turnstile {
            carry,
            cycle: cycle.filter(|&n| n > 0),
            gate: Mutex::new(Gate {
                next: 0,
                running: false,
                places: vec![Place::Away; slots],
                last_frame: None,
                last_slot: None,
                current: Admission::default(),
                counts: CarryCounts::default(),
            }),
        }
    }

    fn gate(&self) -> std::sync::MutexGuard<'_, Gate> {
        self.gate.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The stage of frame `sequence`, numbered `frame` by the source, in `slot`, has its
    /// inputs. Returns the slot whose stage runs now, if any (this one, when it is its turn).
    pub(crate) fn ready(&self, slot: usize, sequence: u64, frame: u64) -> Option<usize> {
        let mut gate = self.gate();
        gate.places[slot] = Place::Ready { sequence, frame };
        self.admit_next(&mut gate)
    }

    /// Frame `sequence` in `slot` ended partial: its stage will not run. Returns the slot whose
    /// stage runs now, if any.
    pub(crate) fn skip(&self, slot: usize, sequence: u64) -> Option<usize> {
        let mut gate = self.gate();
        gate.places[slot] = Place::Skipped { sequence };
        self.admit_next(&mut gate)
    }

    /// The admitted launch ended. Returns the slot whose stage runs next, if any.
    pub(crate) fn done(&self) -> Option<usize> {
        let mut gate = self.gate();
        gate.running = false;
        gate.next += 1;
        self.admit_next(&mut gate)
    }

    /// What the admitted launch is told; zeroing the carry, when it must, is the caller's.
    pub(crate) fn admitted(&self) -> Admission {
        self.gate().current
    }

    /// What happened to the carry so far.
    pub(crate) fn counts(&self) -> CarryCounts {
        self.gate().counts
    }

    /// Passes skipped frames whose turn it is, then admits the frame whose turn it is if its
    /// stage is ready and nothing runs, deciding what its launch is told.
    fn admit_next(&self, gate: &mut Gate) -> Option<usize> {
        if gate.running {
            return None;
        }
        loop {
            let next = gate.next;
            let found = gate.places.iter().position(|p| match *p {
                Place::Ready { sequence, .. } | Place::Skipped { sequence } => sequence == next,
                Place::Away => false,
            })?;
            let place = std::mem::replace(&mut gate.places[found], Place::Away);
            match place {
                Place::Ready { frame, .. } => {
                    gate.running = true;
                    gate.current = Admission {
                        after_slot: gate.last_slot.replace(found),
                        ..self.admission(gate, frame)
                    };
                    return Some(found);
                }
                _ => gate.next += 1,
            }
        }
    }

    /// What the launch of frame `frame` is told, given the frame admitted before it; counts it.
    fn admission(&self, gate: &mut Gate, frame: u64) -> Admission {
        let counts = &mut gate.counts;
        counts.launches += 1;
        let admission = match gate.last_frame {
            None => Admission {
                frame,
                frames_missing: 0,
                fresh: true,
                after_slot: None,
            },
            Some(last) if frame <= last || self.cycle.is_some_and(|n| frame / n != last / n) => {
                counts.restarts += 1;
                Admission {
                    frame,
                    frames_missing: 0,
                    fresh: true,
                    after_slot: None,
                }
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
                    after_slot: None,
                }
            }
        };
        gate.last_frame = Some(frame);
        admission
    }
}

/// A stateful stage's gate and its carry, for one run.
pub(crate) struct Stateful {
    pub(crate) turnstile: Turnstile,
    /// The carry, in the kernel's memory: host memory, or device memory for a GPU stage.
    carry: Block,
    /// For a GPU stage: pinned zeros of the carry's size, copied over it to start afresh.
    zeros: Option<Block>,
}

/// What a stateful GPU stage's enqueue adds to its stream before its launch.
#[derive(Clone, Copy)]
pub(crate) struct GpuCarry {
    /// The launch's carry arguments.
    pub(crate) args: CarryArgs,
    /// Pinned zeros to copy over the carry first, when it starts afresh.
    pub(crate) zeros: Option<Block>,
    /// The slot whose frame ran the stage before: the stream first waits for that slot's
    /// event of the stage, so the launches use the carry in turn, on the device too.
    pub(crate) after_slot: Option<usize>,
}

impl Stateful {
    /// The stage's gate and `carry`, a block of at least the carry's size in its kernel's
    /// memory, with `zeros` for a GPU stage (see [`Turnstile::new`] for `cycle`).
    pub(crate) fn new(
        carry: PlannedCarry,
        block: Block,
        zeros: Option<Block>,
        slots: usize,
        cycle: Option<u64>,
    ) -> Stateful {
        Stateful {
            turnstile: Turnstile::new(carry, slots, cycle),
            carry: block,
            zeros,
        }
    }

    fn args(&self, admitted: Admission) -> CarryArgs {
        CarryArgs {
            carry: self.carry.ptr.cast(),
            bytes: self.carry.bytes,
            frame: admitted.frame,
            frames_missing: admitted.frames_missing,
            fresh: admitted.fresh,
        }
    }

    /// The arguments of the admitted CPU launch, its carry zeroed first when it must be.
    pub(crate) fn carry_args(&self) -> CarryArgs {
        let admitted = self.turnstile.admitted();
        if admitted.fresh && self.zeros.is_none() {
            // SAFETY: the block is the stage's carry in host memory, `bytes` long, and only
            // the admitted launch, which has not started, uses it.
            unsafe { std::ptr::write_bytes(self.carry.ptr, 0, self.carry.bytes as usize) };
        }
        self.args(admitted)
    }

    /// What the admitted GPU launch's enqueue needs: its arguments, the zeros to clear the
    /// carry with when it starts afresh, and the slot to wait for.
    pub(crate) fn gpu_carry(&self) -> GpuCarry {
        let admitted = self.turnstile.admitted();
        GpuCarry {
            args: self.args(admitted),
            zeros: self.zeros.filter(|_| admitted.fresh),
            after_slot: admitted.after_slot,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(reset_on_gap: bool, slots: usize) -> Turnstile {
        cycled(reset_on_gap, slots, None)
    }

    fn cycled(reset_on_gap: bool, slots: usize, cycle: Option<u64>) -> Turnstile {
        Turnstile::new(
            PlannedCarry {
                bytes: 64,
                reset_on_gap,
            },
            slots,
            cycle,
        )
    }

    #[test]
    fn each_cycle_of_a_replayed_recording_starts_the_stream_again() {
        let t = cycled(false, 1, Some(3));
        let mut told = Vec::new();
        for (sequence, frame) in [0u64, 1, 2, 3, 4, 7, 9].into_iter().enumerate() {
            assert_eq!(t.ready(0, sequence as u64, frame), Some(0));
            let a = t.admitted();
            told.push((a.frame, a.fresh, a.frames_missing));
            t.done();
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
        assert_eq!(t.ready(2, 2, 2), None, "frame 2 waits for 0 and 1");
        assert_eq!(t.ready(1, 1, 1), None);
        assert_eq!(t.ready(0, 0, 0), Some(0), "frame 0's turn");
        let told = |frame, fresh, after_slot| Admission {
            frame,
            frames_missing: 0,
            fresh,
            after_slot,
        };
        assert_eq!(t.admitted(), told(0, true, None));
        assert_eq!(t.done(), Some(1));
        assert_eq!(
            t.admitted(),
            told(1, false, Some(0)),
            "after slot 0's frame"
        );
        assert_eq!(t.ready(0, 3, 3), None, "one launch at a time");
        assert_eq!(t.done(), Some(2));
        assert_eq!(t.done(), Some(0));
        assert_eq!(t.admitted().frame, 3);
        assert_eq!(t.done(), None, "nothing else is ready");
        assert_eq!(t.counts().launches, 4);
    }

    #[test]
    fn a_partial_frame_is_passed_and_its_loss_counted_or_reset() {
        for reset_on_gap in [false, true] {
            let t = gate(reset_on_gap, 2);
            assert_eq!(t.ready(0, 0, 10), Some(0));
            assert_eq!(t.ready(0, 2, 12), None, "frame 1 has not ended yet");
            assert_eq!(t.done(), None);
            assert_eq!(t.skip(1, 1), Some(0), "the partial frame is passed");
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
        assert_eq!(t.ready(0, 0, 5), Some(0));
        assert_eq!(t.done(), None);
        assert_eq!(t.ready(0, 1, 9), Some(0), "6, 7 and 8 never began");
        assert_eq!(t.admitted().frames_missing, 3);
        assert_eq!(t.done(), None);
        assert_eq!(t.ready(0, 2, 0), Some(0));
        assert_eq!(
            t.admitted(),
            Admission {
                frame: 0,
                frames_missing: 0,
                fresh: true,
                after_slot: Some(0),
            },
            "the sender restarted"
        );
        let counts = t.counts();
        assert_eq!(
            (counts.restarts, counts.frames_missing, counts.resets),
            (1, 3, 0)
        );
    }

    /// Frames end in a scrambled order, some partial, launches end late: every complete frame
    /// is admitted once, in sequence order, never two at a time.
    #[test]
    fn scrambled_arrivals_are_admitted_in_sequence() {
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut random = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for _ in 0..200 {
            let slots = 1 + random(4) as usize;
            let t = gate(false, slots);
            let frames = 40u64;
            let partial: Vec<bool> = (0..frames).map(|_| random(4) == 0).collect();
            // Frames take slots in turn, and a slot is free again once its frame and every
            // earlier one have settled (delivered in order): admitted and ended, or skipped.
            let mut settled = vec![false; frames as usize];
            let mut arrived = 0u64;
            let mut admitted = Vec::new();
            let mut running: Option<u64> = None;
            let mut pending: Vec<u64> = Vec::new();
            while settled.iter().any(|s| !s) {
                let delivered = settled.iter().take_while(|s| **s).count() as u64;
                while arrived < frames && arrived < delivered + slots as u64 {
                    pending.push(arrived);
                    arrived += 1;
                }
                let pick = random(pending.len() as u64 + 1) as usize;
                let got = if pick == pending.len() {
                    let Some(s) = running.take() else { continue };
                    settled[s as usize] = true;
                    t.done()
                } else {
                    let s = pending.swap_remove(pick);
                    let slot = (s % slots as u64) as usize;
                    if partial[s as usize] {
                        settled[s as usize] = true;
                        t.skip(slot, s)
                    } else {
                        t.ready(slot, s, s)
                    }
                };
                if let Some(slot) = got {
                    assert!(running.is_none(), "two launches admitted at once");
                    let frame = t.admitted().frame;
                    assert_eq!(frame % slots as u64, slot as u64, "the frame's own slot");
                    running = Some(frame);
                    admitted.push(frame);
                }
            }
            let expected: Vec<u64> = (0..frames).filter(|&s| !partial[s as usize]).collect();
            assert_eq!(admitted, expected);
        }
    }
}

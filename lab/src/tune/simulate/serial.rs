//! The simulation's stateful stages: one frame at a time, in the order frames began, as the
//! executor's turnstiles run them (a frame that never began, for want of a slot, is passed).

use std::collections::BTreeSet;

/// One stateful stage's turn.
#[derive(Clone, Debug, Default)]
struct Gate {
    /// The frame whose turn it is.
    next: usize,
    /// Whether a launch of the stage runs.
    running: bool,
    /// Frames whose stage is ready, waiting for their turn.
    ready: BTreeSet<usize>,
}

/// The gates of a pipeline's stateful stages (`None` for the others).
#[derive(Clone, Debug)]
pub(super) struct Gates {
    gates: Vec<Option<Gate>>,
}

impl Gates {
    /// Gates for the stages flagged `serial`.
    pub(super) fn new(serial: impl Iterator<Item = bool>) -> Gates {
        Gates {
            gates: serial.map(|s| s.then(Gate::default)).collect(),
        }
    }

    /// Whether `stage` runs one frame at a time.
    pub(super) fn is_serial(&self, stage: usize) -> bool {
        self.gates[stage].is_some()
    }

    /// `stage` of `frame` is ready: the frame whose stage starts now, if any.
    pub(super) fn ready(
        &mut self,
        stage: usize,
        frame: usize,
        dropped: impl Fn(usize) -> bool,
    ) -> Option<usize> {
        let gate = self.gates[stage].as_mut()?;
        gate.ready.insert(frame);
        Self::admit(gate, dropped)
    }

    /// `stage`'s running launch ended: the frame whose stage starts now, if any.
    pub(super) fn done(&mut self, stage: usize, dropped: impl Fn(usize) -> bool) -> Option<usize> {
        let gate = self.gates[stage].as_mut()?;
        gate.running = false;
        gate.next += 1;
        Self::admit(gate, dropped)
    }

    /// A frame was dropped: every stage whose turn passes it, with the frame that starts now.
    pub(super) fn dropped(&mut self, dropped: impl Fn(usize) -> bool) -> Vec<(usize, usize)> {
        self.gates
            .iter_mut()
            .enumerate()
            .filter_map(|(stage, gate)| Some((stage, Self::admit(gate.as_mut()?, &dropped)?)))
            .collect()
    }

    fn admit(gate: &mut Gate, dropped: impl Fn(usize) -> bool) -> Option<usize> {
        if gate.running {
            return None;
        }
        while dropped(gate.next) {
            gate.next += 1;
        }
        let frame = gate.next;
        if gate.ready.remove(&frame) {
            gate.running = true;
            Some(frame)
        } else {
            None
        }
    }
}

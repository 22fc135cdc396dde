//! Parameters changed while a run goes on: new kernel states made off the hot path, swapped in
//! at a frame boundary.
//!
//! A [`ParamUpdate`] names a CPU stage and new values for some of its parameters. The control
//! thread merges them into the stage's current values, creates one kernel state per slot with
//! them (the kernel checks them as it did at planning), and refuses the change, recording why,
//! if the kernel refuses or if the new states would need more workspace than the stage was
//! planned with, or another carry. Otherwise it posts the states for every slot at once. The
//! first frame to begin after that is the change's boundary: the source swaps a slot's state
//! when it opens a frame there at or after the boundary, while nothing of the slot runs, so
//! every frame runs wholly with the old values or wholly with the new. A GPU stage's change is
//! refused: its stream may still hold a partial frame's launches of the old state.
//!
//! Guarantees: the hot path pays one atomic load per frame while no change is pending; states
//! are created and destroyed on the control and source threads, never on a worker; every
//! change asked for is recorded, applied or refused, in the order asked.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crossbeam::channel::{Receiver, RecvTimeoutError};

use super::Shared;
use crate::measure::metrics::ParamChange;
use crate::model::graph::StageId;
use crate::model::placement::Device;
use crate::plugin::KernelState;

/// Why a change of parameters is refused; the run records it, in words, in the change's record.
#[derive(Debug, thiserror::Error)]
pub(super) enum ChangeRefused {
    /// No stage of that name.
    #[error("unknown stage {stage}; the graph has {}", .known.join(", "))]
    UnknownStage {
        /// The name asked for.
        stage: String,
        /// The graph's stages.
        known: Vec<String>,
    },
    /// The stage runs on a GPU.
    #[error(
        "stage {stage} runs on {device}: parameters change while a run goes on only on the CPU"
    )]
    NotOnCpu {
        /// The stage.
        stage: String,
        /// Where it runs.
        device: Device,
    },
    /// The kernel refused the values.
    #[error(transparent)]
    Create(#[from] crate::plan::bind::CreateError),
    /// The new states would need more workspace than planned.
    #[error(
        "stage {stage} would need a workspace of {needs} bytes, more than the {planned} it was \
         planned with; start a run with these values"
    )]
    Workspace {
        /// The stage.
        stage: String,
        /// Bytes the new state needs.
        needs: u64,
        /// Bytes planned.
        planned: u64,
    },
    /// The new states would carry another size.
    #[error(
        "stage {stage} would carry {carries} bytes from frame to frame instead of {planned}; \
         start a run with these values"
    )]
    Carry {
        /// The stage.
        stage: String,
        /// Bytes the new state carries.
        carries: u64,
        /// Bytes planned.
        planned: u64,
    },
}

/// New values for some parameters of one stage, asked for while a run goes on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamUpdate {
    /// The stage, by name.
    pub stage: String,
    /// Parameter names and their new values, as text (as `--set STAGE.PARAM=VALUE` gives).
    pub params: Vec<(String, String)>,
    /// Where it came from, for the report (`control file c.txt, line 2`).
    pub origin: String,
}

/// A change posted for every slot, waiting for the frames it applies to.
struct Pending {
    stage: StageId,
    /// Its index among the recorded changes.
    record: usize,
    /// The first frame it applies to, once a frame has begun after it was posted.
    from: Option<u64>,
    /// Per slot, the state not yet swapped in.
    states: Vec<Option<KernelState>>,
}

/// The changes of one run: posted by the control thread, swapped in by the source.
#[derive(Default)]
pub(crate) struct Control {
    /// Whether any change waits: the source's only cost while none does.
    any: AtomicBool,
    pending: Mutex<Vec<Pending>>,
    records: Mutex<Vec<ParamChange>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Control {
    /// Every change asked for so far, in order.
    pub(crate) fn records(&self) -> Vec<ParamChange> {
        lock(&self.records).clone()
    }
}

impl Shared<'_> {
    /// The control thread: takes updates from `updates` until the run stops or the sender
    /// goes, applying each (see the module docs).
    pub(super) fn control(&self, updates: &Receiver<ParamUpdate>) {
        // Each stage's current values, changes merged in as they come.
        let mut current: Vec<Vec<(String, String)>> = self
            .plan
            .graph
            .stages
            .iter()
            .map(|s| s.params.clone())
            .collect();
        while !self.common.stopping.load(Ordering::Acquire) {
            let update = match updates.recv_timeout(Duration::from_millis(20)) {
                Ok(update) => update,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => return,
            };
            let record = ParamChange {
                stage: update.stage.clone(),
                params: update.params.clone(),
                origin: update.origin.clone(),
                from_sequence: None,
                refused: None,
            };
            let index = {
                let mut records = lock(&self.control.records);
                records.push(record);
                records.len() - 1
            };
            match self.prepare(&update, &mut current) {
                Ok((stage, states)) => {
                    lock(&self.control.pending).push(Pending {
                        stage,
                        record: index,
                        from: None,
                        states,
                    });
                    self.control.any.store(true, Ordering::Release);
                    tracing::info!(
                        "{}: stage {} takes {} from the next frame",
                        update.origin,
                        update.stage,
                        show(&update.params)
                    );
                }
                Err(why) => {
                    tracing::warn!("{}: change refused: {why}", update.origin);
                    lock(&self.control.records)[index].refused = Some(why.to_string());
                }
            }
        }
    }

    /// The states of `update`'s stage with its values merged into `current`, one per slot; or
    /// why the change is refused (then `current` is left as it was).
    fn prepare(
        &self,
        update: &ParamUpdate,
        current: &mut [Vec<(String, String)>],
    ) -> Result<(StageId, Vec<Option<KernelState>>), ChangeRefused> {
        let plan = self.plan;
        let Some(index) = plan
            .graph
            .stages
            .iter()
            .position(|s| s.name == update.stage)
        else {
            let known = plan.graph.stages.iter().map(|s| s.name.clone()).collect();
            return Err(ChangeRefused::UnknownStage {
                stage: update.stage.clone(),
                known,
            });
        };
        let planned = &plan.stages[index];
        if planned.device() != Device::Cpu {
            return Err(ChangeRefused::NotOnCpu {
                stage: update.stage.clone(),
                device: planned.device(),
            });
        }
        let mut params = current[index].clone();
        for (name, value) in &update.params {
            match params.iter_mut().find(|(n, _)| n == name) {
                Some(slot) => slot.1 = value.clone(),
                None => params.push((name.clone(), value.clone())),
            }
        }
        params.sort();
        let stage = StageId(index);
        let mut states = Vec::with_capacity(self.slots.len());
        for _ in &self.slots {
            let state = plan.create_state_with(stage, &params)?;
            let (workspace, planned_workspace) = (
                state.workspace_bytes(),
                planned.workspace_bytes.unwrap_or(0),
            );
            if workspace > planned_workspace {
                return Err(ChangeRefused::Workspace {
                    stage: update.stage.clone(),
                    needs: workspace,
                    planned: planned_workspace,
                });
            }
            let carry = planned.carry.map_or(0, |c| c.bytes);
            if state.carry_bytes() != carry {
                return Err(ChangeRefused::Carry {
                    stage: update.stage.clone(),
                    carries: state.carry_bytes(),
                    planned: carry,
                });
            }
            states.push(Some(state));
        }
        current[index] = params;
        Ok((stage, states))
    }

    /// The source opened frame `sequence` in `slot`: swaps in the states of the changes it is
    /// at or past the boundary of, the first frame to begin after a change setting it.
    pub(super) fn swap_changed(&self, slot: usize, sequence: u64) {
        if !self.control.any.load(Ordering::Acquire) {
            return;
        }
        let mut old = Vec::new();
        {
            let mut pending = lock(&self.control.pending);
            for change in pending.iter_mut() {
                let from = *change.from.get_or_insert(sequence);
                if sequence >= from
                    && let Some(state) = change.states[slot].take()
                {
                    // SAFETY: the slot was just taken for a new frame, so nothing of it runs
                    // or is queued, and the stage is on the CPU (`prepare` refuses others).
                    old.push(unsafe { self.slots[slot].replace_state(change.stage, state) });
                }
            }
            let mut records = lock(&self.control.records);
            for change in pending.iter() {
                records[change.record].from_sequence = change.from;
            }
            pending.retain(|change| change.states.iter().any(Option::is_some));
            self.control
                .any
                .store(!pending.is_empty(), Ordering::Release);
        }
        // The old states are destroyed here, on the source thread, outside the lock.
        drop(old);
    }
}

/// `a=1, b=2`.
fn show(params: &[(String, String)]) -> String {
    params
        .iter()
        .map(|(n, v)| format!("{n}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

//! What a run measured, gathered once its threads have ended: the collector's figures, each
//! stage's counters (and its carry's, for a stateful stage), the overheads, the parameter
//! changes and, when traced, the merged timeline: the [`RunMetrics`] a run returns.
//!
//! Guarantees: gathered once, after every thread has been joined and every stream drained, so
//! every counter it reads is final.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::collector::Collected;
use super::{RunOptions, Shared};
use crate::adapt::{Adaptation, Rule};
use crate::measure::metrics::{RunMetrics, StageReport, process_cpu_time};
use crate::measure::overhead::Overhead;
use crate::measure::trace::{SpanBuffer, Trace};
use crate::model::graph::StageId;

/// What the run's threads gathered.
pub(super) struct Measured {
    /// The collector's figures.
    pub(super) collected: Collected,
    /// Every thread's spans but the collector's (which `collected` holds).
    pub(super) spans: Vec<SpanBuffer>,
    pub(super) overhead: Overhead,
}

/// The run's measurements: the collector's, each stage's counters, the overheads, what each
/// lane ran when the run adapts, and the merged timeline when traced; `cpu_before` is the
/// process's CPU time before the run.
pub(super) fn metrics(
    lanes: &[Shared<'_>],
    measured: Measured,
    cpu_before: Duration,
    rule: Option<&Rule>,
    options: &RunOptions,
) -> RunMetrics {
    let Measured {
        collected: mut outcome,
        mut spans,
        overhead,
    } = measured;
    let shared = &lanes[0];
    let plan = shared.plan;
    let placements: Vec<String> = lanes
        .iter()
        .map(|l| l.plan.placement.name.clone())
        .collect();
    let trace = options.trace.then(|| {
        spans.push(std::mem::take(&mut outcome.spans));
        for lane in lanes {
            spans.push(std::mem::take(
                &mut *lane.driver_spans.lock().unwrap_or_else(|e| e.into_inner()),
            ));
        }
        let stages = plan
            .stages
            .iter()
            .map(|p| plan.graph.stage(p.stage).name.clone())
            .collect();
        let mut trace = Trace::merge(spans, stages);
        if rule.is_some() {
            trace.placements = placements.clone();
        }
        trace
    });
    let adaptation = rule.map(|rule| Adaptation {
        placements,
        frames: std::mem::take(&mut outcome.lane_frames),
        budget_ms: rule.budget.as_secs_f64() * 1e3,
        trigger_ms: rule.budget.as_secs_f64() * 1e3 * rule.trigger,
        window: rule.window,
        spilled_frames: shared.common.spilled.load(Ordering::Relaxed),
        switches: std::mem::take(&mut outcome.switches),
    });

    let window_start = outcome.window_start.unwrap_or(outcome.first_start);
    let wall = outcome.last_delivery.saturating_sub(window_start);
    let frames = outcome.frames;
    RunMetrics {
        trace,
        frames,
        measured_frames: outcome.measured,
        wall,
        cpu: process_cpu_time().saturating_sub(outcome.cpu_at_window_start.unwrap_or(cpu_before)),
        stages: plan
            .stages
            .iter()
            .zip(&shared.common.counters)
            .zip(&shared.common.gates)
            .map(|((p, c), gate)| StageReport {
                carry: gate.as_ref().map(|g| g.counts()),
                ..c.snapshot(
                    &plan.graph.stage(p.stage).name,
                    devices(lanes, p.stage),
                    frames,
                )
            })
            .collect(),
        post_frame: outcome.post_frame.summary(),
        end_to_end: outcome.end_to_end.summary(),
        post_frame_trend: outcome.trend.slope(),
        slot_waits: shared.common.slot_waits.load(Ordering::Relaxed),
        partial_frames: outcome.partial,
        dropped_frames: outcome.dropped,
        overhead,
        changes: shared.control.records(),
        adaptation,
    }
}

/// Where `stage` ran: its device, or each lane's in turn (`gpu0/cpu`) where lanes differ.
fn devices(lanes: &[Shared<'_>], stage: StageId) -> String {
    let mut names: Vec<String> = Vec::new();
    for lane in lanes {
        let device = lane.plan.stages[stage.0].device().to_string();
        if !names.contains(&device) {
            names.push(device);
        }
    }
    names.join("/")
}

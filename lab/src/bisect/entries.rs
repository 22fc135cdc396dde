//! What the results file keeps of each search and each trial of a sweep: a search's entry
//! starts with what is known before it runs (its system, shape, budget and start rate), and
//! its trials' entries say what each asked, measured and concluded.

use std::path::Path;

use crate::rate::sweep::{SearchEntry, TrialEntry, TrialStatus};
use crate::rate::{Failure, Judgement, LatencyBudget, Stage};

use super::systems::System;
use super::{BisectConfig, SearchShape, TrialRun};

/// An entry for `system` at `shape` with what is known before the search.
pub(super) fn search_entry(
    config: &BisectConfig,
    system: &System,
    name: &str,
    shape: &SearchShape,
    repeat: u32,
) -> SearchEntry {
    SearchEntry {
        system: name.to_string(),
        placement: match system {
            System::Placement(p) => Some(p.display().to_string()),
            System::Adaptive(paths) => Some(
                paths
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(" > "),
            ),
            System::Command { .. } => None,
        },
        sut_cmd: match system {
            System::Command { command, .. } => Some(command.clone()),
            System::Placement(_) | System::Adaptive(_) => None,
        },
        shape: shape.shape.clone(),
        repeat,
        skipped: None,
        unit: config.unit().to_string(),
        real_time_rate: 1.0 / config.frame_period(shape).as_secs_f64(),
        latency_budget: config.latency_budget(shape),
        start_rate: config.search_config(shape, system.placement()).start_load,
        pipelines: config.pipelines,
        pipeline_mode: config.pipeline_mode.name().to_string(),
        sustained_rate: None,
        aggregate_sustained_rate: None,
        outcome: String::new(),
        outcome_kind: String::new(),
        goals: Vec::new(),
        loads: Vec::new(),
        trial_seconds: 0.0,
        wall_seconds: 0.0,
        sender_ceiling: None,
        probes: Vec::new(),
        bounds: None,
        cotenant: None,
        trials: Vec::new(),
    }
}

/// What the results file keeps of one trial.
pub(super) fn trial_entry(
    t: &TrialRun,
    config: &BisectConfig,
    budget: &LatencyBudget,
    out: &Path,
) -> TrialEntry {
    let figures = t.figures.clone().unwrap_or_default();
    let goals = config.search_goals();
    TrialEntry {
        rate: t.rate,
        phase: t.request.map_or_else(String::new, |r| r.phase.to_string()),
        goal: t
            .request
            .and_then(|r| goals.get(r.goal))
            .map_or_else(String::new, |g| g.name.clone()),
        stage: t.request.map_or(Stage::Final, |r| r.stage),
        duration_s: t.duration_s,
        loss_ratio: t.loss_ratio,
        status: match &t.judgement {
            Judgement::Invalid(_) => TrialStatus::Invalid,
            j if j.passed() => TrialStatus::Passed,
            _ => TrialStatus::Failed,
        },
        failures: t
            .judgement
            .verdict()
            .map(|v| v.failures.iter().map(Failure::to_string).collect())
            .unwrap_or_default(),
        invalid: t.judgement.invalid().map(str::to_string),
        budget_ms: budget.at(t.rate).as_secs_f64() * 1e3,
        measurement: t.measurement.clone(),
        latency: figures.latency,
        stages: figures.stages,
        cores_used: figures.cores_used,
        sender: t.sender.clone(),
        report: t
            .report_path
            .as_ref()
            .map(|p| p.strip_prefix(out).unwrap_or(p).display().to_string()),
    }
}

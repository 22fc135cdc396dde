//! The searches of one group, side by side at one frame shape: each search's planner asks
//! for trials, and the group runs one trial of each search still asking, in turn, until
//! every search is answered; the bounds, the machine's probes and the co-tenant go around
//! them, and each search ends as its entry in the results file with its CSV written.
//!
//! Guarantees: the searches' trials alternate, so that the machine's drift hits them alike;
//! a failed trial's machine is probed (evidence beside it, never a verdict); an interrupted
//! group stops before its next trial, and its searches' entries keep what they found.

use std::path::PathBuf;
use std::time::Instant;

use serde_json::{Value, json};

use crate::hog::Cotenant;
use crate::rate::sweep::{ProbeEntry, SearchEntry};
use crate::rate::{Probe, Search as Planner, Stage, SteadyLimits, TrialRequest};

use super::bounds::{self, BracketedBounds, measure_bounds};
use super::entries::{search_entry, trial_entry};
use super::output::write_csv;
use super::probe::run_probe;
use super::systems::System;
use super::{
    BisectConfig, BisectError, Progress, SearchShape, TrialError, TrialRun, Trials, sut, trial,
};

/// One search: which system, under which name and label, at which frame shape, which repeat.
pub(super) struct Search<'a> {
    pub(super) system: &'a System,
    pub(super) name: &'a str,
    pub(super) label: String,
    pub(super) shape: &'a SearchShape,
    pub(super) repeat: u32,
}

/// One search as it runs: its planner, its trials and the probes beside them.
struct Running<'a> {
    search: &'a Search<'a>,
    planner: Planner,
    runs: Vec<TrialRun>,
    probes: Vec<ProbeEntry>,
    dir: PathBuf,
    before: Option<bounds::Bounds>,
    started: Instant,
}

/// What one step of a search did.
enum Step {
    /// It ran a trial.
    Ran,
    /// It needs no more trials: every goal is answered.
    Answered,
    /// The sweep was interrupted, or a trial could not be started.
    Stopped,
}

impl<'a> Running<'a> {
    /// Starts `s`: the bounds before it (with `--bounds`: the machine's speed drifts over
    /// minutes, and a ratio means something only against bounds from the same minutes), its
    /// planner and the directory of its trials.
    fn start(ctx: &Trials<'_>, s: &'a Search<'a>) -> Result<Self, BisectError> {
        let config = ctx.config;
        let before = config
            .bounds
            .then(|| measure_bounds(ctx, s.system, s.shape))
            .transpose()?;
        let planner = Planner::new(config.search_config(s.shape, s.system.placement()))
            .map_err(|e| BisectError::Search(e.to_string()))?;
        Ok(Self {
            search: s,
            planner,
            runs: Vec::new(),
            probes: Vec::new(),
            dir: config.out.join(format!(
                "{}-{}-{}",
                s.name.replace(' ', "-"),
                config.shape_label(s.shape),
                s.repeat
            )),
            before,
            started: Instant::now(),
        })
    }

    /// Keeps `probe`, judged against `baseline`.
    fn keep_probe(&mut self, probe: Probe, baseline: Option<&Probe>) {
        self.probes.push(ProbeEntry {
            steadiness: probe.judge(baseline, &SteadyLimits::default()),
            probe,
        });
    }

    /// Runs the trial the planner asks for next and records what it measured; a failed
    /// trial's machine is probed (evidence beside it, never a verdict).
    fn step(&mut self, ctx: &Trials<'_>, baseline: &Probe, progress: &dyn Progress) -> Step {
        let Some(request) = self.planner.next() else {
            return Step::Answered;
        };
        if ctx.stop.interrupted() {
            return Step::Stopped;
        }
        let (s, index, config) = (self.search, self.runs.len(), ctx.config);
        progress.trial_started(&s.label, index, &request, config.unit());
        let trial = match s.system {
            System::Placement(_) | System::Adaptive(_) => {
                let placements = s.system.placements();
                trial::trial(ctx, placements, s.shape, &request, &self.dir, index)
            }
            System::Command { command, .. } => {
                sut::sut_trial(ctx, command, s.shape, &request, &self.dir, index)
            }
        };
        let run = match trial {
            Ok(run) => run,
            Err(TrialError::Spawn(why)) => {
                tracing::warn!("bisect-rate: search stopped: {why}");
                return Step::Stopped;
            }
        };
        // A trial cut short by Ctrl-C measured nothing: it is not a failure.
        if ctx.stop.interrupted() {
            return Step::Stopped;
        }
        if run.judgement.failed() {
            self.keep_probe(run_probe(format!("after trial {index}")), Some(baseline));
        }
        progress.trial_judged(&trial_line(config, s, index, &request, &run));
        self.planner.record(request, run.outcome());
        self.runs.push(TrialRun {
            request: Some(request),
            ..run
        });
        Step::Ran
    }

    /// The search's entry, its CSV written: what the planner established, the bounds after
    /// it (unless interrupted), the co-tenant's report and every trial.
    fn finish(
        mut self,
        ctx: &Trials<'_>,
        cotenant: Option<Value>,
        interrupted: bool,
    ) -> Result<SearchEntry, BisectError> {
        let (config, s, unit) = (ctx.config, self.search, ctx.config.unit());
        if interrupted {
            self.planner.interrupt();
        }
        let after = (self.before.is_some() && !interrupted)
            .then(|| measure_bounds(ctx, s.system, s.shape))
            .transpose()?;
        let result = self.planner.result();
        let answer = result.goals.first();
        let sustained = answer.and_then(|g| g.lower);
        let bounds = self.before.map(|before| BracketedBounds { before, after });
        let mut entry = search_entry(config, s.system, s.name, s.shape, s.repeat);
        entry.cotenant = cotenant;
        entry.sustained_rate = sustained;
        entry.aggregate_sustained_rate = sustained.map(|r| r * config.pipelines as f64);
        entry.outcome = answer.map_or_else(String::new, |g| g.describe(unit));
        entry.outcome_kind = answer.map_or("", |g| g.ending.kind()).to_string();
        entry.probes = self.probes;
        entry.bounds = bounds.as_ref().map(|b| b.to_json(sustained));
        entry.trial_seconds = result.trial_seconds;
        entry.wall_seconds = self.started.elapsed().as_secs_f64();
        entry.sender_ceiling = result.sender_ceiling;
        entry.loads = result.loads;
        entry.goals = result.goals;
        entry.trials = self
            .runs
            .iter()
            .map(|t| trial_entry(t, config, &entry.latency_budget, &config.out))
            .collect();
        write_csv(
            &config.out,
            &s.name.replace(' ', "-"),
            &config.shape_label(s.shape),
            s.repeat,
            &self.runs,
            config,
        )?;
        Ok(entry)
    }
}

/// The line a judged trial prints: the search, the trial, what was asked and measured, and
/// the gates' verdict.
fn trial_line(
    config: &BisectConfig,
    s: &Search<'_>,
    index: usize,
    request: &TrialRequest,
    run: &TrialRun,
) -> String {
    let loss = run
        .loss_ratio
        .map_or_else(String::new, |l| format!(", {:.3}% lost", l * 100.0));
    let p99 = run
        .figures
        .as_ref()
        .and_then(|f| f.latency.as_ref())
        .map_or_else(String::new, |l| format!(", p99 {:.3} ms", l.p99_ms));
    format!(
        "{} {} trial {index}: {:.1} {} for {:.2} s ({} {}, {}){loss}{p99}: {}",
        s.label,
        config.shape_label(s.shape),
        request.load,
        config.unit(),
        run.duration_s,
        config.search_goals()[request.goal].name,
        request.phase,
        match request.stage {
            Stage::Coarse => "short",
            Stage::Final => "full",
        },
        run.judgement
    )
}

/// A group of searches at one frame shape, side by side: the bounds and probes before, the
/// co-tenant around them, their trials alternating one by one until every search is answered,
/// then the probes and bounds after; an entry per search, and whether the sweep was
/// interrupted.
pub(super) fn run_group(
    ctx: &Trials<'_>,
    group: &[Search<'_>],
    progress: &dyn Progress,
) -> Result<(Vec<SearchEntry>, bool), BisectError> {
    let config = ctx.config;
    let mut running = group
        .iter()
        .map(|s| Running::start(ctx, s))
        .collect::<Result<Vec<_>, _>>()?;
    let baseline = run_probe("before");
    for r in &mut running {
        r.keep_probe(baseline.clone(), None);
    }
    let labels: Vec<String> = group.iter().map(|s| s.label.clone()).collect();
    progress.searches_started(&labels, &config.shape_label(group[0].shape));
    let hog = match &config.cotenant {
        Some(spec) => Some(Cotenant::start(spec).map_err(|e| BisectError::Cotenant {
            kind: spec.kind(),
            why: e.to_string(),
        })?),
        None => None,
    };
    // One trial of each search still asking for one, in turn, until none asks.
    let mut interrupted = false;
    'trials: loop {
        let mut ran = false;
        for r in &mut running {
            match r.step(ctx, &baseline, progress) {
                Step::Ran => ran = true,
                Step::Answered => {}
                Step::Stopped => {
                    interrupted = true;
                    break 'trials;
                }
            }
        }
        if !ran {
            break;
        }
    }
    progress.searches_finished();
    let cotenant = match hog {
        Some(hog) => Some(match hog.stop() {
            Ok(report) => serde_json::to_value(&report)?,
            Err(e) => json!({"error": e.to_string()}),
        }),
        None => None,
    };
    if !interrupted {
        let after = run_probe("after");
        for r in &mut running {
            r.keep_probe(after.clone(), Some(&baseline));
        }
    }
    let entries = running
        .into_iter()
        .map(|r| r.finish(ctx, cotenant.clone(), interrupted))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((entries, interrupted))
}

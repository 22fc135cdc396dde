//! `kplace tune`: the placement chosen for the user, predicted and then proven.
//!
//! Four steps, each its own module:
//!
//! 1. [`calibrate`]: measure on this machine what a placement's cost is built from (each
//!    stage's kernel time on each device, the bus, the runtime's fixed costs, the receiver),
//!    stored and reused until stale;
//! 2. [`space`]: enumerate every placement the planner accepts, crossed with the executor's
//!    knobs;
//! 3. [`model`]: predict each one's sustained rate, post-frame latency and resources, and keep
//!    the Pareto set;
//! 4. prove ([`prove`]): run `bisect-rate` on the best few predictions; the winner is the
//!    measured best that meets the request, written as a placement file whose comment says
//!    what was predicted and measured ([`placement_file`]).
//!
//! This module holds what joins them: ranking predictions against a request, naming and
//! writing candidates, and reading the sweep's measurements back. [`procedure`] runs the four
//! steps in order at every frame shape of a sweep: [`run`] is `kplace tune` but for its
//! arguments and its printing.

pub mod admit;
pub mod calibrate;
mod costs;
pub mod model;
pub mod procedure;
mod simulate;
pub mod space;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use kplace::model::graph::Graph;
use kplace::model::placement::Placement;
use kplace::plan::layout::Layout;

use crate::bisect::{self, BisectConfig, BisectError, Stop, Systems};
use crate::rate::LatencyBudget;
use costs::Calibration;
use model::{Feed, ModelError, Prediction};
use space::{Candidate, Enumeration, Where};

pub use procedure::{
    AdmitRequest, Admitted, Progress, Proof, TuneError, TuneOptions, Tuned, Tuning, admit, run,
};

/// What the user asks of a placement.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Request {
    /// The input rate to sustain, frames per second; `None`: as high as possible.
    pub rate: Option<f64>,
    /// The post-frame latency a placement must stay within (at the rate asked, or at the
    /// placement's own); `None`: any.
    pub latency_budget: Option<LatencyBudget>,
}

impl Request {
    /// Whether a placement sustaining `rate` with a post-frame latency of `latency_ms` meets the
    /// request.
    pub fn met_by(&self, rate: f64, latency_ms: f64) -> bool {
        let at = self.rate.unwrap_or(rate);
        self.rate.is_none_or(|r| rate >= r)
            && self
                .latency_budget
                .is_none_or(|b| latency_ms <= b.at(at).as_secs_f64() * 1e3)
    }
}

/// A candidate with its prediction.
#[derive(Clone, Debug, PartialEq)]
pub struct Predicted {
    /// The placement.
    pub candidate: Candidate,
    /// Its short name ([`label`]).
    pub label: String,
    /// What the model predicts.
    pub prediction: Prediction,
}

/// Every candidate of `space` predicted from `calibration` with `feed` on `cores` cores; a
/// candidate the calibration cannot predict is returned with the model's reason.
pub fn predict_all(
    graph: &Graph,
    space: &Enumeration,
    calibration: &Calibration,
    feed: Feed,
    cores: f64,
) -> (Vec<Predicted>, Vec<(String, ModelError)>) {
    let mut predicted = Vec::new();
    let mut unpredictable = Vec::new();
    for candidate in &space.candidates {
        let label = label(graph, candidate);
        let text = candidate.placement_yaml(graph, &label, 0, "");
        let layout = Placement::parse(&text, Path::new("tune.yaml"))
            .map_err(|e| e.to_string())
            .and_then(|p| Layout::new(graph.clone(), p).map_err(|e| e.to_string()));
        let layout = match layout {
            Ok(layout) => layout,
            Err(why) => {
                unpredictable.push((label, ModelError::Layout(why)));
                continue;
            }
        };
        match model::predict(&layout, candidate, calibration, feed, cores) {
            Ok(prediction) => predicted.push(Predicted {
                candidate: candidate.clone(),
                label,
                prediction,
            }),
            Err(e) => unpredictable.push((label, e)),
        }
    }
    (predicted, unpredictable)
}

/// Indices into `predicted`, best first for `request`: those predicted to meet it first; then,
/// for a rate asked for, the fewest cores, then the smallest GPU share, then the lowest
/// latency; for the highest rate, the highest rate, then the lowest latency.
pub fn rank(predicted: &[Predicted], request: &Request) -> Vec<usize> {
    let mut order: Vec<usize> = (0..predicted.len()).collect();
    let key = |i: usize| {
        let p = &predicted[i].prediction;
        let meets = request.met_by(p.rate, p.latency_ms);
        (meets, p)
    };
    order.sort_by(|&a, &b| {
        let ((meets_a, pa), (meets_b, pb)) = (key(a), key(b));
        meets_b.cmp(&meets_a).then_with(|| match request.rate {
            Some(rate) => pa
                .cores_at(rate)
                .total_cmp(&pb.cores_at(rate))
                .then(pa.gpu_share_at(rate).total_cmp(&pb.gpu_share_at(rate)))
                .then(pa.latency_ms.total_cmp(&pb.latency_ms)),
            None => pb
                .rate
                .total_cmp(&pa.rate)
                .then(pa.latency_ms.total_cmp(&pb.latency_ms)),
        })
    });
    order
}

/// A candidate's short name: each stage's device in graph order (`c` or `g`), then the knobs:
/// `ggcc-w2-s4`, `gggg-w1-s4-t64`.
pub fn label(graph: &Graph, candidate: &Candidate) -> String {
    let devices: String = graph
        .stages
        .iter()
        .zip(&candidate.devices)
        .map(|(_, d)| match d {
            Where::Cpu => 'c',
            Where::Gpu => 'g',
        })
        .collect();
    let mut label = format!("{devices}-w{}-s{}", candidate.workers, candidate.slots);
    if let Some(tile) = candidate.gpu_tile {
        let _ = write!(label, "-t{tile}");
    }
    label
}

/// What a winning placement file says about itself, as its leading comment.
#[derive(Clone, Debug)]
pub struct Provenance<'a> {
    /// The command that chose it.
    pub command: &'a str,
    /// The machine (host name, CPU model, GPU).
    pub machine: &'a str,
    /// When, as text.
    pub when: &'a str,
    /// The frame shape.
    pub shape: &'a str,
    /// What the model predicted.
    pub prediction: &'a Prediction,
    /// What `bisect-rate` measured; `None`: not proven.
    pub measured: Option<f64>,
    /// Whether the measurement is only a lower bound (the proof ended at the sender's limit or
    /// the highest rate allowed, not at a rate the placement failed).
    pub at_least: bool,
    /// The unit of the rates (`CPI/s`, `frames/s`).
    pub unit: &'a str,
    /// The co-tenant it was chosen under.
    pub cotenant: Option<&'a str>,
}

/// `candidate` as a placement file for `graph`, its GPU stages on `gpu`, with `libraries`
/// (the `libraries:` line), led by a comment saying where it came from.
pub fn placement_file(
    graph: &Graph,
    candidate: &Candidate,
    gpu: u32,
    libraries: &str,
    provenance: &Provenance<'_>,
) -> String {
    let p = provenance.prediction;
    let mut text = String::new();
    let _ = writeln!(text, "# Chosen by `{}`", provenance.command);
    let _ = writeln!(
        text,
        "# on {}, {}, at {}.",
        provenance.machine, provenance.when, provenance.shape
    );
    if let Some(cotenant) = provenance.cotenant {
        let _ = writeln!(text, "# Under a co-tenant: {cotenant}.");
    }
    let _ = writeln!(
        text,
        "# Predicted: {:.1} {} ({} bound), post-frame latency {:.3} ms, {:.2} cores, GPU share {:.0}%.",
        p.rate,
        provenance.unit,
        p.bottleneck.name(),
        p.latency_ms,
        p.cores,
        p.gpu_share * 100.0
    );
    match provenance.measured {
        Some(rate) if provenance.at_least => {
            let _ = writeln!(
                text,
                "# Measured by bisect-rate: at least {rate:.1} {} sustained; the search stopped \
                 at the sender's limit or the highest rate allowed, so the prediction was not \
                 tested.",
                provenance.unit,
            );
        }
        Some(rate) => {
            let _ = writeln!(
                text,
                "# Measured by bisect-rate: {rate:.1} {} sustained (prediction error {:+.1}%).",
                provenance.unit,
                (p.rate / rate - 1.0) * 100.0
            );
        }
        None => {
            let _ = writeln!(text, "# Not measured: the prediction only.");
        }
    }
    text.push_str(&candidate.placement_yaml(graph, &label(graph, candidate), gpu, libraries));
    text
}

/// What proving one candidate measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Proven {
    /// Index into the predictions.
    pub index: usize,
    /// Its placement file.
    pub path: PathBuf,
    /// The answer of its search (the first goal's); `None`: the search found none.
    pub measured: Option<f64>,
    /// Whether that answer is only a lower bound: the search ended at the sender's limit (or
    /// the highest rate allowed), never at a rate the placement failed, so the prediction
    /// above it was not tested.
    pub at_least: bool,
    /// How the search ended.
    pub outcome: String,
    /// Post-frame p99 at the sustained rate, ms, where measured.
    pub p99_ms: Option<f64>,
}

/// Runs `bisect-rate` (`config`, with the `kplace` executable `exe`) on `chosen` (indices into
/// `predicted`), their placement files written into `dir` with `libraries` and GPU `gpu`: one
/// sweep whose searches run side by side, their trials alternating, so that the machine's
/// drift hits every candidate alike. Each search starts at its candidate's predicted rate.
#[allow(clippy::too_many_arguments)]
pub fn prove(
    config: &BisectConfig,
    exe: &Path,
    stop: &Stop,
    progress: &dyn bisect::Progress,
    graph: &Graph,
    predicted: &[Predicted],
    chosen: &[usize],
    libraries: &str,
    gpu: u32,
    dir: &Path,
) -> Result<Vec<Proven>, BisectError> {
    kplace::os::write::create_dir_all(dir)?;
    let mut paths = Vec::new();
    let mut all = config.clone();
    for &index in chosen {
        let p = &predicted[index];
        let path = dir.join(format!("{}.yaml", p.label));
        let text = p.candidate.placement_yaml(graph, &p.label, gpu, libraries);
        kplace::os::write::write_whole(&path, kplace::os::write::Kind::File, text.as_bytes())?;
        all.start_rates
            .insert(path.clone(), p.prediction.rate.max(1.0));
        paths.push(path);
    }
    all.systems = Systems::Placements(paths.clone());
    all.out = dir.to_path_buf();
    let sweep = bisect::run(&all, exe, stop, progress)?;
    Ok(chosen
        .iter()
        .zip(paths)
        .map(|(&index, path)| {
            let shown = path.display().to_string();
            let search = sweep
                .file
                .searches
                .iter()
                .find(|s| s.placement.as_deref() == Some(shown.as_str()));
            Proven {
                index,
                measured: search.and_then(|s| s.sustained_rate),
                at_least: search.is_some_and(|s| {
                    s.sustained_rate.is_some()
                        && matches!(s.outcome_kind.as_str(), "sender_limit" | "max_load")
                }),
                outcome: search.map_or_else(|| "not run".into(), |s| s.outcome.clone()),
                p99_ms: search.and_then(|s| {
                    s.trials
                        .iter()
                        .rev()
                        .filter(|t| Some(t.rate) == s.sustained_rate && t.loss_ratio.is_some())
                        .find_map(|t| t.latency.as_ref().map(|l| l.p99_ms))
                }),
                path,
            }
        })
        .collect())
}

/// The measured best of `proven` that meets `request`: the highest measured rate for the
/// highest rate asked, else the first in `proven`'s (ranked) order that sustains the rate.
pub fn winner(proven: &[Proven], request: &Request) -> Option<usize> {
    let sustains = |p: &Proven| {
        p.measured
            .is_some_and(|m| request.rate.is_none_or(|r| m >= r))
    };
    match request.rate {
        Some(_) => proven.iter().position(sustains),
        None => proven
            .iter()
            .enumerate()
            .filter(|(_, p)| sustains(p))
            .max_by(|a, b| {
                a.1.measured
                    .unwrap_or(0.0)
                    .total_cmp(&b.1.measured.unwrap_or(0.0))
            })
            .map(|(i, _)| i),
    }
}

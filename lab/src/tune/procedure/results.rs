//! What `kplace tune` and `kplace admit` found, as JSON beside their accounts in words:
//! `tune.json` (schema [`TUNE_SCHEMA`]) and `admit.json` ([`ADMIT_SCHEMA`]), for programs
//! and for kplace's Python objects, which turn their lists into tables. Every rate is in the
//! workload's unit (`unit`); every figure is the model's or the proof's, as the text says it.

use std::path::PathBuf;

use serde::Serialize;

use crate::tune::Proven;
use crate::tune::admit::{Admission, Demand};
use crate::tune::model::Prediction;

use super::{AtShape, Predictions, TuneError, Winner, write};

/// The schema of `tune.json`.
pub const TUNE_SCHEMA: &str = "kplace-tune/1";

/// The schema of `admit.json`.
pub const ADMIT_SCHEMA: &str = "kplace-admit/1";

/// What the model predicts of one placement.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PredictionEntry {
    /// Sustained rate.
    pub rate: f64,
    /// Post-frame latency of an unloaded frame, ms.
    pub latency_ms: f64,
    /// The resource that limits the rate.
    pub bottleneck: &'static str,
    /// Cores kept busy at `rate`.
    pub cores: f64,
    /// Host CPU time per frame, every thread's, ms.
    pub host_ms: f64,
    /// The share of the GPU's time at `rate` (0 without a GPU stage).
    pub gpu_share: f64,
    /// Every resource's own limit.
    pub limits: Vec<LimitEntry>,
}

/// One resource's own limit on the rate.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LimitEntry {
    /// The resource.
    pub resource: &'static str,
    /// The rate it allows.
    pub rate: f64,
}

impl From<&Prediction> for PredictionEntry {
    fn from(p: &Prediction) -> PredictionEntry {
        PredictionEntry {
            rate: p.rate,
            latency_ms: p.latency_ms,
            bottleneck: p.bottleneck.name(),
            cores: p.cores,
            host_ms: p.host_ms,
            gpu_share: p.gpu_share,
            limits: p
                .limits
                .iter()
                .map(|&(resource, rate)| LimitEntry {
                    resource: resource.name(),
                    rate,
                })
                .collect(),
        }
    }
}

/// `tune.json`: one shape's tuning.
#[derive(Clone, Debug, Serialize)]
pub struct TuneFile {
    pub schema: &'static str,
    /// The graph's name.
    pub graph: String,
    /// The frame shape.
    pub shape: String,
    /// The unit of every rate.
    pub unit: String,
    /// The rate asked for; `None`: the highest.
    pub requested_rate: Option<f64>,
    /// Placements left out (refused by the planner, or not predictable).
    pub left_out: usize,
    /// Every placement predicted, in the order of the space.
    pub predictions: Vec<PredictedEntry>,
    /// Every placement proven, best prediction first.
    pub proofs: Vec<ProofEntry>,
    /// The winner; `None`: no placement met the request.
    pub winner: Option<WinnerEntry>,
}

/// One placement predicted.
#[derive(Clone, Debug, Serialize)]
pub struct PredictedEntry {
    /// Its short name.
    pub label: String,
    /// Its place in the ranking for the request, 0 the best.
    pub rank: usize,
    /// Whether it is on the Pareto front of rate, latency, cores and GPU share.
    pub pareto: bool,
    /// What the model predicts.
    #[serde(flatten)]
    pub prediction: PredictionEntry,
}

/// One placement proven by `bisect-rate`.
#[derive(Clone, Debug, Serialize)]
pub struct ProofEntry {
    /// Its short name.
    pub label: String,
    /// Its placement file.
    pub placement: PathBuf,
    /// The rate predicted.
    pub predicted_rate: f64,
    /// The rate its search sustained; `None`: none.
    pub measured_rate: Option<f64>,
    /// Whether `measured_rate` is only a lower bound (the search never failed above it).
    pub at_least: bool,
    /// How the search ended.
    pub outcome: String,
    /// Post-frame p99 at the sustained rate, ms.
    pub p99_ms: Option<f64>,
}

impl ProofEntry {
    /// `proven`, the prediction named `label` that said `predicted_rate`.
    pub fn new(proven: &Proven, label: &str, predicted_rate: f64) -> ProofEntry {
        ProofEntry {
            label: label.to_string(),
            placement: proven.path.clone(),
            predicted_rate,
            measured_rate: proven.measured,
            at_least: proven.at_least,
            outcome: proven.outcome.clone(),
            p99_ms: proven.p99_ms,
        }
    }
}

/// The placement that won.
#[derive(Clone, Debug, Serialize)]
pub struct WinnerEntry {
    /// Its short name.
    pub label: String,
    /// The placement file written for it.
    pub placement: PathBuf,
    /// What its proof measured; `None`: predicting only.
    pub measured_rate: Option<f64>,
    /// Whether that is only a lower bound.
    pub at_least: bool,
}

/// `admit.json`: how many pipelines of a placement fit at a rate.
#[derive(Clone, Debug, Serialize)]
pub struct AdmitFile {
    pub schema: &'static str,
    /// The placement each pipeline runs.
    pub placement: PathBuf,
    /// The frame shape.
    pub shape: String,
    /// The unit of every rate.
    pub unit: String,
    /// The rate each pipeline is fed.
    pub rate: f64,
    /// The latency budget at that rate, ms.
    pub budget_ms: f64,
    /// The share of each shared resource the pipelines may keep busy.
    pub utilization: f64,
    /// The machine's cores, as calibrated.
    pub cores: f64,
    /// One pipeline, as the model predicts it.
    pub prediction: PredictionEntry,
    /// Pipelines that fit (0: not even one).
    pub pipelines: u64,
    /// The answer in words, as `admit.txt` says it.
    pub conclusion: String,
    /// Why not even one fits on its own terms, when none does.
    pub alone: Option<String>,
    /// Each shared resource's count, fewest first.
    pub fits: Vec<FitEntry>,
    /// What the proof measured, when asked.
    pub proof: Option<ProofOfAdmission>,
}

/// How many pipelines one shared resource holds.
#[derive(Clone, Debug, Serialize)]
pub struct FitEntry {
    /// The resource.
    pub resource: &'static str,
    /// Whole pipelines it holds (at the most counted, it may hold more).
    pub pipelines: u64,
    /// Its capacity and one pipeline's demand, in words.
    pub detail: String,
}

/// What `kplace admit --prove` measured.
#[derive(Clone, Debug, Serialize)]
pub struct ProofOfAdmission {
    /// Pipelines admitted.
    pub pipelines: u64,
    /// With that many pipelines, the rate each sustained.
    pub at_n: Option<f64>,
    /// With one more, the rate each sustained.
    pub at_n_plus_one: Option<f64>,
    /// Whether N sustain the rate and N + 1 do not.
    pub holds: bool,
}

/// What an admission says, and the facts it was asked with.
pub struct AdmitFacts<'a> {
    pub placement: PathBuf,
    pub shape: String,
    pub unit: String,
    pub demand: Demand,
    pub utilization: f64,
    pub cores: f64,
    pub prediction: &'a Prediction,
    pub admission: &'a Admission,
    pub proof: Option<ProofOfAdmission>,
}

impl AdmitFile {
    pub fn new(facts: AdmitFacts<'_>) -> AdmitFile {
        let admission = facts.admission;
        AdmitFile {
            schema: ADMIT_SCHEMA,
            placement: facts.placement,
            shape: facts.shape,
            unit: facts.unit,
            rate: facts.demand.rate,
            budget_ms: facts.demand.budget_ms,
            utilization: facts.utilization,
            cores: facts.cores,
            prediction: facts.prediction.into(),
            pipelines: admission.pipelines,
            conclusion: admission.conclusion(),
            alone: admission.alone.clone(),
            fits: admission
                .fits
                .iter()
                .map(|f| FitEntry {
                    resource: f.resource.name(),
                    pipelines: f.pipelines,
                    detail: f.detail.clone(),
                })
                .collect(),
            proof: facts.proof,
        }
    }
}

impl AtShape<'_> {
    /// Writes `tune.json`: the predictions ranked, the proofs, and the winner with the file
    /// written for it.
    pub(super) fn write_results(
        &self,
        predictions: &Predictions,
        winner: Option<(Winner, PathBuf)>,
    ) -> Result<(), TuneError> {
        let predicted = &predictions.predicted;
        let rank_of = |i: usize| {
            predictions
                .order
                .iter()
                .position(|&o| o == i)
                .unwrap_or(predictions.order.len())
        };
        let file = TuneFile {
            schema: TUNE_SCHEMA,
            graph: self.prepared.graph.name.clone(),
            shape: self.shape.to_string(),
            unit: self.tuner.config.unit().to_string(),
            requested_rate: self.request.rate,
            left_out: predictions.left_out,
            predictions: predicted
                .iter()
                .enumerate()
                .map(|(i, p)| PredictedEntry {
                    label: p.label.clone(),
                    rank: rank_of(i),
                    pareto: predictions.front.contains(&i),
                    prediction: (&p.prediction).into(),
                })
                .collect(),
            proofs: self.proofs.clone(),
            winner: winner.map(|(w, placement)| WinnerEntry {
                label: predicted[w.index].label.clone(),
                placement,
                measured_rate: w.measured,
                at_least: w.at_least,
            }),
        };
        write(
            &self.dir.join("tune.json"),
            &(serde_json::to_string_pretty(&file)? + "\n"),
        )
    }
}

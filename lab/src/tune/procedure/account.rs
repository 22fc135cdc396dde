//! What a shape's tuning says, in the words and tables `kplace tune` prints: the predictions
//! ranked for the request with the Pareto front marked, the proofs' measurements against
//! their predictions, the winner or why there is none, and how a choice beside a co-tenant
//! differs from the one alone. Every rate is in the workload's unit.
//!
//! Guarantees: an [`Account`] hands each part to the caller's [`Progress`] as soon as it is
//! known, and keeps the same text, word for word, for the shape's `tune.txt`.

use std::fmt::Write as _;
use std::path::Path;

use kplace::model::graph::Graph;

use super::Progress;
use crate::bisect::SearchShape;
use crate::tune::space::Candidate;
use crate::tune::{Predicted, Proven, Request, rank};

/// What a tuning said: handed to the caller as it goes, and kept for `tune.txt`.
pub(super) struct Account<'a> {
    progress: &'a dyn Progress,
    text: String,
}

impl<'a> Account<'a> {
    /// An empty account, told to `progress`.
    pub(super) fn new(progress: &'a dyn Progress) -> Account<'a> {
        Account {
            progress,
            text: String::new(),
        }
    }

    /// Says `text`: tells the caller and keeps it.
    pub(super) fn say(&mut self, text: String) {
        self.progress.said(&text);
        self.text += &text;
    }

    /// Everything said, in order.
    pub(super) fn text(&self) -> &str {
        &self.text
    }
}

/// The predictions of `graph` at `shape` (`left_out` placements left out) and their table,
/// the Pareto front `front` marked.
pub(super) fn predictions(
    graph: &Graph,
    shape: &SearchShape,
    predicted: &[Predicted],
    left_out: usize,
    front: &[usize],
    request: &Request,
    unit: &str,
) -> String {
    format!(
        "kplace tune: {} at {shape}: {} placements predicted ({left_out} left out), {} on the Pareto front of rate, latency, cores and GPU share\n{}{PREDICTED}\n",
        graph.name,
        predicted.len(),
        front.len(),
        prediction_table(predicted, front, request, unit)
    )
}

/// What a predicted rate is, said under the predictions' table.
pub(super) const PREDICTED: &str = "(predicted: the rate the pipeline keeps up with, from this \
    machine's calibration of every stage, on a machine that never stalls; what a stream also \
    needs, a sender that keeps its schedule, a p99 within the budget, slots that ride out \
    stalls, is measured by the proofs, not predicted)";

/// The predictions, best first for the request, the Pareto front marked, rates in `unit`.
fn prediction_table(
    predicted: &[Predicted],
    front: &[usize],
    request: &Request,
    unit: &str,
) -> String {
    let order = rank(predicted, request);
    let mut out = format!(
        "| placement | predicted {unit} | bound | post-frame ms | cores | GPU share | Pareto |\n|---|---|---|---|---|---|---|\n",
    );
    for i in order {
        let p = &predicted[i].prediction;
        let _ = writeln!(
            out,
            "| {} | {:.1} | {} | {:.3} | {:.2} | {:.0}% | {} |",
            predicted[i].label,
            p.rate,
            p.bottleneck.name(),
            p.latency_ms,
            p.cores,
            p.gpu_share * 100.0,
            if front.contains(&i) { "yes" } else { "" }
        );
    }
    out
}

/// Predicted against measured for each candidate proven, rates in `unit`.
pub(super) fn proof_table(predicted: &[Predicted], proven: &[Proven], unit: &str) -> String {
    let mut out = format!(
        "| placement | predicted {unit} | measured {unit} | error | p99 at measured, ms | search |\n|---|---|---|---|---|---|\n",
    );
    for p in proven {
        let prediction = &predicted[p.index].prediction;
        // An answer that is only a lower bound says nothing of a prediction above it.
        let (measured, error) = match p.measured {
            None => ("none".to_string(), String::new()),
            Some(m) if p.at_least => (format!("at least {m:.1}"), "not tested".to_string()),
            Some(m) => (
                format!("{m:.1}"),
                format!("{:+.1}%", (prediction.rate / m - 1.0) * 100.0),
            ),
        };
        let _ = writeln!(
            out,
            "| {} | {:.1} | {measured} | {error} | {} | {} |",
            predicted[p.index].label,
            prediction.rate,
            p.p99_ms.map_or(String::new(), |l| format!("{l:.2}")),
            p.outcome
        );
    }
    out
}

/// What the proofs found, should no winner come of them: the fastest proof, or every proof's
/// ending.
pub(super) fn proofs_found(predicted: &[Predicted], proven: &[Proven], unit: &str) -> String {
    match proven
        .iter()
        .filter_map(|p| Some((p, p.measured?)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
    {
        Some((p, m)) => format!(
            ": the fastest proven, {}, sustains {m:.1} {unit}",
            predicted[p.index].label
        ),
        None => format!(
            ": no proof found a rate ({})",
            proven
                .iter()
                .map(|p| format!("{}: {}", predicted[p.index].label, p.outcome))
                .collect::<Vec<_>>()
                .join("; ")
        ),
    }
}

/// The winner `p` at `shape`, measured at `measured` if proven (`at_least`: a lower bound),
/// written to `path`.
pub(super) fn winner(
    shape: &SearchShape,
    p: &Predicted,
    (measured, at_least): (Option<f64>, bool),
    path: &Path,
    unit: &str,
) -> String {
    let at_least = if at_least { "at least " } else { "" };
    format!(
        "kplace tune: at {shape} the winner is {} ({}), written to {}; run it with `kplace run --placement {}`\n",
        p.label,
        measured.map_or_else(
            || format!("predicted {:.1} {unit}, not measured", p.prediction.rate),
            |m| format!(
                "{at_least}{m:.1} {unit} measured, {:.1} predicted",
                p.prediction.rate
            )
        ),
        path.display(),
        path.display()
    )
}

/// No winner at `shape`, predicting only: none of `predicted` is predicted to meet `request`.
pub(super) fn none_predicted(
    shape: &SearchShape,
    predicted: &[Predicted],
    request: &Request,
    unit: &str,
) -> String {
    let fastest = predicted
        .iter()
        .max_by(|a, b| a.prediction.rate.total_cmp(&b.prediction.rate));
    format!(
        "kplace tune: at {shape} no placement is predicted to meet the request ({}){}; \
         nothing written\n",
        request_text(request, unit),
        fastest.map_or_else(String::new, |p| format!(
            ": the fastest, {}, is predicted at {:.1} {unit}",
            p.label, p.prediction.rate
        ))
    )
}

/// No winner at `shape`: no proof met `request`; `found` says what they found instead
/// ([`proofs_found`]).
pub(super) fn none_proven(
    shape: &SearchShape,
    request: &Request,
    found: &str,
    unit: &str,
) -> String {
    format!(
        "kplace tune: at {shape} no placement proven meets the request ({}){found}; \
         nothing written\n",
        request_text(request, unit)
    )
}

/// How the choice `beside` a co-tenant of kind `kind` compares with the one `alone`.
pub(super) fn cotenant_choice(
    graph: &Graph,
    kind: &str,
    alone: &Predicted,
    beside: &Predicted,
) -> String {
    if alone.label == beside.label {
        format!(
            "kplace tune: beside the {kind} co-tenant the choice is the same as alone ({})\n",
            alone.label
        )
    } else {
        format!(
            "kplace tune: beside the {kind} co-tenant the choice is {}; alone it would be {} ({})\n",
            beside.label,
            alone.label,
            differences(graph, &alone.candidate, &beside.candidate)
        )
    }
}

/// The request, in words, rates in `unit`.
fn request_text(request: &Request, unit: &str) -> String {
    let rate = request
        .rate
        .map_or_else(|| "the highest rate".into(), |r| format!("{r} {unit}"));
    match request.latency_budget {
        Some(b) => format!("{rate} within a post-frame latency of {b}"),
        None => rate,
    }
}

/// What moved from placement `a` to `b`: stages' devices and the knobs.
fn differences(graph: &Graph, a: &Candidate, b: &Candidate) -> String {
    let mut parts: Vec<String> = graph
        .stages
        .iter()
        .zip(a.devices.iter().zip(&b.devices))
        .filter(|(_, (x, y))| x != y)
        .map(|(s, (x, y))| format!("{} {x:?} -> {y:?}", s.name))
        .collect();
    if a.workers != b.workers {
        parts.push(format!("workers {} -> {}", a.workers, b.workers));
    }
    if a.slots != b.slots {
        parts.push(format!("slots {} -> {}", a.slots, b.slots));
    }
    if a.gpu_tile != b.gpu_tile {
        parts.push(format!("GPU tile {:?} -> {:?}", a.gpu_tile, b.gpu_tile));
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::model::{Prediction, Resource};
    use crate::tune::space::{Candidate, Where};

    fn predicted(label: &str, rate: f64) -> Predicted {
        Predicted {
            candidate: Candidate {
                devices: vec![Where::Cpu],
                workers: 1,
                slots: 16,
                gpu_tile: None,
            },
            label: label.into(),
            prediction: Prediction {
                rate,
                latency_ms: 0.04,
                bottleneck: Resource::Cores,
                limits: vec![(Resource::Cores, rate)],
                cores: 2.0,
                host_ms: 0.11,
                gpu_share: 0.0,
            },
        }
    }

    fn proven(index: usize, measured: f64, at_least: bool, outcome: &str) -> Proven {
        Proven {
            index,
            path: format!("{index}.yaml").into(),
            measured: Some(measured),
            at_least,
            outcome: outcome.into(),
            p99_ms: Some(0.19),
        }
    }

    /// An answer the sender's limit set is shown as the lower bound it is, and no error is
    /// computed against it; an answer a failing rate bounded is compared as measured.
    #[test]
    fn a_lower_bound_is_never_an_error_of_the_prediction() {
        let table = proof_table(
            &[
                predicted("cccc-w1-s16", 17965.8),
                predicted("cccc-w2-s16", 500.0),
            ],
            &[
                proven(
                    0,
                    405.7,
                    true,
                    "at least 405.7 frames/s: the sender could not offer 410.1 frames/s here",
                ),
                proven(
                    1,
                    400.0,
                    false,
                    "400.0 frames/s, fails at 408.0, width 2.0%",
                ),
            ],
            "frames/s",
        );
        assert!(
            table.contains("| cccc-w1-s16 | 17965.8 | at least 405.7 | not tested | 0.19 |"),
            "{table}"
        );
        assert!(
            table.contains("| cccc-w2-s16 | 500.0 | 400.0 | +25.0% | 0.19 |"),
            "{table}"
        );
        assert!(!table.contains("4328"), "{table}");
        let shape = SearchShape {
            shape: "8x64x4".parse().unwrap(),
            frame_period: None,
            frame_bytes: 8192,
        };
        let p = predicted("cccc-w1-s16", 17965.8);
        let said = winner(
            &shape,
            &p,
            (Some(405.7), true),
            Path::new("t.yaml"),
            "frames/s",
        );
        assert!(
            said.contains("(at least 405.7 frames/s measured, 17965.8 predicted)"),
            "{said}"
        );
    }
}

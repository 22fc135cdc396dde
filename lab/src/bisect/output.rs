//! What a sweep prints and writes: the table's rows, the spread of repeated searches (beside
//! the machine's own), the per-search CSV files and the machine's facts.

use std::path::Path;

use kplace::model::shape::FrameShape;
use serde_json::{Value, json};

use super::{BisectConfig, BisectError, SearchShape, TrialRun};
use crate::rate::sweep::{Comparison, SearchEntry, Spread, SweepFile, TrialStatus};
use crate::rate::{Failure, Judgement, Stage, relative_spread};

/// Per system and frame shape searched more than once: the spread of the sustained rates, and the
/// machine's own spread over the same searches (every steadiness probe's median, and every
/// bound measured beside them, whichever spread more): when the
/// rates spread no more than the machine did, the difference between searches is within the
/// machine's noise.
pub fn spreads(searches: &[SearchEntry]) -> Vec<Spread> {
    let mut groups: Vec<(&str, &FrameShape, Vec<&SearchEntry>)> = Vec::new();
    for s in searches.iter().filter(|s| s.skipped.is_none()) {
        match groups
            .iter_mut()
            .find(|(system, shape, _)| *system == s.system && **shape == s.shape)
        {
            Some((_, _, members)) => members.push(s),
            None => groups.push((&s.system, &s.shape, vec![s])),
        }
    }
    groups
        .into_iter()
        .filter(|(_, _, members)| members.len() > 1)
        .map(|(system, cpi, members)| {
            let mut rates: Vec<f64> = members.iter().filter_map(|s| s.sustained_rate).collect();
            rates.sort_by(f64::total_cmp);
            let probes: Vec<f64> = members
                .iter()
                .flat_map(|s| s.probes.iter().map(|p| p.probe.median_us))
                .collect();
            let bound = |key: &str| -> Vec<f64> {
                members
                    .iter()
                    .filter_map(|s| s.bounds.as_ref())
                    .flat_map(|b| ["before", "after"].map(|side| b[side][key].as_f64()))
                    .flatten()
                    .collect()
            };
            let spread = relative_spread(&rates);
            let probe_spread = relative_spread(&probes);
            let bounds_spread = [
                relative_spread(&bound("kernel_only_per_s")),
                relative_spread(&bound("ingest_only_per_s")),
            ]
            .into_iter()
            .flatten()
            .reduce(f64::max);
            let machine_spread = [probe_spread, bounds_spread]
                .into_iter()
                .flatten()
                .reduce(f64::max);
            Spread {
                system: system.to_string(),
                shape: cpi.clone(),
                searches: members.len(),
                measured: rates.len(),
                min: rates.first().copied(),
                median: rates.get(rates.len() / 2).copied(),
                max: rates.last().copied(),
                spread,
                probe_spread,
                bounds_spread,
                machine_spread,
                within_noise: matches!((spread, machine_spread), (Some(r), Some(m)) if r <= m),
            }
        })
        .collect()
}

/// One spread as the sweep prints it.
pub fn spread_line(s: &Spread, unit: &str) -> String {
    let pct = |v: Option<f64>| v.map_or("n/a".to_string(), |v| format!("{:.1}%", v * 100.0));
    let rate = |v: Option<f64>| v.map_or("n/a".to_string(), |v| format!("{v:.1}"));
    format!(
        "spread {} {}: {} searches, {} measured, sustained {unit} min {}, median {}, max {}, (max - min) / median {}; machine's spread {} (probe {}, bounds {}){}",
        s.system,
        s.shape,
        s.searches,
        s.measured,
        rate(s.min),
        rate(s.median),
        rate(s.max),
        pct(s.spread),
        pct(s.machine_spread),
        pct(s.probe_spread),
        pct(s.bounds_spread),
        if s.within_noise {
            ": within the machine's noise"
        } else {
            ""
        }
    )
}

/// Systems searched side by side: each one's answer over the first's, with the interval the
/// bounds allow.
pub fn comparisons(group: &[SearchEntry]) -> Vec<Comparison> {
    let Some((base, others)) = group.split_first() else {
        return Vec::new();
    };
    let Some(base_goal) = base.goals.first() else {
        return Vec::new();
    };
    others
        .iter()
        .filter_map(|s| {
            let goal = s.goals.first()?;
            let over = |a: Option<f64>, b: Option<f64>| Some(a? / b?);
            Some(Comparison {
                shape: s.shape.clone(),
                repeat: s.repeat,
                goal: goal.goal.name.clone(),
                system: s.system.clone(),
                baseline: base.system.clone(),
                ratio: over(goal.lower, base_goal.lower),
                ratio_low: over(goal.lower, base_goal.upper),
                ratio_high: over(goal.upper, base_goal.lower),
            })
        })
        .collect()
}

/// One comparison as the sweep prints it.
pub fn comparison_line(c: &Comparison) -> String {
    let num = |v: Option<f64>| v.map_or("n/a".to_string(), |v| format!("{v:.3}"));
    format!(
        "ratio {} #{} ({} goal): {} / {} = {} (bounds allow {} to {})",
        c.shape,
        c.repeat,
        c.goal,
        c.system,
        c.baseline,
        num(c.ratio),
        num(c.ratio_low),
        num(c.ratio_high)
    )
}

/// The sweep's table: a header (with the bounds' columns when `with_bounds`), its rows, and a
/// line per spread of repeated searches and per comparison of systems searched side by side.
pub fn table(file: &SweepFile, rows: &[String], with_bounds: bool) -> String {
    let searched = file.searches.iter().find(|s| s.skipped.is_none());
    let unit = searched.map_or("frames/s", |s| s.unit.as_str());
    let goals: Vec<&str> = searched
        .map(|s| s.goals.iter().map(|g| g.goal.name.as_str()).collect())
        .unwrap_or_default();
    let first = goals.first().copied().unwrap_or("first");
    let bounds_header = if with_bounds {
        format!(" ingest-only {unit} | kernel-only {unit} | sustained / min(bounds) |")
    } else {
        String::new()
    };
    let mut text = format!(
        "| system | frame | {first} goal, {unit} | other goals, {unit} | bounds (lower, upper) | latency budget | Gbit/s | post-frame p50 ms | post-frame p99.9 ms | cores used | trials, time, answer |{bounds_header}\n|---|---|---|---|---|---|---|---|---|---|---|{}\n",
        if with_bounds { "---|---|---|" } else { "" }
    );
    for row in rows {
        text += row;
        text.push('\n');
    }
    if !file.spreads.is_empty() || !file.comparisons.is_empty() {
        text.push('\n');
        for spread in &file.spreads {
            text += &spread_line(spread, unit);
            text.push('\n');
        }
        for comparison in &file.comparisons {
            text += &comparison_line(comparison);
            text.push('\n');
        }
    }
    text
}

/// One row of the sweep's table.
pub fn table_row(label: &str, shape: &SearchShape, s: &SearchEntry, with_bounds: bool) -> String {
    let rate = |v: Option<f64>| v.map_or("none".to_string(), |v| format!("{v:.1}"));
    let answer = s.goals.first();
    let bracket = format!(
        "{}, {}",
        rate(answer.and_then(|g| g.lower)),
        rate(answer.and_then(|g| g.upper))
    );
    let others = s
        .goals
        .iter()
        .skip(1)
        .map(|g| format!("{} {}", g.goal.name, rate(g.lower)))
        .collect::<Vec<_>>()
        .join(", ");
    let budget = s.latency_budget.to_string();
    let trials = s.trials.len();
    let invalid = s
        .trials
        .iter()
        .filter(|t| t.status == TrialStatus::Invalid)
        .count();
    let trials = if invalid > 0 {
        format!("{trials} ({invalid} unoffered)")
    } else {
        trials.to_string()
    };
    let time = format!("{:.0} s", s.wall_seconds);
    let outcome = &s.outcome;
    // The last full-length trial at the answer: its latency and CPU use.
    let at_result = s.sustained_rate.and_then(|r| {
        s.trials
            .iter()
            .rev()
            .find(|t| t.rate == r && t.stage == Stage::Final && t.loss_ratio.is_some())
    });
    let num = |v: Option<f64>| v.map_or("n/a".to_string(), |x| format!("{x:.2}"));
    let gbit = |rate: f64| format!("{:.2}", rate * (shape.frame_bytes * 8) as f64 / 1e9);
    let shape = &s.shape;
    let mut row = match (s.sustained_rate, at_result) {
        (Some(rate), Some(t)) => format!(
            "| {label} | {shape} | {rate:.1} | {others} | {bracket} | {budget} | {} | {} | {} | {} | {trials}, {time}, {outcome} |",
            gbit(rate),
            num(t.latency.as_ref().map(|l| l.p50_ms)),
            num(t.latency.as_ref().map(|l| l.p999_ms)),
            num(t.cores_used),
        ),
        _ => format!(
            "| {label} | {shape} | none | {others} | {bracket} | {budget} | | | | | {trials}, {time}, {outcome} |"
        ),
    };
    if with_bounds {
        let bounds = s.bounds.as_ref();
        let mean = |key: &str| {
            let side = |side: &str| bounds.and_then(|b| b[side][key].as_f64());
            match (side("before"), side("after")) {
                (Some(a), Some(b)) => Some((a + b) / 2.0),
                (a, b) => a.or(b),
            }
        };
        let show = |r: Option<f64>| r.map_or("n/a".to_string(), |r| format!("{r:.1}"));
        let ratio = bounds
            .and_then(|b| b["sustained_over_min_bound"].as_f64())
            .map_or("n/a".to_string(), |r| format!("{r:.3}"));
        row += &format!(
            " {} | {} | {ratio} |",
            show(mean("ingest_only_per_s")),
            show(mean("kernel_only_per_s"))
        );
    }
    row
}

/// Writes one search's trials to `out/trials-NAME-FRAME-REPEAT.csv` (the frame: its shape, as
/// a recording's shape), a row per trial.
pub(super) fn write_csv(
    out: &Path,
    name: &str,
    frame: &str,
    repeat: u32,
    runs: &[TrialRun],
    config: &BisectConfig,
) -> Result<(), BisectError> {
    let path = out.join(format!("trials-{name}-{frame}-{repeat}.csv"));
    let file = kplace::os::write::WholeFile::create(&path, kplace::os::write::Kind::File)?;
    let csv_error = |source| BisectError::Csv {
        path: path.clone(),
        error: source,
    };
    let mut csv = csv::Writer::from_writer(file);
    csv.write_record([
        "trial",
        "rate",
        "goal",
        "stage",
        "phase",
        "duration_s",
        "loss_ratio",
        "status",
        "processed_rate",
        "post_frame_p99_ms",
        "frames_sent",
        "frames_completed",
        "partial",
        "dropped",
        "over_budget",
        "sender_max_lag_ms",
        "failures",
    ])
    .map_err(csv_error)?;
    let goals = config.search_goals();
    for (i, t) in runs.iter().enumerate() {
        let m = t.measurement.as_ref();
        let status = match &t.judgement {
            Judgement::Invalid(_) => "invalid",
            j if j.passed() => "passed",
            _ => "failed",
        };
        let why = match &t.judgement {
            Judgement::Invalid(why) => why.clone(),
            Judgement::Verdict(v) => v
                .failures
                .iter()
                .map(Failure::to_string)
                .collect::<Vec<_>>()
                .join("; "),
        };
        csv.write_record([
            i.to_string(),
            format!("{:.3}", t.rate),
            t.request
                .and_then(|r| goals.get(r.goal))
                .map_or_else(String::new, |g| g.name.clone()),
            t.request.map_or_else(String::new, |r| match r.stage {
                Stage::Coarse => "coarse".into(),
                Stage::Final => "final".into(),
            }),
            t.request.map_or_else(String::new, |r| r.phase.to_string()),
            format!("{:.3}", t.duration_s),
            t.loss_ratio.map_or_else(String::new, |l| format!("{l:.6}")),
            status.to_string(),
            format!("{:.3}", m.map_or(0.0, |m| m.processed_rate)),
            format!(
                "{:.3}",
                m.map_or(0.0, |m| m.post_frame_p99.as_secs_f64() * 1e3)
            ),
            m.map_or(0, |m| m.frames_sent).to_string(),
            m.map_or(0, |m| m.frames_completed).to_string(),
            m.map_or(0, |m| m.partial_frames).to_string(),
            m.map_or(0, |m| m.dropped_frames).to_string(),
            m.map_or(0, |m| m.frames_over_budget).to_string(),
            t.sender
                .as_ref()
                .map_or(String::new(), |s| format!("{:.3}", s.max_lag_ms)),
            why,
        ])
        .map_err(csv_error)?;
    }
    let file = csv.into_inner().map_err(|e| BisectError::Io {
        action: "write",
        path: path.clone(),
        error: e.into_error(),
    })?;
    Ok(file.commit()?)
}

/// The text of `/proc` file `path`, when it can be read (within its bound).
pub fn proc_file(path: &str) -> Option<String> {
    let limit = kplace::os::files::MAX_PROC_BYTES;
    kplace::os::files::read_text_bounded(Path::new(path), limit, "system file").ok()
}

/// The CPU's model name, from `/proc/cpuinfo`.
pub fn cpu_model() -> Option<String> {
    proc_file("/proc/cpuinfo").and_then(|t| {
        t.lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split(':').nth(1))
            .map(|s| s.trim().to_string())
    })
}

/// The machine the results come from.
pub fn machine_facts() -> Value {
    let cpu = cpu_model();
    let kernel = proc_file("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string());
    json!({
        "cpu": cpu,
        "cores": std::thread::available_parallelism().map(|n| n.get()).ok(),
        "kernel": kernel,
        "gpu": Value::Null,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn search(system: &str, sustained: Option<f64>, probe_medians: &[f64]) -> SearchEntry {
        use crate::rate::sweep::ProbeEntry;
        use crate::rate::{LatencyBudget, Probe, SteadyLimits};
        SearchEntry {
            system: system.into(),
            placement: None,
            sut_cmd: None,
            shape: "1024x128".parse().unwrap(),
            repeat: 0,
            skipped: None,
            unit: "frames/s".into(),
            real_time_rate: 156.25,
            latency_budget: LatencyBudget::OneFramePeriod,
            start_rate: 156.25,
            pipelines: 1,
            pipeline_mode: "thread".into(),
            sustained_rate: sustained,
            aggregate_sustained_rate: sustained,
            outcome: "regular".into(),
            outcome_kind: "regular".into(),
            goals: Vec::new(),
            loads: Vec::new(),
            trial_seconds: 0.0,
            wall_seconds: 0.0,
            sender_ceiling: None,
            probes: probe_medians
                .iter()
                .map(|&m| {
                    let probe = Probe::from_samples("before", &[m; 5]);
                    ProbeEntry {
                        steadiness: probe.judge(None, &SteadyLimits::default()),
                        probe,
                    }
                })
                .collect(),
            bounds: None,
            cotenant: None,
            trials: Vec::new(),
        }
    }

    /// Trial reports and results are read back from JSON text: a rate must come back as the
    /// very f64 written, or a rate found in one file would not match itself in another.
    #[test]
    fn rates_survive_the_json_round_trip_exactly() {
        // Geometric midpoints like the search's, from one whose double once came back 1 ulp off.
        let mut rate = 40.0_f64 * 2f64.sqrt();
        for _ in 0..2000 {
            for value in [rate, 2.0 * rate, rate / 3.0] {
                let back: f64 = serde_json::from_str(&serde_json::to_string(&value).unwrap())
                    .expect("a number");
                assert_eq!(back.to_bits(), value.to_bits(), "{value}");
            }
            rate = rate * (1.0 + rate.fract() / 10.0).sqrt();
        }
    }

    #[test]
    fn repeated_searches_report_their_spread_beside_the_machines() {
        let searches = [
            search("all-cpu", Some(400.0), &[300.0, 330.0]),
            search("all-cpu", Some(500.0), &[300.0, 310.0]),
            search("all-cpu", None, &[450.0, 300.0]),
            search("all-cpu", Some(450.0), &[300.0, 300.0]),
            search("once", Some(100.0), &[300.0]),
        ];
        let spreads = spreads(&searches);
        assert_eq!(spreads.len(), 1, "a system searched once has no spread");
        let s = &spreads[0];
        assert_eq!((s.searches, s.measured), (4, 3));
        assert_eq!(
            (s.min, s.median, s.max),
            (Some(400.0), Some(450.0), Some(500.0))
        );
        assert!((s.spread.unwrap() - 100.0 / 450.0).abs() < 1e-12);
        // Probe medians 300..450 around a median of 300: the machine spread 50%.
        assert!((s.machine_spread.unwrap() - 0.5).abs() < 1e-12);
        assert!(s.within_noise);
        let line = spread_line(s, "frames/s");
        assert_eq!(
            line,
            "spread all-cpu 1024x128: 4 searches, 3 measured, sustained frames/s min 400.0, median 450.0, \
             max 500.0, (max - min) / median 22.2%; machine's spread 50.0% (probe 50.0%, bounds n/a): \
             within the machine's noise"
        );

        // A steady machine: the same rates are not within its noise.
        let steady = [
            search("all-cpu", Some(400.0), &[300.0, 301.0]),
            search("all-cpu", Some(500.0), &[300.0, 302.0]),
        ];
        let s = &super::spreads(&steady)[0];
        assert!(!s.within_noise && !spread_line(s, "frames/s").contains("within"));

        // The same steady probes, but the kernels alone ran 30% faster after a search than
        // before it (a spread of 300 / 1300): the machine moved more than the rates did.
        let mut moved = steady.clone();
        moved[0].bounds = Some(json!({
            "before": {"kernel_only_per_s": 1000.0, "ingest_only_per_s": 900.0},
            "after": {"kernel_only_per_s": 1300.0, "ingest_only_per_s": 905.0},
        }));
        let s = &super::spreads(&moved)[0];
        assert!(
            (s.bounds_spread.unwrap() - 300.0 / 1300.0).abs() < 1e-12,
            "{s:?}"
        );
        assert_eq!(s.machine_spread, s.bounds_spread);
        assert!(s.within_noise, "{}", spread_line(s, "frames/s"));
    }
}

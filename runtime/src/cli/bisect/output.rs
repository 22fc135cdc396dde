//! What a sweep prints and writes: the table's rows, the spread of repeated searches, the
//! per-search CSV files and the machine's facts.

use std::fs;
use std::io::Write;
use std::path::Path;

use anyhow::Context;
use kplace::rate::Failure;
use kplace_radar::Cpi;
use serde_json::{Value, json};

use super::TrialRun;
use super::bounds::Bounds;

/// Per system and CPI searched more than once: the spread of the sustained rates, and, where
/// bounds were measured, of the ratios sustained / min(bounds) and of the bounds themselves
/// (every measurement, before and after each search): how far the machine's own speed moved
/// while the searches ran.
pub(super) fn spreads(results: &[Value]) -> Vec<String> {
    struct Group<'a> {
        system: &'a str,
        cpi: &'a str,
        rates: Vec<f64>,
        ratios: Vec<f64>,
        kernel_only: Vec<f64>,
        ingest_only: Vec<f64>,
    }
    let mut groups: Vec<Group<'_>> = Vec::new();
    for r in results {
        let (Some(system), Some(cpi)) = (r["system"].as_str(), r["cpi"].as_str()) else {
            continue;
        };
        let group = match groups
            .iter()
            .position(|g| g.system == system && g.cpi == cpi)
        {
            Some(i) => &mut groups[i],
            None => {
                groups.push(Group {
                    system,
                    cpi,
                    rates: Vec::new(),
                    ratios: Vec::new(),
                    kernel_only: Vec::new(),
                    ingest_only: Vec::new(),
                });
                groups.last_mut().expect("just pushed")
            }
        };
        group.rates.extend(r["sustained_cpi_per_s"].as_f64());
        let bounds = &r["bounds"];
        group
            .ratios
            .extend(bounds["sustained_over_min_bound"].as_f64());
        for side in ["before", "after"] {
            group
                .kernel_only
                .extend(bounds[side]["kernel_only_cpi_per_s"].as_f64());
            group
                .ingest_only
                .extend(bounds[side]["ingest_only_cpi_per_s"].as_f64());
        }
    }
    groups
        .into_iter()
        .filter(|g| g.rates.len() > 1)
        .map(|g| {
            let mut line = format!(
                "spread {} {}: {} searches, sustained CPI/s {}",
                g.system,
                g.cpi,
                g.rates.len(),
                spread(g.rates, 1)
            );
            if g.ratios.len() > 1 {
                line += &format!("; sustained / min(bounds) {}", spread(g.ratios, 3));
            }
            for (name, values) in [
                ("kernel-only", g.kernel_only),
                ("ingest-only", g.ingest_only),
            ] {
                if values.len() > 1 {
                    line += &format!(
                        "; {name} bound over {} measurements, CPI/s {}",
                        values.len(),
                        spread(values, 1)
                    );
                }
            }
            line
        })
        .collect()
}

/// "min A, median B, max C, (max - min) / median D%" of `values` (not empty), with `digits`
/// decimals.
fn spread(mut values: Vec<f64>, digits: usize) -> String {
    values.sort_by(f64::total_cmp);
    let median = values[values.len() / 2];
    let (low, high) = (values[0], values[values.len() - 1]);
    format!(
        "min {low:.digits$}, median {median:.digits$}, max {high:.digits$}, (max - min) / median {:.1}%",
        (high - low) / median * 100.0
    )
}

pub(super) fn table_row(
    label: &str,
    cpi: Cpi,
    sustained: Option<f64>,
    report: Option<&Value>,
    bounds: Option<Bounds>,
    trials: usize,
    outcome: &str,
) -> String {
    let num = |v: &Value| v.as_f64().map_or("n/a".to_string(), |x| format!("{x:.2}"));
    let mut row = match (sustained, report) {
        (Some(rate), Some(r)) => format!(
            "| {label} | {cpi} | {rate:.1} | {} | {} | {} | {} | {trials}, {outcome} |",
            num(&r["input_gbit_per_s"]),
            num(&r["latency"]["post_cpi"]["p50_ms"]),
            num(&r["latency"]["post_cpi"]["p999_ms"]),
            num(&r["cores_used"]),
        ),
        (Some(rate), None) => format!(
            "| {label} | {cpi} | {rate:.1} | {:.2} | n/a | n/a | n/a | {trials}, {outcome} |",
            rate * (cpi.cells() * 4 * 8) as f64 / 1e9
        ),
        _ => format!("| {label} | {cpi} | none | | | | | {trials}, {outcome} |"),
    };
    if let Some(b) = bounds {
        let show = |r: Option<f64>| r.map_or("n/a".to_string(), |r| format!("{r:.1}"));
        let ratio = b
            .ratio(sustained)
            .map_or("n/a".to_string(), |r| format!("{r:.3}"));
        row += &format!(
            " {} | {} | {ratio} |",
            show(b.ingest_only),
            show(b.kernel_only)
        );
    }
    row
}

pub(super) fn write_csv(
    out: &Path,
    name: &str,
    cpi: Cpi,
    repeat: u32,
    runs: &[TrialRun],
) -> anyhow::Result<()> {
    let path = out.join(format!("trials-{name}-{cpi}-{repeat}.csv"));
    let mut file =
        fs::File::create(&path).with_context(|| format!("cannot create {}", path.display()))?;
    writeln!(
        file,
        "trial,rate,phase,passed,processed_rate,post_cpi_p99_ms,frames_sent,frames_completed,partial,dropped,failures"
    )?;
    for (i, t) in runs.iter().enumerate() {
        let m = t.measurement.as_ref();
        writeln!(
            file,
            "{i},{:.3},{},{},{:.3},{:.3},{},{},{},{},\"{}\"",
            t.rate,
            t.phase,
            t.verdict.is_pass(),
            m.map_or(0.0, |m| m.processed_rate),
            m.map_or(0.0, |m| m.post_cpi_p99.as_secs_f64() * 1e3),
            m.map_or(0, |m| m.frames_sent),
            m.map_or(0, |m| m.frames_completed),
            m.map_or(0, |m| m.partial_frames),
            m.map_or(0, |m| m.dropped_frames),
            t.verdict
                .failures
                .iter()
                .map(Failure::to_string)
                .collect::<Vec<_>>()
                .join("; ")
                .replace('"', "'")
        )?;
    }
    Ok(())
}

/// The machine the results come from.
pub(super) fn machine_facts() -> Value {
    let cpu = fs::read_to_string("/proc/cpuinfo").ok().and_then(|t| {
        t.lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split(':').nth(1))
            .map(|s| s.trim().to_string())
    });
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .map(|s| s.trim().to_string());
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

    fn result(system: &str, sustained: f64, kernel: [f64; 2], ingest: [f64; 2]) -> Value {
        json!({
            "system": system, "cpi": "1024x128", "sustained_cpi_per_s": sustained,
            "bounds": {
                "sustained_over_min_bound": sustained / kernel.iter().sum::<f64>() * 2.0,
                "before": {"kernel_only_cpi_per_s": kernel[0], "ingest_only_cpi_per_s": ingest[0]},
                "after": {"kernel_only_cpi_per_s": kernel[1], "ingest_only_cpi_per_s": ingest[1]},
            },
        })
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
    fn repeated_searches_report_their_spread_and_the_machines() {
        let results = [
            result("all-cpu", 400.0, [1000.0, 1000.0], [2000.0, 2000.0]),
            result("all-cpu", 500.0, [1250.0, 1250.0], [2000.0, 2000.0]),
            result("all-cpu", 450.0, [1000.0, 1500.0], [2000.0, 2000.0]),
            result("once", 100.0, [1000.0, 1000.0], [2000.0, 2000.0]),
        ];
        let lines = spreads(&results);
        assert_eq!(
            lines.len(),
            1,
            "a system searched once has no spread: {lines:?}"
        );
        let line = &lines[0];
        for part in [
            "spread all-cpu 1024x128: 3 searches, sustained CPI/s min 400.0, median 450.0, max 500.0, (max - min) / median 22.2%",
            "sustained / min(bounds) min 0.360, median 0.400, max 0.400, (max - min) / median 10.0%",
            "kernel-only bound over 6 measurements, CPI/s min 1000.0, median 1250.0, max 1500.0, (max - min) / median 40.0%",
            "ingest-only bound over 6 measurements, CPI/s min 2000.0, median 2000.0, max 2000.0, (max - min) / median 0.0%",
        ] {
            assert!(line.contains(part), "{part}\nnot in\n{line}");
        }
    }
}

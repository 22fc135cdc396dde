//! The plots of a sweep built in code, parsed back as SVG: every series, marker, bar and
//! curve must match the data, and no two labels may overlap (by the layout's width estimate
//! here; `render` measures them as rendered, with real fonts).

mod inputs;
mod render;

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use crate::rate::sweep::{
    SCHEMA, SearchEntry, StageTime, SweepFile, TrialEntry, TrialLatency, TrialStatus,
};
use crate::rate::{Class, Ending, Goal, GoalResult, LatencyBudget, LoadEntry, Stage};
use base64::Engine as _;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Serializer as _, V2DeflateSerializer};
use plotters::style::RGBColor;

use super::frame::WIDTH;
use super::style::{DOT_SIZE, Fill, MARKER_SIZE, REFERENCE, series_style};
use super::{FILES, write_all};

/// The colour of series `i`, as the SVG writes it.
fn series_hex(i: usize) -> String {
    hex(series_style(i).colour)
}

/// Markers of colour `c` in the data area: (filled, outlined but not struck (a dot at the
/// centre or none), struck).
fn markers(els: &[El], c: &str) -> (usize, usize, usize) {
    let data: Vec<&El> = els.iter().filter(|e| in_data(e)).collect();
    // A filled marker, not the dot at the centre of an undecided one.
    let filled = data
        .iter()
        .filter(|e| (e.tag == "circle" || e.tag == "polygon") && e.attr("fill") == c)
        .filter(|e| e.tag != "circle" || e.num("r") != f64::from(DOT_SIZE))
        .count();
    let outlines = data
        .iter()
        .filter(|e| {
            (e.tag == "circle" && e.attr("fill") == "none" && e.attr("stroke") == c)
                || (e.tag == "polyline" && e.attr("stroke") == c && e.points().len() >= 4)
        })
        .count();
    let strikes = data
        .iter()
        .filter(|e| e.tag == "polyline" && e.attr("stroke") == c && e.points().len() == 2)
        .count();
    (filled, outlines - strikes, strikes)
}

/// The x where the legend panel starts: data is drawn left of it.
const LEGEND_X: f64 = 710.0;

/// A histogram of `values_us` microseconds, serialized as the reports carry it.
fn histogram(values_us: &[u64]) -> String {
    let mut h = Histogram::<u64>::new_with_bounds(1_000, 3_600_000_000_000, 3).unwrap();
    for v in values_us {
        h.record(v * 1_000).unwrap();
    }
    let mut bytes = Vec::new();
    V2DeflateSerializer::new()
        .serialize(&h, &mut bytes)
        .unwrap();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn stage(name: &str, device: &str, ms: f64, gpu: Option<f64>) -> StageTime {
    StageTime {
        name: name.into(),
        device: device.into(),
        per_frame_ms: ms,
        gpu_ms_per_frame: gpu,
    }
}

fn trial(rate: f64, status: TrialStatus, p99: Option<f64>, hist: Option<String>) -> TrialEntry {
    TrialEntry {
        rate,
        phase: "start".into(),
        goal: "robust".into(),
        stage: Stage::Final,
        duration_s: 2.0,
        loss_ratio: match status {
            TrialStatus::Passed => Some(0.0),
            TrialStatus::Failed => Some(0.5),
            TrialStatus::Invalid => None,
        },
        status,
        failures: if status == TrialStatus::Failed {
            vec!["post-frame p99 exceeds the budget".into()]
        } else {
            Vec::new()
        },
        invalid: (status == TrialStatus::Invalid).then(|| "sender stalled".into()),
        budget_ms: 6.4,
        measurement: None,
        latency: p99.map(|p99_ms| TrialLatency {
            p50_ms: p99_ms / 2.0,
            p99_ms,
            p999_ms: p99_ms * 1.5,
            histogram: hist,
        }),
        stages: Vec::new(),
        cores_used: None,
        sender: None,
        report: None,
    }
}

fn search(system: &str, cpi: &str, repeat: u32, sustained: Option<f64>) -> SearchEntry {
    let (real_time, deadline_us, start) = match cpi {
        "1024x128" => (156.25, 6_400, 100.0),
        _ => (39.0625, 25_600, 20.0),
    };
    SearchEntry {
        system: system.into(),
        placement: None,
        sut_cmd: None,
        shape: cpi.parse().unwrap(),
        repeat,
        skipped: None,
        unit: "CPI/s".into(),
        real_time_rate: real_time,
        latency_budget: LatencyBudget::Deadline {
            frame_period: Duration::from_micros(deadline_us),
        },
        start_rate: start,
        pipelines: 1,
        pipeline_mode: "thread".into(),
        sustained_rate: sustained,
        aggregate_sustained_rate: sustained,
        outcome: String::new(),
        outcome_kind: if sustained.is_some() {
            "regular".into()
        } else {
            "min_load".into()
        },
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

/// The robust and strict goals' results of a search whose robust answer is `answer` (failing
/// 2% above it) and strict one 0.9 times it, with the loads of `trials` classified: below
/// the answer low-loss, at or above it as the trials say.
fn answered(s: &mut SearchEntry, answer: f64) {
    let goal = |g: Goal, lower: f64, upper: f64| GoalResult {
        goal: g,
        lower: Some(lower),
        upper: Some(upper),
        conditional_throughput: Some(lower),
        trials_at_lower: 3,
        seconds_at_lower: 6.0,
        ending: Ending::Regular,
    };
    s.goals = vec![
        goal(Goal::robust(2.0, 0.02), answer, answer * 1.02),
        goal(Goal::strict(2.0, 0.02), answer * 0.9, answer),
    ];
    let mut loads: Vec<f64> = s.trials.iter().map(|t| t.rate).collect();
    loads.extend([answer * 0.9, answer * 1.02]);
    loads.sort_by(f64::total_cmp);
    loads.dedup();
    s.loads = loads
        .into_iter()
        .map(|load| {
            let class = |lower: f64| {
                if load <= lower {
                    Class::Lower
                } else if load > lower * 1.5 || load <= lower * 1.02 + 1e-9 {
                    Class::Upper
                } else {
                    Class::Undecided
                }
            };
            LoadEntry {
                load,
                trials: 1,
                seconds: 2.0,
                unoffered: 0,
                classes: vec![class(answer), class(answer * 0.9)],
            }
        })
        .collect();
}

/// Two systems at two CPIs: all-cpu three times and gpu-fft twice at 1024x128; at 2048x256
/// all-cpu once (no rate, no histogram) and gpu-fft once; numpy skipped.
fn sweep() -> SweepFile {
    use TrialStatus::{Failed, Invalid, Passed};
    let cpu_stages = vec![
        stage("range_fft", "cpu", 1.5, None),
        stage("doppler_fft", "cpu", 0.9, None),
        stage("cfar", "cpu", 0.6, None),
    ];
    let gpu_stages = vec![
        stage("range_fft", "gpu0", 0.05, Some(0.2)),
        stage("doppler_fft", "gpu0", 0.04, Some(0.1)),
        stage("cfar", "cpu", 0.3, None),
    ];
    let mut searches = Vec::new();
    for (repeat, sustained) in [(0, 400.0), (1, 450.0), (2, 420.0)] {
        let mut s = search("all-cpu", "1024x128", repeat, Some(sustained));
        s.trials = vec![
            trial(100.0, Invalid, Some(40.0), None),
            trial(
                100.0,
                Passed,
                Some(3.0),
                Some(histogram(&[2_000, 2_500, 3_000, 4_000])),
            ),
            trial(200.0, Passed, Some(4.0), None),
            trial(sustained, Passed, Some(5.5), None),
            trial(800.0, Failed, Some(250.0), None),
            trial(600.0, Failed, None, None),
        ];
        s.trials[3].stages = cpu_stages.clone();
        answered(&mut s, sustained);
        searches.push(s);
    }
    for (repeat, sustained) in [(0, 3000.0), (1, 3200.0)] {
        let mut s = search("gpu-fft", "1024x128", repeat, Some(sustained));
        s.trials = vec![
            trial(
                100.0,
                Passed,
                Some(0.8),
                Some(histogram(&[500, 600, 700, 900, 1_200])),
            ),
            trial(sustained, Passed, Some(2.0), None),
            trial(6400.0, Failed, Some(900.0), None),
        ];
        s.trials[1].stages = gpu_stages.clone();
        searches.push(s);
    }
    let mut unsteady = search("all-cpu", "2048x256", 0, None);
    unsteady.trials = vec![
        trial(20.0, Invalid, None, None),
        trial(20.0, Failed, Some(30.0), None),
    ];
    searches.push(unsteady);
    let mut gpu = search("gpu-fft", "2048x256", 0, Some(900.0));
    gpu.trials = vec![
        trial(
            20.0,
            Passed,
            Some(6.0),
            Some(histogram(&[4_000, 5_000, 9_000])),
        ),
        trial(900.0, Passed, Some(12.0), None),
        trial(1000.0, Failed, Some(60.0), None),
    ];
    gpu.trials[1].stages = gpu_stages;
    searches.push(gpu);
    let mut skipped = search("numpy", "2048x256", 0, None);
    skipped.skipped = Some("python3 not found".into());
    searches.push(skipped);
    SweepFile {
        schema: SCHEMA.into(),
        machine: serde_json::json!({"cpu": "test"}),
        settings: serde_json::json!({}),
        searches,
        spreads: Vec::new(),
        comparisons: Vec::new(),
    }
}

/// An SVG element as the tests look at it.
#[derive(Debug, Clone)]
struct El {
    tag: String,
    attrs: HashMap<String, String>,
    text: String,
}

impl El {
    fn num(&self, name: &str) -> f64 {
        self.attrs
            .get(name)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{self:?} has no numeric {name}"))
    }
    fn attr(&self, name: &str) -> &str {
        self.attrs.get(name).map_or("", String::as_str)
    }
    /// Polyline points.
    fn points(&self) -> Vec<(f64, f64)> {
        self.attr("points")
            .split_whitespace()
            .map(|p| {
                let (x, y) = p.split_once(',').unwrap();
                (x.parse().unwrap(), y.parse().unwrap())
            })
            .collect()
    }
}

fn parse(path: &Path) -> Vec<El> {
    let text = std::fs::read_to_string(path).unwrap();
    let doc = roxmltree::Document::parse(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    doc.descendants()
        .filter(|n| n.is_element())
        .map(|n| El {
            tag: n.tag_name().name().to_string(),
            attrs: n
                .attributes()
                .map(|a| (a.name().to_string(), a.value().to_string()))
                .collect(),
            text: n.text().unwrap_or_default().trim().to_string(),
        })
        .collect()
}

fn hex(c: RGBColor) -> String {
    format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
}

fn texts(els: &[El]) -> Vec<&El> {
    els.iter().filter(|e| e.tag == "text").collect()
}

/// Whether `needle` is written, on one line or wrapped over successive ones.
fn has_text(els: &[El], needle: &str) -> bool {
    let all: Vec<&str> = texts(els).iter().map(|t| t.text.as_str()).collect();
    all.join(" ").contains(needle)
}

/// Left, right, top and bottom, pixels.
type TextBox = (f64, f64, f64, f64);

/// A text's box as the plots lay text out: 0.6 x font size per character, one font size high.
fn text_box(t: &El) -> TextBox {
    let size = t.num("font-size");
    let (x, y) = (t.num("x"), t.num("y"));
    let w = 0.6 * size * t.text.chars().count() as f64;
    let (x0, x1) = match t.attr("text-anchor") {
        "middle" => (x - w / 2.0, x + w / 2.0),
        "end" => (x - w, x),
        _ => (x, x + w),
    };
    let (y0, y1) = match t.attr("dy") {
        "0.76em" => (y, y + size),
        "0.5ex" => (y - size / 2.0, y + size / 2.0),
        _ => (y - size, y),
    };
    let transform = t.attr("transform");
    if transform.starts_with("rotate(270") {
        // Turned a quarter anticlockwise about (x, y): reads upwards.
        return (x + (y0 - y), x + (y1 - y), y - (x1 - x), y - (x0 - x));
    }
    if transform.starts_with("rotate(90") {
        return (x - (y1 - y), x - (y0 - y), y + (x0 - x), y + (x1 - x));
    }
    (x0, x1, y0, y1)
}

fn assert_no_text_overlaps(path: &Path, els: &[El]) {
    let boxes: Vec<(&El, TextBox)> = texts(els)
        .into_iter()
        .filter(|t| !t.text.is_empty())
        .map(|t| (t, text_box(t)))
        .collect();
    for (i, (a, ba)) in boxes.iter().enumerate() {
        assert!(
            ba.0 >= -0.5 && ba.1 <= f64::from(WIDTH) + 0.5 && ba.2 >= -0.5,
            "{path:?}: {:?} leaves the page: {ba:?}",
            a.text
        );
        for (b, bb) in &boxes[i + 1..] {
            let overlap =
                ba.0 < bb.1 - 0.5 && bb.0 < ba.1 - 0.5 && ba.2 < bb.3 - 0.5 && bb.2 < ba.3 - 0.5;
            assert!(
                !overlap,
                "{path:?}: {:?} {ba:?} overlaps {:?} {bb:?}",
                a.text, b.text
            );
        }
    }
}

/// Numeric labels (tick labels) by anchor: `middle` below the x axis, `end` left of the y.
fn ticks(els: &[El], anchor: &str) -> Vec<f64> {
    texts(els)
        .iter()
        .filter(|t| t.attr("text-anchor") == anchor && t.num("x") < LEGEND_X)
        .filter_map(|t| t.text.trim_end_matches('%').parse::<f64>().ok())
        .collect()
}

fn span(values: &[f64]) -> (f64, f64) {
    (
        values.iter().copied().fold(f64::INFINITY, f64::min),
        values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    )
}

fn in_data(e: &El) -> bool {
    let x = ["x", "cx", "x1"]
        .iter()
        .find_map(|k| e.attrs.get(*k))
        .and_then(|v| v.parse::<f64>().ok())
        .or_else(|| e.points().first().map(|p| p.0))
        .unwrap_or(0.0);
    x < LEGEND_X
}

fn written() -> (tempfile::TempDir, Vec<Vec<El>>) {
    let dir = tempfile::tempdir().unwrap();
    if let Some(keep) = std::env::var_os("KPLACE_PLOTS_KEEP") {
        write_all(&[sweep()], Path::new(&keep)).unwrap();
    }
    let paths = write_all(&[sweep()], dir.path()).unwrap();
    assert_eq!(paths.len(), 5);
    let mut all = Vec::new();
    for (path, name) in paths.iter().zip(FILES) {
        assert_eq!(path, &dir.path().join(name));
        let els = parse(path);
        assert_no_text_overlaps(path, &els);
        all.push(els);
    }
    (dir, all)
}

#[test]
fn latency_has_one_marker_per_trial_by_status_and_the_budget_line() {
    let (_dir, all) = written();
    let els = &all[0];
    // Series 0: all-cpu 1024x128 (3 repeats x 6 trials), 1: gpu-fft 1024x128 (2 x 3),
    // 2: all-cpu 2048x256 (2), 3: gpu-fft 2048x256 (3).
    let expected = [(3 * 3, 3 * 2, 3), (2 * 2, 2, 0), (0, 1, 1), (2, 1, 0)];
    for (i, (passed, failed, invalid)) in expected.into_iter().enumerate() {
        let c = series_hex(i);
        assert_eq!(markers(els, &c), (passed, failed, invalid), "series {i}");
        // Never joined in search order: no line of the series' colour longer than a marker.
        let joined = els.iter().any(|e| {
            let (left, right) = span(&e.points().iter().map(|p| p.0).collect::<Vec<_>>());
            e.tag == "polyline" && e.attr("stroke") == c && in_data(e) && right - left > 20.0
        });
        assert!(!joined, "series {i} is joined");
    }
    for system in [
        "all-cpu 1024x128 (3 repeats)",
        "gpu-fft 1024x128 (2 repeats)",
        "all-cpu 2048x256",
        "gpu-fft 2048x256",
    ] {
        assert!(has_text(els, system), "legend lacks {system}");
    }
    assert!(has_text(
        els,
        "deadline (max of 6.4 ms and 1/R) at 1024x128"
    ));
    assert!(has_text(
        els,
        "not searched: numpy at 2048x256 (python3 not found)"
    ));
    let budget_dashes = els
        .iter()
        .filter(|e| e.tag == "polyline" && e.attr("stroke") == hex(REFERENCE) && in_data(e))
        .count();
    assert!(budget_dashes > 20, "{budget_dashes} budget dashes");
    // Ticks span every rate (20 to 6400) and every p99 (0.8 to 900 ms).
    let (xlo, xhi) = span(&ticks(els, "middle"));
    assert!(xlo <= 20.0 && xhi >= 6400.0, "x ticks {xlo}..{xhi}");
    let (ylo, yhi) = span(&ticks(els, "end"));
    assert!(ylo <= 0.8 && yhi >= 900.0, "y ticks {ylo}..{yhi}");
    assert!(has_text(els, "(log)"));
}

#[test]
fn sustained_bars_follow_the_medians_with_ranges_and_real_time_lines() {
    let (_dir, all) = written();
    let els = &all[1];
    let bar = |system: usize| -> Vec<f64> {
        els.iter()
            .filter(|e| e.tag == "rect" && e.attr("fill") == series_hex(system) && in_data(e))
            .map(|e| e.num("height"))
            .collect()
    };
    // all-cpu: 1024x128 median 420, 2048x256 none (no bar); gpu-fft: 3100 and 900.
    let cpu = bar(0);
    let gpu = bar(1);
    assert_eq!(cpu.len(), 1, "{cpu:?}");
    assert_eq!(gpu.len(), 2, "{gpu:?}");
    let h = |rate: f64| gpu[0] * rate / 3100.0;
    assert!((cpu[0] - h(420.0)).abs() < 1.5, "{cpu:?} {gpu:?}");
    assert!((gpu[1] - h(900.0)).abs() < 1.5, "{gpu:?}");
    assert!(
        !els.iter()
            .any(|e| e.tag == "rect" && e.attr("fill") == "none" && in_data(e)),
        "no outlined bar stands for a missing rate"
    );
    // Instead, words at the axis in its slot, beside all-cpu's hollow marker.
    assert!(has_text(els, "no rate: min load"));
    assert_eq!(markers(els, &series_hex(0)).1, 1, "the hollow marker");
    assert!(has_text(els, "420") && has_text(els, "3100") && has_text(els, "900"));
    // The strict goal's answer, median 0.9 x 420, a labelled tick across all-cpu's bar.
    assert!(has_text(els, "strict 378"), "the strict goal's tick");
    let goal_ticks = els
        .iter()
        .filter(|e| {
            e.tag == "polyline" && e.attr("stroke") == "#000000" && e.attr("stroke-width") == "3"
        })
        .count();
    assert_eq!(goal_ticks, 1);
    // Error bars (stem and two caps) for the two groups with repeats.
    let error_bars = els
        .iter()
        .filter(|e| {
            e.tag == "polyline" && e.attr("stroke") == "#000000" && e.attr("stroke-width") == "2"
        })
        .count();
    assert_eq!(error_bars, 6);
    // The real-time lines: horizontal dashes at two heights, labelled.
    let dash_heights: Vec<f64> = els
        .iter()
        .filter(|e| e.tag == "polyline" && e.attr("stroke") == hex(REFERENCE) && in_data(e))
        .flat_map(|e| e.points())
        .map(|p| p.1)
        .collect();
    let mut distinct: Vec<f64> = Vec::new();
    for y in dash_heights {
        if !distinct.iter().any(|d| (d - y).abs() < 0.5) {
            distinct.push(y);
        }
    }
    assert_eq!(distinct.len(), 2, "{distinct:?}");
    assert!(has_text(els, "real time 156 CPI/s") && has_text(els, "39.1 CPI/s"));
    let (lo, hi) = span(&ticks(els, "end"));
    assert!(lo <= 0.0 && hi >= 3200.0, "{lo}..{hi}");
}

#[test]
fn cdf_curves_one_per_system_end_at_one() {
    let (_dir, all) = written();
    let els = &all[2];
    let top = texts(els)
        .into_iter()
        .find(|t| t.text == "100%")
        .expect("a 100% tick")
        .num("y");
    let bottom = texts(els)
        .into_iter()
        .find(|t| t.text == "0%")
        .expect("a 0% tick")
        .num("y");
    for i in [0, 1, 3] {
        let curves: Vec<&El> = els
            .iter()
            .filter(|e| e.tag == "polyline" && e.attr("stroke") == series_hex(i) && in_data(e))
            .collect();
        assert_eq!(curves.len(), 1, "series {i}");
        let points = curves[0].points();
        let (first, last) = (points[0], points[points.len() - 1]);
        assert!(
            (first.1 - bottom).abs() <= 1.0,
            "series {i} starts at {first:?}, 0% at {bottom}"
        );
        assert!(
            (last.1 - top).abs() <= 1.0,
            "series {i} ends at {last:?}, 100% at {top}"
        );
        assert!(
            points
                .windows(2)
                .all(|w| w[1].0 >= w[0].0 && w[1].1 <= w[0].1)
        );
    }
    assert!(
        !els.iter()
            .any(|e| e.tag == "polyline" && e.attr("stroke") == series_hex(2))
    );
    // Each curve carries its marker at p50, p90 and p99.
    assert_eq!(markers(els, &series_hex(1)).0, 3);
    assert!(has_text(els, "all-cpu 1024x128 at 100 CPI/s (3 runs)"));
    assert!(has_text(els, "gpu-fft 2048x256 at 20 CPI/s"));
    assert!(has_text(
        els,
        "no histogram at the start rate: all-cpu 2048x256 #0"
    ));
    // Latency ticks span 0.5 to 9 ms.
    let (lo, hi) = span(&ticks(els, "middle"));
    assert!(lo <= 0.5 && hi >= 9.0, "{lo}..{hi}");
}

#[test]
fn stages_stack_one_segment_per_stage() {
    let (_dir, all) = written();
    let els = &all[3];
    // Keys in order: range_fft, doppler_fft, cfar (cpu), then range_fft, doppler_fft (gpu).
    let segments = |k: usize| -> Vec<f64> {
        els.iter()
            .filter(|e| e.tag == "rect" && e.attr("fill") == series_hex(k) && in_data(e))
            .map(|e| e.num("height"))
            .collect()
    };
    let cpu_range = segments(0);
    let cfar = segments(2);
    let gpu_range = segments(3);
    let gpu_doppler = segments(4);
    assert_eq!(cpu_range.len(), 1);
    assert_eq!(segments(1).len(), 1);
    assert_eq!(cfar.len(), 3, "cfar in every bar");
    assert_eq!((gpu_range.len(), gpu_doppler.len()), (2, 2));
    // Heights in proportion: cpu range 1.5 ms, gpu range 0.2 ms (its GPU time, not 0.05).
    assert!(
        (cpu_range[0] / gpu_range[0] - 7.5).abs() < 0.6,
        "{cpu_range:?} {gpu_range:?}"
    );
    for (name, class) in [("range_fft", "cpu"), ("range_fft", "gpu"), ("cfar", "cpu")] {
        assert!(has_text(els, &format!("{name} ({class})")));
    }
    assert!(
        has_text(els, "3 ms at 420 CPI/s"),
        "the median repeat's trial"
    );
    assert!(has_text(els, "no rate: no search found one"));
    assert!(
        !els.iter()
            .any(|e| e.tag == "rect" && e.attr("fill") == "none" && in_data(e)),
        "no outlined bar stands for a missing rate"
    );
    assert!(has_text(els, "gated on the latency budget"));
}

#[test]
fn histograms_decode_into_steps_ending_at_one() {
    let h = super::cdf::decode(&histogram(&[1_000, 1_000, 3_000])).unwrap();
    assert_eq!(h.len(), 3);
    let steps = super::cdf::steps(&h);
    assert_eq!(steps.first().map(|p| p.1), Some(0.0));
    assert_eq!(steps.last().map(|p| p.1), Some(1.0));
    assert!((steps[1].1 - 2.0 / 3.0).abs() < 1e-12, "{steps:?}");
    assert!(super::cdf::decode("not base64!").is_err());
    assert!(super::cdf::decode("aGVsbG8=").is_err());
}

#[test]
fn a_bad_histogram_is_an_error_naming_the_search() {
    let mut file = sweep();
    file.searches[3].trials[0]
        .latency
        .as_mut()
        .unwrap()
        .histogram = Some("AAAA".into());
    let dir = tempfile::tempdir().unwrap();
    let err = format!("{:#}", write_all(&[file], dir.path()).unwrap_err());
    assert!(err.contains("gpu-fft at 1024x128 (repeat 0)"), "{err}");
}

#[test]
fn loads_rows_classify_every_load_and_ring_each_answer() {
    let (_dir, all) = written();
    let els = &all[4];
    // A row per search and goal: all-cpu's three repeats have two goals each; the searches
    // without goals have no rows.
    for (repeat, answer) in [(0, "400"), (1, "450"), (2, "420")] {
        assert!(
            has_text(
                els,
                &format!("all-cpu 1024x128 #{repeat} robust: {answer} (regular)")
            ),
            "row of repeat {repeat}"
        );
    }
    assert!(has_text(els, "all-cpu 1024x128 #1 strict: 405 (regular)"));
    // Each answer ringed: six rings, black, around the markers.
    let rings = els
        .iter()
        .filter(|e| e.tag == "circle" && e.attr("stroke") == "#000000" && e.attr("r") == "9")
        .count();
    assert_eq!(rings, 6);
    // Every load of every row drawn, in the row's colour and shape: all-cpu's loads are 100,
    // 200, the answer, 600, 800 and 0.9 and 1.02 times the answer: 7 per search and goal,
    // besides the marker that leads each of the six rows' labels.
    let (filled, outlined, struck) = markers(els, &series_hex(0));
    assert_eq!(filled + outlined + struck, 3 * 2 * 7 + 6);
    assert!(has_text(els, "offered rate, CPI/s"));
}

#[test]
fn a_recordings_rates_are_frames_per_second() {
    let mut file = sweep();
    for s in &mut file.searches {
        s.unit = "frames/s".into();
    }
    let dir = tempfile::tempdir().unwrap();
    let paths = write_all(&[file], dir.path()).unwrap();
    let latency = parse(&paths[0]);
    assert!(
        texts(&latency)
            .iter()
            .any(|t| t.text.contains("offered rate, frames/s"))
    );
    let sustained = parse(&paths[1]);
    assert!(has_text(&sustained, "real time 156 frames/s"));
    assert!(
        texts(&sustained)
            .iter()
            .any(|t| t.text.contains("sustained rate, frames/s"))
    );
    for path in &paths {
        let text = std::fs::read_to_string(path).unwrap();
        assert!(!text.contains("CPI/s"), "{}", path.display());
    }
}

#[test]
fn an_empty_sweep_still_draws_five_plots_saying_so() {
    let mut file = sweep();
    file.searches.retain(|s| s.skipped.is_some());
    let dir = tempfile::tempdir().unwrap();
    let paths = write_all(&[file], dir.path()).unwrap();
    for (path, says) in paths.iter().zip([
        "no trials",
        "no searches",
        "no histograms",
        "no searches",
        "no loads measured",
    ]) {
        let els = parse(path);
        assert!(has_text(&els, says), "{path:?}");
        assert_no_text_overlaps(path, &els);
    }
}

/// A budget that follows 1/R is unbounded at rate 0, where a linear rate axis starts: the
/// latency axis must still be set by the trials and the budget near them.
#[test]
fn a_one_over_r_budget_never_stretches_the_latency_axis() {
    let mut s = search("all-cpu", "2048x256", 0, Some(110.0));
    s.trials = [40.0, 80.0, 110.0, 120.0, 160.0]
        .into_iter()
        .map(|rate| trial(rate, TrialStatus::Passed, Some(8.0), None))
        .collect();
    let mut file = sweep();
    file.searches = vec![s];
    let dir = tempfile::tempdir().unwrap();
    let paths = write_all(&[file], dir.path()).unwrap();
    let els = parse(&paths[0]);
    let (_, top) = span(&ticks(&els, "end"));
    // The deadline at 2048x256 is max(25.6 ms, 1/R): about 31 ms at 32 CPI/s, 0.8 x the
    // lowest rate tried; the axis stays within a small factor of it.
    assert!(top <= 200.0, "latency axis up to {top} ms");
    assert!(top >= 25.6, "the budget is in view: {top} ms");
}

/// The legend-key markers of a plot, each with the first line of its text: black circles of
/// the marker's size in the legend, their fill told as they are drawn (filled; outlined;
/// outlined and struck through; outlined with a dot at the centre).
fn legend_fills(els: &[El]) -> Vec<(Fill, String)> {
    let black = "#000000";
    let legend: Vec<&El> = els.iter().filter(|e| !in_data(e)).collect();
    let size = f64::from(MARKER_SIZE);
    let at = |e: &El| (e.num("cx"), e.num("cy"));
    let mut keys = Vec::new();
    for e in legend
        .iter()
        .filter(|e| e.tag == "circle" && e.num("r") == size)
    {
        let (x, y) = at(e);
        let fill = if e.attr("fill") == black {
            Fill::Solid
        } else if e.attr("stroke") != black {
            continue;
        } else if legend.iter().any(|s| {
            s.tag == "polyline"
                && s.attr("stroke") == black
                && s.points().len() == 2
                && s.points().iter().all(|p| (p.1 - y).abs() < 0.5)
                && s.points()[0].0 < x
                && s.points()[1].0 > x
        }) {
            Fill::Struck
        } else if legend.iter().any(|d| {
            d.tag == "circle"
                && d.attr("fill") == black
                && d.num("r") == f64::from(DOT_SIZE)
                && at(d) == (x, y)
        }) {
            Fill::Dot
        } else {
            Fill::Hollow
        };
        let text = texts(els)
            .into_iter()
            .filter(|t| t.num("x") > x && (t.num("y") + 7.0 - y).abs() <= 1.0)
            .map(|t| t.text.clone())
            .next()
            .unwrap_or_else(|| panic!("no text beside the key at {x}, {y}"));
        keys.push((fill, text));
    }
    keys
}

/// A sweep whose plots draw every fill: the test sweep, with a load its sender never offered
/// (every trial at it unoffered) in the first search.
fn every_fill() -> SweepFile {
    let mut file = sweep();
    let s = &mut file.searches[0];
    s.loads.push(LoadEntry {
        load: 1200.0,
        trials: 0,
        seconds: 0.0,
        unoffered: 3,
        classes: vec![Class::Undecided, Class::Undecided],
    });
    file
}

/// One symbol, one meaning: in every plot, each fill a legend explains reads as
/// [`Fill::meaning`] says, whatever the plot adds after it; a struck-through marker is a
/// point not offered in `latency.svg` and in `loads.svg` alike, and an undecided load has a
/// dot of its own.
#[test]
fn each_fill_means_one_thing_in_every_plot() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write_all(&[every_fill()], dir.path()).unwrap();
    let mut seen = Vec::new();
    for path in &paths {
        let els = parse(path);
        for (fill, first_line) in legend_fills(&els) {
            let meaning = fill.meaning();
            assert!(
                first_line.len() >= 10
                    && (meaning.starts_with(&first_line) || first_line.starts_with(meaning)),
                "{path:?}: {fill:?} reads {first_line:?}, not {meaning:?}"
            );
            seen.push((path.file_name().unwrap().to_owned(), fill));
        }
    }
    let has = |file: &str, fill: Fill| seen.iter().any(|(f, g)| f == file && *g == fill);
    for fill in [Fill::Solid, Fill::Hollow, Fill::Struck] {
        assert!(has("latency.svg", fill), "latency.svg explains {fill:?}");
    }
    for fill in [Fill::Solid, Fill::Hollow, Fill::Struck, Fill::Dot] {
        assert!(has("loads.svg", fill), "loads.svg explains {fill:?}");
    }
    // The load never offered is struck in its row (series 0's colour), the undecided ones
    // carry a dot.
    let loads = parse(&paths[4]);
    let c = series_hex(0);
    let dots = loads
        .iter()
        .filter(|e| {
            in_data(e)
                && e.tag == "circle"
                && e.attr("fill") == c
                && e.num("r") == f64::from(DOT_SIZE)
        })
        .count();
    assert!(dots > 0, "undecided loads carry a dot");
    let (_, _, struck) = markers(&loads, &c);
    assert_eq!(
        struck, 2,
        "the load never offered, in the robust and the strict row"
    );
}

/// The path length of a polyline, pixels.
fn length(e: &El) -> f64 {
    e.points()
        .windows(2)
        .map(|w| (w[1].0 - w[0].0).hypot(w[1].1 - w[0].1))
        .sum()
}

/// Every budget line is drawn with its own dash pattern, and its legend key repeats it: the
/// key's dashes are the line's length and gap apart, and no two budgets look alike.
#[test]
fn each_budget_line_and_its_legend_key_share_their_dashes() {
    let (_dir, all) = written();
    for (plot, els) in [("latency.svg", &all[0]), ("cdf.svg", &all[2])] {
        let grey = hex(REFERENCE);
        let dashes: Vec<&El> = els
            .iter()
            .filter(|e| e.tag == "polyline" && e.attr("stroke") == grey)
            .collect();
        // The legend's keys: their dashes by row, left to right.
        let mut rows: Vec<(f64, Vec<(f64, f64)>)> = Vec::new();
        for e in dashes.iter().filter(|e| !in_data(e)) {
            let p = e.points();
            match rows.iter_mut().find(|(y, _)| (*y - p[0].1).abs() < 0.5) {
                Some((_, row)) => row.push((p[0].0, p[1].0)),
                None => rows.push((p[0].1, vec![(p[0].0, p[1].0)])),
            }
        }
        rows.sort_by(|a, b| a.0.total_cmp(&b.0));
        let keys: Vec<(f64, f64)> = rows
            .iter()
            .filter(|(_, row)| row.len() >= 2)
            .map(|(_, row)| (row[0].1 - row[0].0, row[1].0 - row[0].1))
            .collect();
        assert_eq!(keys.len(), 2, "{plot}: two budgets, two keys: {rows:?}");
        assert_ne!(keys[0], keys[1], "{plot}: the budgets look alike");
        // The lines, in the legend's order: the first line's dashes, then the second's. Each
        // full dash is its key's length (to a pixel of rounding); the last of a line may be
        // cut short.
        let drawn: Vec<f64> = dashes
            .iter()
            .filter(|e| in_data(e))
            .map(|e| length(e))
            .collect();
        let near = |l: f64, dash: f64| (l - dash).abs() <= 1.5;
        let first = drawn.iter().take_while(|&&l| near(l, keys[0].0)).count();
        assert!(first >= 2, "{plot}: {drawn:?} against {keys:?}");
        let second = &drawn[first + 1..];
        let full = second.iter().filter(|&&l| near(l, keys[1].0)).count();
        assert!(
            full + 1 >= second.len() && full >= 2,
            "{plot}: {second:?} against {keys:?}"
        );
    }
}

/// A filled marker above a budget line says why in the legend: above another frame shape's
/// line it is within its own budget; above its own, the frames late stayed within the goal.
#[test]
fn a_filled_marker_above_a_budget_line_is_explained() {
    let (_dir, all) = written();
    // gpu-fft at 2048x256 passed 900 CPI/s at p99 12 ms: above 1024x128's 6.4 ms line,
    // within its own 25.6 ms.
    assert!(has_text(
        &all[0],
        "a filled marker above another frame shape's budget line is within its own"
    ));
    assert!(!has_text(&all[0], "above its own budget line"));
    // A robust trial low-loss (0.8% of its frames late) whose p99 is over the budget, in
    // results that did not count the frames timed: their count understated the late frames.
    let mut file = sweep();
    let late = &mut file.searches[0].trials[2];
    late.loss_ratio = Some(0.008);
    late.latency.as_mut().unwrap().p99_ms = 9.0;
    let legend = |file: SweepFile| {
        let dir = tempfile::tempdir().unwrap();
        let paths = write_all(&[file], dir.path()).unwrap();
        let els = parse(&paths[0]);
        texts(&els)
            .iter()
            .map(|t| t.text.clone())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let text = legend(file.clone());
    assert!(
        text.contains(
            "a filled marker above its own budget line: these results counted its late frames over every frame sent, the warm-up's too"
        ),
        "{text}"
    );
    // Counted over the frames timed, under a goal allowing 5% late: within the goal.
    let s = &mut file.searches[0];
    s.goals[0].goal.loss_ratio = 0.05;
    s.trials[2].loss_ratio = Some(0.03);
    s.trials[2].measurement = Some(crate::rate::TrialMeasurement {
        offered_rate: 200.0,
        frames_sent: 500,
        frames_completed: 500,
        partial_frames: 0,
        dropped_frames: 0,
        frames_failed_verification: 0,
        processed_rate: 200.0,
        post_frame_p99: Duration::from_millis(9),
        post_frame_trend: 0.0,
        window: Duration::from_secs(2),
        frames_over_budget: 12,
        frames_timed: 400,
    });
    let text = legend(file);
    assert!(
        text.contains(
            "a filled marker above its own budget line: its p99 is over the budget, yet at most 5% of its frames were late or lost, which the goal allows"
        ),
        "{text}"
    );
    assert!(!text.contains("the warm-up's too"), "{text}");
}

/// The note on the sideways offset says what the code does: 2 px between neighbouring
/// series, the farthest as far as it sits.
#[test]
fn the_sideways_offset_is_what_the_note_says() {
    use crate::plots::latency::{MAX_OFFSET, STEP, offset, step};
    for n in 2..=12 {
        let at: Vec<i32> = (0..n).map(|i| offset(i, n)).collect();
        let reach = at.iter().map(|o| o.abs()).max().unwrap();
        assert!(f64::from(reach) <= MAX_OFFSET, "{n}: {at:?}");
        for w in at.windows(2) {
            assert!(
                (f64::from(w[1] - w[0]) - step(n)).abs() <= 1.0,
                "{n}: {at:?}"
            );
        }
        if n <= 7 {
            assert_eq!(step(n), STEP);
            assert!(
                at.windows(2).all(|w| f64::from(w[1] - w[0]) == STEP),
                "{n}: {at:?}"
            );
        }
    }
    let (_dir, all) = written();
    // Four series: at -3, -1, 1, 3.
    assert!(has_text(
        &all[0],
        "each series' markers sit 2 px sideways of the next series', up to 3 px from their rate"
    ));
}

//! `kplace plot-trace`: a window of a run's timeline (`kplace run --trace`) as an SVG, one lane
//! per thread, what `chrome://tracing` or Perfetto would show, as a picture that needs no
//! viewer.
//!
//! Launches and GPU enqueues are bars coloured by stage (a GPU enqueue hatched lighter), fences
//! dark grey, each frame's packets pale blue on the source lane, slot waits pale red; GPU
//! callbacks and deliveries are ticks. Every span that overlaps the window is drawn, clipped to
//! it; the title says the window and how many spans it holds.

use std::path::Path;

use kplace::report::trace::{Span, SpanKind, Trace, Track};
use plotters::prelude::*;

use super::{PlotError, colour};

/// The picture's width, px.
const WIDTH: u32 = 1400;
/// One lane's height, px.
const LANE: u32 = 34;

/// The colour of a span of `kind` of stage `stage`.
fn fill(kind: SpanKind, stage: Option<u32>) -> RGBColor {
    match kind {
        SpanKind::Launch | SpanKind::GpuLaunch => colour(stage.unwrap_or(0) as usize),
        SpanKind::Enqueue => {
            let RGBColor(r, g, b) = colour(stage.unwrap_or(0) as usize);
            RGBColor(r / 2 + 127, g / 2 + 127, b / 2 + 127)
        }
        SpanKind::Fence | SpanKind::Download => RGBColor(70, 70, 70),
        SpanKind::Packets => RGBColor(170, 200, 235),
        SpanKind::SlotWait => RGBColor(240, 170, 170),
        SpanKind::Callback | SpanKind::Deliver => RGBColor(20, 20, 20),
    }
}

/// Writes the spans of `trace` between `from_ns` and `to_ns` (the run's clock) to `path`.
pub fn write(path: &Path, trace: &Trace, from_ns: u64, to_ns: u64) -> Result<(), PlotError> {
    let draw_error = |e: &dyn std::fmt::Display| PlotError::Draw {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let mut lanes: Vec<Track> = trace.spans.iter().map(|s| s.track).collect();
    lanes.sort();
    lanes.dedup();
    let shown: Vec<&Span> = trace
        .spans
        .iter()
        .filter(|s| s.end_ns >= from_ns && s.start_ns <= to_ns)
        .collect();
    // Tall enough for the legend's rows too.
    let rows = (lanes.len() as u32).max((trace.stages.len() as u32 + 5).div_ceil(2));
    let height = 120 + LANE * rows.max(1);
    let root = SVGBackend::new(path, (WIDTH, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| draw_error(&e))?;
    let ms = |ns: u64| (ns.saturating_sub(from_ns)) as f64 / 1e6;
    let span_ms = ms(to_ns).max(1e-3);
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "kplace run timeline: {:.3} ms to {:.3} ms of the run, {} spans",
                from_ns as f64 / 1e6,
                to_ns as f64 / 1e6,
                shown.len()
            ),
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(120)
        // Room on the right for the legend, past the window's end.
        .build_cartesian_2d(0.0..span_ms * 1.2, 0.0..lanes.len().max(1) as f64)
        .map_err(|e| draw_error(&e))?;
    let lane_names: Vec<String> = lanes.iter().map(|t| t.name(&trace.stages)).collect();
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(lanes.len().max(1) * 2 + 1)
        .y_label_formatter(&|y| {
            // A label at each lane's middle.
            let i = (y - 0.5).round();
            if (y - 0.5 - i).abs() < 1e-6 && i >= 0.0 {
                lane_names
                    .get(lanes.len().saturating_sub(1 + i as usize))
                    .cloned()
                    .unwrap_or_default()
            } else {
                String::new()
            }
        })
        .x_desc("ms from the window's start")
        .draw()
        .map_err(|e| draw_error(&e))?;
    // The first lane at the top.
    let lane_of = |t: Track| {
        let i = lanes.iter().position(|l| *l == t).unwrap_or(0);
        (lanes.len() - 1 - i) as f64
    };
    let bars = shown.iter().map(|s| {
        let lane = lane_of(s.track);
        let (x0, x1) = (ms(s.start_ns.max(from_ns)), ms(s.end_ns.min(to_ns)));
        let (y0, y1) = match s.kind {
            // Ticks for instants; the packets under the launches they feed.
            SpanKind::Callback | SpanKind::Deliver => (lane + 0.1, lane + 0.9),
            SpanKind::Packets => (lane + 0.1, lane + 0.45),
            _ => (lane + 0.2, lane + 0.8),
        };
        // An instant is drawn as a tick about 2 px wide.
        let x1 = if x1 <= x0 { x0 + span_ms / 600.0 } else { x1 };
        Rectangle::new([(x0, y0), (x1, y1)], fill(s.kind, s.stage).filled())
    });
    chart.draw_series(bars).map_err(|e| draw_error(&e))?;
    // The legend: a swatch per stage, then the other kinds of span.
    let mut keys: Vec<(String, RGBColor)> = trace
        .stages
        .iter()
        .enumerate()
        .map(|(i, stage)| (stage.clone(), colour(i)))
        .collect();
    keys.extend([
        (
            "GPU enqueue (lighter)".to_string(),
            fill(SpanKind::Enqueue, None),
        ),
        ("GPU fence".into(), fill(SpanKind::Fence, None)),
        ("a frame's packets".into(), fill(SpanKind::Packets, None)),
        ("wait for a slot".into(), fill(SpanKind::SlotWait, None)),
        (
            "GPU or frame done (tick)".into(),
            fill(SpanKind::Deliver, None),
        ),
    ]);
    for (label, c) in keys {
        chart
            .draw_series(std::iter::empty::<Rectangle<(f64, f64)>>())
            .map_err(|e| draw_error(&e))?
            .label(label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], c.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| draw_error(&e))?;
    root.present().map_err(|e| draw_error(&e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_span_in_the_window_is_drawn_on_its_lane() {
        let span = |kind, track, stage, start_ns: u64, end_ns: u64| Span {
            kind,
            track,
            frame: 0,
            stage,
            launch: None,
            start_ns,
            end_ns,
        };
        let trace = Trace {
            spans: vec![
                span(SpanKind::Packets, Track::Source, None, 0, 900_000),
                span(
                    SpanKind::Launch,
                    Track::Worker(0),
                    Some(0),
                    100_000,
                    300_000,
                ),
                span(
                    SpanKind::Launch,
                    Track::Worker(1),
                    Some(1),
                    400_000,
                    800_000,
                ),
                span(SpanKind::Deliver, Track::Collector, None, 850_000, 850_000),
                // Outside the window.
                span(
                    SpanKind::Launch,
                    Track::Worker(0),
                    Some(0),
                    5_000_000,
                    6_000_000,
                ),
            ],
            stages: vec!["range_fft".into(), "cfar".into()],
            dropped_spans: 0,
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.svg");
        write(&path, &trace, 0, 1_000_000).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let doc = roxmltree::Document::parse(&text).unwrap();
        let texts: Vec<&str> = doc
            .descendants()
            .filter(|n| n.has_tag_name("text"))
            .filter_map(|n| n.text())
            .map(str::trim)
            .collect();
        for want in [
            "source",
            "worker 0",
            "worker 1",
            "collector",
            "range_fft",
            "cfar",
        ] {
            assert!(texts.contains(&want), "{want} in {texts:?}");
        }
        assert!(
            texts.iter().any(|t| t.contains("4 spans")),
            "the title counts the window's spans: {texts:?}"
        );
    }
}

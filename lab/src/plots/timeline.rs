//! `kplace plot-trace`: a window of a run's timeline (`kplace run --trace`) as an SVG, one lane
//! per thread, what `chrome://tracing` or Perfetto would show, as a picture that needs no
//! viewer.
//!
//! Launches and GPU enqueues are bars coloured by stage (a GPU enqueue lighter), fences and
//! downloads dark grey, each frame's packets light grey on the source lane, slot waits pale
//! red; GPU callbacks and deliveries are ticks. Every span that overlaps the window is drawn,
//! clipped to it; the time axis spans exactly the window; the title says the window and how
//! many spans it holds. The legend, in its own panel beside the lanes, lists only the stages
//! and kinds of span drawn in the window: a CPU run's picture names no GPU span.

use std::path::Path;

use kplace::report::trace::{Span, SpanKind, Trace, Track};
use plotters::prelude::*;

use super::PlotError;
use super::frame::{LegendEntry, Page, SMALL_FONT, Swatch, draw_page};
use super::style::colour;

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
        SpanKind::Packets => RGBColor(200, 200, 200),
        SpanKind::SlotWait => RGBColor(240, 170, 170),
        SpanKind::Callback | SpanKind::Deliver | SpanKind::Switch => RGBColor(20, 20, 20),
    }
}

/// The legend of the spans `shown`: a key per stage with a launch among them, then one per
/// other kind of span among them (kinds that share a colour share a key), in a fixed order.
pub fn legend(shown: &[&Span], stages: &[String]) -> Vec<LegendEntry> {
    let has = |kind: SpanKind| shown.iter().any(|s| s.kind == kind);
    let mut legend: Vec<LegendEntry> = stages
        .iter()
        .enumerate()
        .filter(|(i, _)| {
            shown.iter().any(|s| {
                matches!(s.kind, SpanKind::Launch | SpanKind::GpuLaunch)
                    && s.stage == Some(*i as u32)
            })
        })
        .map(|(i, stage)| LegendEntry::new(Swatch::Block(colour(i)), stage.clone()))
        .collect();
    let either = |a: (SpanKind, &str), b: (SpanKind, &str)| match (has(a.0), has(b.0)) {
        (true, true) => Some(format!("{} or {}", a.1, b.1)),
        (true, false) => Some(a.1.to_string()),
        (false, true) => Some(b.1.to_string()),
        (false, false) => None,
    };
    // A GPU enqueue's key in the lighter colour of the first stage enqueued.
    let enqueued = shown
        .iter()
        .find(|s| s.kind == SpanKind::Enqueue)
        .and_then(|s| s.stage);
    let keys = [
        (
            has(SpanKind::Enqueue).then(|| "GPU enqueue (its stage's colour, lighter)".to_string()),
            SpanKind::Enqueue,
        ),
        (
            either(
                (SpanKind::Fence, "GPU fence"),
                (SpanKind::Download, "GPU download"),
            ),
            SpanKind::Fence,
        ),
        (
            has(SpanKind::Packets).then(|| "a frame's packets arriving".to_string()),
            SpanKind::Packets,
        ),
        (
            has(SpanKind::SlotWait).then(|| "the source waiting for a slot".to_string()),
            SpanKind::SlotWait,
        ),
        (
            either(
                (SpanKind::Callback, "GPU done (tick)"),
                (SpanKind::Deliver, "frame delivered (tick)"),
            ),
            SpanKind::Deliver,
        ),
    ];
    for (text, kind) in keys {
        if let Some(text) = text {
            let stage = if kind == SpanKind::Enqueue {
                enqueued
            } else {
                None
            };
            legend.push(LegendEntry::new(Swatch::Block(fill(kind, stage)), text));
        }
    }
    legend
}

/// Writes the spans of `trace` between `from_ns` and `to_ns` (the run's clock) to `path`.
pub fn write(path: &Path, trace: &Trace, from_ns: u64, to_ns: u64) -> Result<(), PlotError> {
    let mut lanes: Vec<Track> = trace.spans.iter().map(|s| s.track).collect();
    lanes.sort();
    lanes.dedup();
    let shown: Vec<&Span> = trace
        .spans
        .iter()
        .filter(|s| s.end_ns >= from_ns && s.start_ns <= to_ns)
        .collect();
    let legend = legend(&shown, &trace.stages);
    // Tall enough for the lanes and for the legend's rows.
    let body_height = (70 + LANE * lanes.len().max(1) as u32).max(30 + 21 * legend.len() as u32);
    let ms = |ns: u64| (ns.saturating_sub(from_ns)) as f64 / 1e6;
    let span_ms = ms(to_ns).max(1e-3);
    let title = format!(
        "kplace run timeline: {:.3} ms to {:.3} ms of the run, {} spans",
        from_ns as f64 / 1e6,
        to_ns as f64 / 1e6,
        shown.len()
    );
    let page = Page {
        width: WIDTH,
        body_height,
        ..Page::new(&title, &[], &legend)
    };
    let lane_names: Vec<String> = lanes.iter().map(|t| t.name(&trace.stages)).collect();
    // The first lane at the top.
    let lane_of = |t: Track| {
        let i = lanes.iter().position(|l| *l == t).unwrap_or(0);
        (lanes.len() - 1 - i) as f64
    };
    draw_page(path, &page, |area| {
        let mut chart = ChartBuilder::on(area)
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(110)
            .build_cartesian_2d(0.0..span_ms, 0.0..lanes.len().max(1) as f64)?;
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
            .axis_desc_style(("sans-serif", SMALL_FONT))
            .label_style(("sans-serif", SMALL_FONT))
            .draw()?;
        let bars = shown.iter().map(|s| {
            let lane = lane_of(s.track);
            let (x0, x1) = (ms(s.start_ns.max(from_ns)), ms(s.end_ns.min(to_ns)));
            let (y0, y1) = match s.kind {
                // Ticks for instants; the packets under the launches they feed.
                SpanKind::Callback | SpanKind::Deliver => (lane + 0.1, lane + 0.9),
                SpanKind::Packets => (lane + 0.1, lane + 0.45),
                _ => (lane + 0.2, lane + 0.8),
            };
            // An instant is drawn as a tick about 2 px wide, inside the window.
            let tick = span_ms / 600.0;
            let (x0, x1) = if x1 <= x0 {
                ((x0 - tick).max(0.0), (x0 + tick).min(span_ms))
            } else {
                (x0, x1)
            };
            Rectangle::new([(x0, y0), (x1, y1)], fill(s.kind, s.stage).filled())
        });
        chart.draw_series(bars)?;
        Ok(())
    })
}

/// A span of frame 0, for the tests that draw made-up traces.
#[cfg(test)]
pub(crate) fn span(
    kind: SpanKind,
    track: Track,
    stage: Option<u32>,
    start_ns: u64,
    end_ns: u64,
) -> Span {
    Span {
        kind,
        track,
        frame: 0,
        stage,
        launch: None,
        lane: None,
        start_ns,
        end_ns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_span_in_the_window_is_drawn_on_its_lane() {
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
            placements: Vec::new(),
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

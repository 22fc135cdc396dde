//! `kplace plot-trace --switches`: a whole run that adapts (`kplace run --adapt --trace`) as
//! one picture: each frame's post-frame latency (its delivery minus its last packet) against
//! the time it was delivered, coloured by the placement that ran it, and a dashed line at
//! every switch, labelled with the placement it moved to. The trace alone draws it: the
//! packets, the deliveries (each naming its placement) and the switch marks.

use std::path::Path;

use kplace::report::trace::{SpanKind, Trace};
use plotters::prelude::*;

use super::PlotError;
use super::frame::{LegendEntry, Page, SMALL_FONT, Swatch, draw_page, house_style};
use super::style::{Dashes, Fill, REFERENCE, draw_shape, series_style};

/// The half-size of a frame's marker, pixels: small, as a run has thousands.
const FRAME_MARKER: i32 = 2;

/// A switch's line: thin grey dashes.
const SWITCH_DASHES: Dashes = Dashes {
    colour: REFERENCE,
    width: 1,
    dash: 5,
    gap: 4,
};

/// The latency budget's line: thin red dashes.
const BUDGET_LINE: Dashes = Dashes {
    colour: RED,
    width: 1,
    dash: 6,
    gap: 4,
};

/// One delivered frame: when (s on the run's clock), its post-frame latency (ms), and the
/// placement that ran it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FramePoint {
    /// Delivery, s.
    pub at_s: f64,
    /// Post-frame latency, ms.
    pub latency_ms: f64,
    /// The placement, by index in the trace's placements.
    pub lane: u32,
}

/// A switch: when (s on the run's clock), and the placement it moved to.
pub type SwitchMark = (f64, u32);

/// Every delivered frame of `trace` with its packets, and every switch, in time order; `None`
/// when the trace is not of a run that adapts.
pub fn points(trace: &Trace) -> Option<(Vec<FramePoint>, Vec<SwitchMark>)> {
    if trace.placements.is_empty() {
        return None;
    }
    let mut last_packet = std::collections::HashMap::new();
    for s in trace.spans.iter().filter(|s| s.kind == SpanKind::Packets) {
        last_packet.insert(s.frame, s.end_ns);
    }
    let mut frames: Vec<FramePoint> = trace
        .spans
        .iter()
        .filter(|s| s.kind == SpanKind::Deliver)
        .filter_map(|s| {
            let last = *last_packet.get(&s.frame)?;
            Some(FramePoint {
                at_s: s.start_ns as f64 / 1e9,
                latency_ms: s.start_ns.saturating_sub(last) as f64 / 1e6,
                lane: s.lane?,
            })
        })
        .collect();
    frames.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
    let switches = trace
        .spans
        .iter()
        .filter(|s| s.kind == SpanKind::Switch)
        .filter_map(|s| Some((s.start_ns as f64 / 1e9, s.lane?)))
        .collect();
    Some((frames, switches))
}

/// Writes the picture of `trace`, a run that adapts, to `path`; `budget_ms` draws the budget
/// the switching rule judged against, when known.
pub fn write(path: &Path, trace: &Trace, budget_ms: Option<f64>) -> Result<(), PlotError> {
    let Some((frames, switches)) = points(trace) else {
        return Err(PlotError::Draw {
            path: path.to_path_buf(),
            message: "the trace is not of a run that adapts (kplace run --adapt --trace)".into(),
        });
    };
    let name = |lane: u32| {
        trace
            .placements
            .get(lane as usize)
            .map_or("?", String::as_str)
    };
    let mut legend: Vec<LegendEntry> = (0..trace.placements.len() as u32)
        .filter(|&l| frames.iter().any(|f| f.lane == l))
        .map(|l| {
            let text = format!("a frame run on {}", name(l));
            LegendEntry::new(Swatch::Marker(series_style(l as usize), Fill::Solid), text)
        })
        .collect();
    if !switches.is_empty() {
        let text = "a switch (labelled with the placement taken)".to_string();
        legend.push(LegendEntry::new(Swatch::Dashed(SWITCH_DASHES), text));
    }
    if budget_ms.is_some() {
        legend.push(LegendEntry::new(
            Swatch::Dashed(BUDGET_LINE),
            "the latency budget",
        ));
    }
    let end_s = frames.last().map_or(1.0, |f| f.at_s).max(1e-3) * 1.02;
    let top_ms = frames
        .iter()
        .map(|f| f.latency_ms)
        .fold(budget_ms.unwrap_or(0.0), f64::max)
        .max(1e-3)
        * 1.1;
    let title = format!(
        "kplace run --adapt: post-frame latency of {} frames by the placement that ran them, {} switch{}",
        frames.len(),
        switches.len(),
        if switches.len() == 1 { "" } else { "es" }
    );
    let page = Page::new(&title, &[], &legend);
    draw_page(path, &page, |area| {
        let mut chart = ChartBuilder::on(area)
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..end_s, 0.0..top_ms)?;
        house_style(&mut chart.configure_mesh())
            .x_desc("s of the run (frame delivered)")
            .y_desc("post-frame latency, ms")
            .draw()?;
        // Each frame a small marker of its placement's series: its colour and its shape.
        let base = area.get_base_pixel();
        for f in &frames {
            let style = series_style(f.lane as usize);
            let at = chart.backend_coord(&(f.at_s, f.latency_ms));
            let at = (at.0 - base.0, at.1 - base.1);
            draw_shape(
                area,
                (style.shape, style.colour),
                Fill::Solid,
                at,
                FRAME_MARKER,
            )?;
        }
        if let Some(budget) = budget_ms {
            let d = BUDGET_LINE;
            let line =
                DashedLineSeries::new([(0.0, budget), (end_s, budget)], d.dash, d.gap, d.stroke());
            chart.draw_series(line)?;
        }
        let rows = label_rows(&switches, &name, end_s);
        for (&(at, lane), row) in switches.iter().zip(rows) {
            let d = SWITCH_DASHES;
            let line = DashedLineSeries::new([(at, 0.0), (at, top_ms)], d.dash, d.gap, d.stroke());
            chart.draw_series(line)?;
            let label = Text::new(
                format!("\u{2192} {}", name(lane)),
                (at, top_ms * (0.97 - 0.05 * row as f64)),
                ("sans-serif", SMALL_FONT).into_font().color(&REFERENCE),
            );
            chart.draw_series(std::iter::once(label))?;
        }
        Ok(())
    })
}

/// The row of each switch's label, from the top: the first whose last label ends before this
/// one starts, so that labels of switches close in time stack instead of overlapping. Widths
/// are estimated generously (0.65 of the font size per character, on a plot narrower than the
/// page's).
fn label_rows<'n>(
    switches: &[SwitchMark],
    name: &impl Fn(u32) -> &'n str,
    end_s: f64,
) -> Vec<usize> {
    const PLOT_PX: f64 = 600.0;
    let s_per_px = end_s / PLOT_PX;
    let mut ends: Vec<f64> = Vec::new();
    switches
        .iter()
        .map(|&(at, lane)| {
            let width = (name(lane).chars().count() + 2) as f64 * 0.65 * SMALL_FONT * s_per_px;
            let row = ends.iter().position(|&end| end < at).unwrap_or(ends.len());
            if row == ends.len() {
                ends.push(0.0);
            }
            ends[row] = at + width;
            row
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use kplace::report::trace::{Span, Track};

    use super::*;

    fn trace() -> Trace {
        let at =
            |kind, frame, start_ns, end_ns| Span::new(kind, Track::Source, frame, start_ns, end_ns);
        let mut spans = Vec::new();
        for frame in 0..20u64 {
            let t = frame * 4_000_000;
            let lane = u32::from(frame >= 10);
            spans.push(at(SpanKind::Packets, frame, t, t + 1_000_000));
            let done = t + 1_000_000 + if lane == 0 { 6_000_000 } else { 1_500_000 };
            spans.push(at(SpanKind::Deliver, frame, done, done).on_lane(lane));
        }
        spans.push(at(SpanKind::Switch, 9, 39_000_000, 39_000_000).on_lane(1));
        Trace {
            spans,
            placements: vec!["gpu".into(), "cpu".into()],
            ..Trace::default()
        }
    }

    #[test]
    fn each_frame_is_a_point_of_its_placement_and_each_switch_a_mark() {
        let (frames, switches) = points(&trace()).unwrap();
        assert_eq!(frames.len(), 20);
        for f in &frames {
            let latency = if f.lane == 0 { 6.0 } else { 1.5 };
            assert!((f.latency_ms - latency).abs() < 1e-9, "{f:?}");
        }
        assert_eq!(frames.iter().filter(|f| f.lane == 1).count(), 10);
        assert_eq!(switches, [(0.039, 1)]);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("switches.svg");
        write(&path, &trace(), Some(5.0)).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        for text in [
            "a frame run on gpu",
            "a frame run on cpu",
            "\u{2192} cpu",
            "20 frames",
        ] {
            assert!(svg.contains(text), "{text} not in the picture");
        }
    }

    #[test]
    fn a_trace_of_a_fixed_placement_is_refused() {
        let fixed = Trace {
            placements: Vec::new(),
            ..trace()
        };
        assert!(points(&fixed).is_none());
        let dir = tempfile::tempdir().unwrap();
        let e = write(&dir.path().join("x.svg"), &fixed, None).unwrap_err();
        assert!(e.to_string().contains("not of a run that adapts"), "{e}");
    }
}

//! `sustained.svg`: the sustained rate of each system at each frame shape, as bars grouped by
//! frame.
//!
//! A bar's height is the median over repeats of the first goal's answer; a black error bar
//! spans the lowest to the highest when more than one repeat found a rate; the label above
//! says the median and, when some repeats found none, how many did. Every further goal's
//! answer (median over repeats) is a short black tick across the bar. Each bar carries its
//! system's marker in white at its foot (colour and marker tell the systems apart, see
//! [`super::style`]). A system whose searches found no rate at all has no bar: its slot says
//! `no rate: ` and how its searches ended, written up from the axis beside the system's hollow
//! marker, so that nothing there reads as a value. The workload's real-time rate is a dashed
//! line across its group.

use std::path::Path;

use kplace::model::shape::FrameShape;
use plotters::prelude::*;
use plotters::style::FontTransform;
use plotters::style::text_anchor::{HPos, VPos};

use super::axis::{Axis, fmt_num};
use super::frame::{
    AXIS_FONT, Area, BAR_FONT, BAR_GLYPH_SIZE, LegendEntry, Page, SMALL_FONT, Swatch,
    draw_bar_glyph, draw_page, fit_words, font, house_style, text_width, wrap,
};
use super::style::{Fill, MARKER_SIZE, REFERENCE, REFERENCE_DASHES, draw_marker, series_style};
use super::{DrawError, Group, PlotError, Sweep, median};

/// What one bar shows.
struct Bar<'a> {
    group: &'a Group<'a>,
    /// Colour index: the system's.
    system: usize,
    /// Left edge, in slots.
    slot: f64,
    /// Rates found (the first goal's answers).
    rates: Vec<f64>,
    /// Every further goal's name and median answer.
    others: Vec<(String, f64)>,
}

impl Bar<'_> {
    /// The label above the bar, or of the empty slot: `no rate: ` and how the searches ended.
    fn label(&self) -> String {
        let Some(m) = median(&self.rates) else {
            let mut kinds: Vec<&str> = Vec::new();
            for s in &self.group.searches {
                let kind = s.outcome_kind.as_str();
                if !kind.is_empty() && !kinds.contains(&kind) {
                    kinds.push(kind);
                }
            }
            if kinds.is_empty() {
                return "no rate".to_string();
            }
            return format!("no rate: {}", kinds.join(", ").replace('_', " "));
        };
        let n = self.group.searches.len();
        if self.rates.len() < n {
            format!("{} ({} of {n} found a rate)", fmt_num(m), self.rates.len())
        } else {
            fmt_num(m)
        }
    }
}

/// Per frame shape: the shape, the first slot, the slot past its bars, and its real-time rate.
type Span<'a> = (&'a FrameShape, f64, f64, f64);

/// The bars, a slot each, grouped by frame shape in the order the sweep searched them; each shape's
/// span of slots; and the slot past the last.
fn bars<'a>(sweep: &'a Sweep<'a>, systems: &[&'a str]) -> (Vec<Bar<'a>>, Vec<Span<'a>>, f64) {
    let shapes = sweep.shapes();
    let mut bars: Vec<Bar<'_>> = Vec::new();
    let mut spans: Vec<Span<'a>> = Vec::new();
    let mut slot = 0.5;
    for cpi in &shapes {
        let start = slot;
        let mut real_time = f64::NAN;
        for (si, system) in systems.iter().enumerate() {
            let Some(group) = sweep
                .groups
                .iter()
                .find(|g| g.shape == *cpi && g.system == *system)
            else {
                continue;
            };
            real_time = group.searches[0].real_time_rate;
            let rates = group
                .searches
                .iter()
                .filter_map(|s| s.sustained_rate)
                .filter(|r| r.is_finite())
                .collect();
            let names: Vec<&str> = group.searches[0]
                .goals
                .iter()
                .skip(1)
                .map(|g| g.goal.name.as_str())
                .collect();
            let others = names
                .into_iter()
                .enumerate()
                .filter_map(|(k, name)| {
                    let answers: Vec<f64> = group
                        .searches
                        .iter()
                        .filter_map(|s| s.goals.get(k + 1).and_then(|g| g.lower))
                        .collect();
                    Some((name.to_string(), median(&answers)?))
                })
                .collect();
            bars.push(Bar {
                group,
                system: si,
                slot,
                rates,
                others,
            });
            slot += 1.0;
        }
        spans.push((cpi, start, slot, real_time));
        slot += 0.75;
    }
    (bars, spans, slot)
}

/// The legend: a swatch per system, the real-time line, and what bars, ticks and empty slots
/// show (each only where the plot has one); and the first goal's name, if the searches had
/// goals.
fn legend(
    sweep: &Sweep<'_>,
    systems: &[&str],
    bars: &[Bar<'_>],
    spans: &[Span<'_>],
) -> (Vec<LegendEntry>, Option<String>) {
    let mut legend: Vec<LegendEntry> = systems
        .iter()
        .enumerate()
        .map(|(i, s)| LegendEntry::new(Swatch::Bar(series_style(i)), *s))
        .collect();
    if spans.iter().any(|s| s.3.is_finite()) {
        legend.push(LegendEntry::new(
            Swatch::Dashed(REFERENCE_DASHES),
            "real-time rate: one frame per frame period of the workload",
        ));
    }
    let goals: Vec<String> = sweep
        .groups
        .first()
        .map(|g| {
            g.searches[0]
                .goals
                .iter()
                .map(|g| g.goal.name.clone())
                .collect()
        })
        .unwrap_or_default();
    let first = goals.first().cloned();
    let answer = first.as_ref().map_or_else(
        || "the sustained rate".to_string(),
        |g| format!("the {g} goal's answer"),
    );
    if bars.iter().any(|b| !b.rates.is_empty()) {
        let range = if bars.iter().any(|b| b.rates.len() > 1) {
            "; error bar: lowest to highest"
        } else {
            ""
        };
        legend.push(LegendEntry::heading(format!(
            "bar: {answer}, median over repeats{range}"
        )));
    }
    if bars.iter().any(|b| b.rates.is_empty()) {
        legend.push(LegendEntry::heading(
            "no rate: none of the system's searches found one (how they ended follows); no bar",
        ));
    }
    if bars.iter().any(|b| !b.others.is_empty()) {
        legend.push(LegendEntry::heading(format!(
            "black tick: the {} goal's answer (median), labelled",
            goals[1..].join(", ")
        )));
    }
    (legend, first)
}

/// A pixel box: left, right, top, bottom.
type PixelBox = (i32, i32, i32, i32);

/// Under each shape's bars: its name and its real-time rate, and the real-time rate's dashed
/// line across them, broken where it would cross a bar's label (`labels`).
fn draw_spans(
    area: &Area<'_>,
    px: &dyn Fn(f64, f64) -> (i32, i32),
    spans: &[Span<'_>],
    (bottom, y_lo): (i32, f64),
    unit: &str,
    labels: &[PixelBox],
) -> Result<(), DrawError> {
    for (cpi, start, end, real_time) in spans {
        if real_time.is_finite() {
            let (from, to) = (px(start - 0.2, *real_time), px(end + 0.2, *real_time));
            let mut x = from.0;
            let d = REFERENCE_DASHES;
            while x < to.0 {
                let dash = (x + d.dash as i32).min(to.0);
                let crosses = labels
                    .iter()
                    .any(|b| x < b.1 && dash > b.0 && from.1 >= b.2 && from.1 <= b.3);
                if !crosses {
                    area.draw(&PathElement::new(
                        vec![(x, from.1), (dash, from.1)],
                        d.stroke(),
                    ))?;
                }
                x += (d.dash + d.gap) as i32;
            }
        }
        let centre = px((start + end) / 2.0, y_lo).0;
        area.draw(&Text::new(
            cpi.to_string(),
            (centre, bottom + 8),
            font(SMALL_FONT, BLACK, HPos::Center, VPos::Top),
        ))?;
        let real = if real_time.is_finite() {
            format!("real time {} {unit}", fmt_num(*real_time))
        } else {
            "real time unknown".to_string()
        };
        let width = f64::from(px(*end, y_lo).0 - px(*start, y_lo).0) + 20.0;
        for (k, line) in wrap(&real, width, SMALL_FONT).into_iter().enumerate() {
            area.draw(&Text::new(
                line,
                (centre, bottom + 26 + 16 * k as i32),
                font(SMALL_FONT, REFERENCE, HPos::Center, VPos::Top),
            ))?;
        }
    }
    Ok(())
}

/// Where a bar's labels go, in pixels: the top of the chart and the pixel of a value.
struct Frame<'p> {
    top: i32,
    px: &'p dyn Fn(f64, f64) -> (i32, i32),
    y_lo: f64,
}

/// Draws one bar (or its system's hollow marker on the axis when it has no rate), its range
/// and its goals' ticks; returns where its label starts.
fn draw_bar(area: &Area<'_>, b: &Bar<'_>, frame: &Frame<'_>) -> Result<(i32, i32), DrawError> {
    let px = frame.px;
    let style = series_style(b.system);
    let (left, right, mid) = (b.slot + 0.12, b.slot + 0.88, b.slot + 0.5);
    let foot = px(mid, frame.y_lo);
    let label_at = match median(&b.rates) {
        Some(m) => {
            let top = px(left, m);
            area.draw(&Rectangle::new(
                [top, px(right, frame.y_lo)],
                style.colour.filled(),
            ))?;
            if foot.1 - top.1 >= 2 * BAR_GLYPH_SIZE + 6 {
                draw_bar_glyph(area, style, (foot.0, foot.1 - BAR_GLYPH_SIZE - 4))?;
            }
            let lo = b.rates.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = b.rates.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            if b.rates.len() > 1 {
                let (l, r) = (mid - 0.15, mid + 0.15);
                for seg in [
                    [(mid, lo), (mid, hi)],
                    [(l, lo), (r, lo)],
                    [(l, hi), (r, hi)],
                ] {
                    area.draw(&PathElement::new(
                        vec![px(seg[0].0, seg[0].1), px(seg[1].0, seg[1].1)],
                        BLACK.stroke_width(2),
                    ))?;
                }
            }
            px(mid, hi.max(m))
        }
        None => {
            // No bar: the system's hollow marker on the axis, the words above it.
            let at = (foot.0, foot.1 - MARKER_SIZE - 3);
            draw_marker(area, style, Fill::Hollow, at)?;
            (foot.0, at.1 - MARKER_SIZE - 2)
        }
    };
    for (_, answer) in &b.others {
        area.draw(&PathElement::new(
            vec![px(left, *answer), px(right, *answer)],
            BLACK.stroke_width(3),
        ))?;
    }
    Ok(label_at)
}

/// A bar's label, cut to the room between `label_at` and the chart's top: it reads upwards.
fn fitted_label(b: &Bar<'_>, frame: &Frame<'_>, label_at: (i32, i32)) -> String {
    fit_words(&b.label(), f64::from(label_at.1 - frame.top - 6), BAR_FONT)
}

/// Where a bar's label is written, with a few pixels to spare.
fn label_box(b: &Bar<'_>, frame: &Frame<'_>, label_at: (i32, i32)) -> PixelBox {
    let length = text_width(&fitted_label(b, frame, label_at), BAR_FONT).ceil() as i32;
    let half = (BAR_FONT / 1.24 * 0.6).ceil() as i32 + 2;
    let foot = label_at.1 - 5;
    (
        label_at.0 - half,
        label_at.0 + half,
        foot - length - 2,
        foot + 2,
    )
}

/// Writes a bar's words, over every bar: its goals' answers beside their ticks, and its label
/// (the median, or `no rate: ...`) upwards from `label_at`.
fn draw_bar_words(
    area: &Area<'_>,
    b: &Bar<'_>,
    frame: &Frame<'_>,
    label_at: (i32, i32),
) -> Result<(), DrawError> {
    for (name, answer) in &b.others {
        area.draw(&Text::new(
            format!("{name} {}", fmt_num(*answer)),
            (frame.px)(b.slot + 0.9, *answer),
            font(BAR_FONT, BLACK, HPos::Left, VPos::Center),
        ))?;
    }
    let label = fitted_label(b, frame, label_at);
    let colour = if b.rates.is_empty() { REFERENCE } else { BLACK };
    area.draw(&Text::new(
        label,
        (label_at.0, label_at.1 - 5),
        font(BAR_FONT, colour, HPos::Left, VPos::Center).transform(FontTransform::Rotate270),
    ))?;
    Ok(())
}

/// Writes the plot to `path`.
pub fn write(path: &Path, sweep: &Sweep<'_>) -> Result<(), PlotError> {
    let systems = sweep.systems();
    let (bars, spans, slot) = bars(sweep, &systems);
    let slots = (slot - 0.25).max(1.0);

    let unit = sweep.unit();
    let y = Axis::fit(
        bars.iter()
            .flat_map(|b| b.rates.iter().copied().chain(b.others.iter().map(|o| o.1)))
            .chain(spans.iter().map(|s| s.3)),
        false,
        true,
        0.4,
    );
    let x = Axis {
        lo: 0.0,
        hi: slots,
        log: false,
        ticks: Vec::new(),
        minor: Vec::new(),
        labels: super::axis::Labels::Number,
    };

    let (legend, first) = legend(sweep, &systems, &bars, &spans);
    let notes = sweep.notes();
    let goal = first.map_or_else(String::new, |g| format!(", the {g} goal"));
    let title = format!(
        "Sustained rate per frame and system ({unit} per pipeline{goal}, median over repeats)"
    );
    let page = Page::new(&title, &notes, &legend);
    draw_page(path, &page, |area| {
        let mut chart = ChartBuilder::on(area)
            .margin(15)
            .x_label_area_size(64)
            .y_label_area_size(72)
            .build_cartesian_2d(x.coord(), y.coord())?;
        let yl = |p: &f64| y.label(*p);
        house_style(
            chart
                .configure_mesh()
                .disable_x_mesh()
                .y_desc(format!("sustained rate, {unit}"))
                .y_label_formatter(&yl),
        )
        .draw()?;
        let base = area.get_base_pixel();
        let px = |x: f64, y: f64| {
            let (a, b) = chart.backend_coord(&(x, y));
            (a - base.0, b - base.1)
        };
        let bottom = px(0.0, y.lo).1;
        let frame = Frame {
            top: px(0.0, y.hi).1,
            px: &px,
            y_lo: y.lo,
        };
        let mut labels = Vec::new();
        for b in &bars {
            labels.push(draw_bar(area, b, &frame)?);
        }
        let label_boxes: Vec<PixelBox> = bars
            .iter()
            .zip(&labels)
            .map(|(b, at)| label_box(b, &frame, *at))
            .collect();
        draw_spans(area, &px, &spans, (bottom, y.lo), unit, &label_boxes)?;
        for (b, label_at) in bars.iter().zip(labels) {
            draw_bar_words(area, b, &frame, label_at)?;
        }
        if bars.is_empty() {
            area.draw(&Text::new(
                "no searches",
                px(slots / 2.0, (y.lo + y.hi) / 2.0),
                font(AXIS_FONT, REFERENCE, HPos::Center, VPos::Center),
            ))?;
        }
        Ok(())
    })
}

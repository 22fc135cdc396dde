//! `cdf.svg`: the post-frame latency distribution of each system and frame shape at one common rate.
//!
//! Every search of a sweep starts at the same rate per frame shape (`start_rate`), so the first
//! judged (not invalid) trial there is measured under the same load for every system. Its
//! histogram (`TrialLatency::histogram`, HdrHistogram V2 deflate in base64) gives the curve;
//! the repeats of a system are merged into one. A search whose trial has no histogram is left
//! out and named in the notes; nothing is estimated from quantiles. Each curve is in its
//! system and frame shape's colour and carries its marker (see [`super::style`]) where it
//! crosses the median, p90 and p99. The budget at each start rate is a dashed vertical line.

use std::path::Path;

use crate::rate::sweep::{SearchEntry, TrialStatus};
use hdrhistogram::Histogram;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use super::axis::{Axis, fmt_num};
use super::frame::{AXIS_FONT, LegendEntry, Page, Swatch, draw_page, font, house_style};
use super::style::{Fill, REFERENCE, budget_dashes, draw_marker, series_style};
use super::{PlotError, Sweep, same_rate};

/// The fractions where a curve carries its marker: the median, p90 and p99.
pub const MARKED: [f64; 3] = [0.5, 0.9, 0.99];

/// Where the step line `points` first reaches fraction `q`: the latency, ms.
pub fn crossing(points: &[(f64, f64)], q: f64) -> Option<f64> {
    points.iter().find(|p| p.1 >= q - 1e-12).map(|p| p.0)
}

/// Decodes a base64 HdrHistogram V2 (deflate) record.
pub fn decode(text: &str) -> Result<Histogram<u64>, crate::rate::gates::HistogramError> {
    crate::rate::gates::decode_histogram(text)
}

/// The histogram of `search`'s first judged trial at its start rate: `Ok(None)` when that
/// trial does not exist or carries none.
fn start_histogram(search: &SearchEntry) -> Result<Option<Histogram<u64>>, PlotError> {
    let Some(trial) = search
        .trials
        .iter()
        .find(|t| t.status != TrialStatus::Invalid && same_rate(t.rate, search.start_rate))
    else {
        return Ok(None);
    };
    let Some(text) = trial.latency.as_ref().and_then(|l| l.histogram.as_deref()) else {
        return Ok(None);
    };
    decode(text)
        .map(Some)
        .map_err(|message| PlotError::Histogram {
            at: format!(
                "{} at {} (repeat {}), trial at {} {}",
                search.system, search.shape, search.repeat, trial.rate, search.unit
            ),
            message,
        })
}

/// The cumulative distribution of `h` in ms, as a step line ending at 1.
pub fn steps(h: &Histogram<u64>) -> Vec<(f64, f64)> {
    let total = h.len();
    let mut points = Vec::new();
    let mut seen = 0u64;
    for v in h.iter_recorded() {
        let ms = h.highest_equivalent(v.value_iterated_to()) as f64 / 1e6;
        let before = seen as f64 / total as f64;
        seen += v.count_since_last_iteration();
        points.push((ms, before));
        points.push((ms, seen as f64 / total as f64));
    }
    points
}

/// One curve: a system at a frame shape.
struct Curve {
    label: String,
    series: usize,
    points: Vec<(f64, f64)>,
}

/// Writes the plot to `path`.
pub fn write(path: &Path, sweep: &Sweep<'_>) -> Result<(), PlotError> {
    let unit = sweep.unit();
    let mut curves = Vec::new();
    let mut missing = Vec::new();
    let mut budgets: Vec<(f64, String)> = Vec::new();
    for (i, g) in sweep.groups.iter().enumerate() {
        let mut merged: Option<Histogram<u64>> = None;
        let mut runs = 0;
        for s in &g.searches {
            match start_histogram(s)? {
                Some(h) => {
                    runs += 1;
                    match merged.as_mut() {
                        Some(m) => m.add(&h).map_err(|e| PlotError::Histogram {
                            at: format!("merging the histograms of {}", g.label()),
                            message: crate::rate::gates::HistogramError::Merge(e),
                        })?,
                        None => merged = Some(h),
                    }
                }
                None => missing.push(format!("{} #{}", g.label(), s.repeat)),
            }
        }
        let Some(h) = merged.filter(|h| !h.is_empty()) else {
            continue;
        };
        let rate = g.searches[0].start_rate;
        let runs = if runs > 1 {
            format!(" ({runs} runs)")
        } else {
            String::new()
        };
        curves.push(Curve {
            label: format!("{} at {} {unit}{runs}", g.label(), fmt_num(rate)),
            series: i,
            points: steps(&h),
        });
        let budget = g.budget().at(rate).as_secs_f64() * 1e3;
        let text = format!("budget at {} {unit}: {} ms", fmt_num(rate), fmt_num(budget));
        if budget.is_finite() && !budgets.iter().any(|(_, t)| *t == text) {
            budgets.push((budget, text));
        }
    }

    let x = Axis::fit(
        curves
            .iter()
            .flat_map(|c| c.points.iter().map(|p| p.0))
            .chain(budgets.iter().map(|b| b.0))
            .filter(|v| *v > 0.0),
        true,
        false,
        0.05,
    );
    let y = Axis::fraction();

    let mut legend: Vec<LegendEntry> = curves
        .iter()
        .map(|c| LegendEntry::new(Swatch::Line(series_style(c.series)), c.label.clone()))
        .collect();
    if !curves.is_empty() {
        legend.push(LegendEntry::heading(
            "markers on each curve: its median, p90 and p99",
        ));
    }
    for (k, (_, text)) in budgets.iter().enumerate() {
        legend.push(LegendEntry::new(
            Swatch::Dashed(budget_dashes(k)),
            text.clone(),
        ));
    }
    let mut notes = sweep.notes();
    if !missing.is_empty() {
        notes.push(format!(
            "left out, no histogram at the start rate: {}",
            missing.join(", ")
        ));
    }
    let page = Page::new(
        "Post-frame latency CDF at each shape's start rate (first judged trial of each search)",
        &notes,
        &legend,
    );
    draw_page(path, &page, |area| {
        let mut chart = ChartBuilder::on(area)
            .margin(15)
            .x_label_area_size(50)
            .y_label_area_size(72)
            .build_cartesian_2d(x.coord(), y.coord())?;
        let xl = |p: &f64| x.label(*p);
        let yl = |p: &f64| y.label(*p);
        house_style(
            chart
                .configure_mesh()
                .x_desc(if x.log {
                    "post-frame latency, ms (log)"
                } else {
                    "post-frame latency, ms"
                })
                .y_desc("frames at or below")
                .x_label_formatter(&xl)
                .y_label_formatter(&yl),
        )
        .draw()?;
        for (k, (budget, _)) in budgets.iter().enumerate() {
            let line = vec![(x.pos(*budget), y.bottom()), (x.pos(*budget), y.top())];
            let d = budget_dashes(k);
            chart.draw_series(DashedLineSeries::new(line, d.dash, d.gap, d.stroke()))?;
        }
        let base = area.get_base_pixel();
        for c in &curves {
            let style = series_style(c.series);
            let line = c.points.iter().map(|&(ms, q)| (x.pos(ms), y.pos(q)));
            chart.draw_series(LineSeries::new(line, style.colour.stroke_width(2)))?;
            for q in MARKED {
                if let Some(ms) = crossing(&c.points, q) {
                    let at = chart.backend_coord(&(x.pos(ms), y.pos(q)));
                    draw_marker(area, style, Fill::Solid, (at.0 - base.0, at.1 - base.1))?;
                }
            }
        }
        if curves.is_empty() {
            let centre =
                chart.backend_coord(&((x.bottom() + x.top()) / 2.0, (y.bottom() + y.top()) / 2.0));
            area.draw(&Text::new(
                "no histograms",
                (centre.0 - base.0, centre.1 - base.1),
                font(AXIS_FONT, REFERENCE, HPos::Center, VPos::Center),
            ))?;
        }
        Ok(())
    })
}

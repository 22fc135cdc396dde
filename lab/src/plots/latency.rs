//! `latency.svg`: post-frame p99 against offered rate, every trial of every search.
//!
//! Each trial is one marker in its system and frame shape's colour and shape (see
//! [`super::style`]), never joined to the others (the search order says nothing about the
//! system). Its fill says how it went: low-loss for the search's first goal is filled,
//! high-loss outlined, not offered (the sender could not) outlined and struck through; a
//! search without goals (results of version 2) is marked by its trials' status (passed,
//! failed, invalid) the same way. A trial without a latency sits on the top edge. With several
//! series, each series' markers sit a pixel or two sideways of the others' (by at most
//! [`MAX_OFFSET`] pixels, as the legend says), so that trials of different series at the same
//! point stay visible. Each distinct latency budget is a dashed grey line evaluated over the
//! whole rate axis. Axes are logarithmic where their values span more than 20x. The legend
//! lists the series, the budgets and only the fills that occur.

use std::path::Path;

use crate::rate::sweep::{SearchEntry, TrialEntry, TrialStatus};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use super::axis::{Axis, fmt_num};
use super::frame::{AXIS_FONT, KEY_STYLE, LegendEntry, Page, Swatch, draw_page, font, house_style};
use super::style::{Fill, REFERENCE, draw_marker, series_style};
use super::{PlotError, Sweep};

/// Dash patterns (dash, gap) of successive budget lines.
const DASHES: [(u32, u32); 3] = [(8, 5), (3, 4), (14, 4)];

/// The farthest a series' markers sit sideways of their true place, pixels.
pub const MAX_OFFSET: f64 = 6.0;

/// How far sideways the markers of series `i` of `n` sit, pixels: evenly spread over
/// `[-MAX_OFFSET, MAX_OFFSET]`, at most 2 px apart.
pub fn offset(i: usize, n: usize) -> i32 {
    if n < 2 {
        return 0;
    }
    let step = (2.0 * MAX_OFFSET / (n - 1) as f64).min(2.0);
    ((i as f64 - (n - 1) as f64 / 2.0) * step).round() as i32
}

/// How a trial of `search` is filled: by its loss ratio against the search's first goal's,
/// and whether it has a latency to place it by; by its status when the search has no goals.
pub fn fill(search: &SearchEntry, trial: &TrialEntry, has_latency: bool) -> Fill {
    let Some(goal) = search.goals.first() else {
        return match trial.status {
            TrialStatus::Passed => Fill::Solid,
            TrialStatus::Failed => Fill::Hollow,
            TrialStatus::Invalid => Fill::Struck,
        };
    };
    match trial.loss_ratio {
        None => Fill::Struck,
        Some(loss) if loss <= goal.goal.loss_ratio && has_latency => Fill::Solid,
        Some(_) => Fill::Hollow,
    }
}

/// The fill of every trial and its place: series, search, trial, p99 when measured.
fn fills<'a>(sweep: &'a Sweep<'a>) -> impl Iterator<Item = Placed<'a>> + 'a {
    sweep.groups.iter().enumerate().flat_map(|(i, g)| {
        g.searches.iter().flat_map(move |s| {
            s.trials.iter().map(move |t| {
                let p99 = t
                    .latency
                    .as_ref()
                    .map(|l| l.p99_ms)
                    .filter(|v| v.is_finite());
                Placed {
                    series: i,
                    trial: t,
                    p99,
                    fill: fill(s, t, p99.is_some()),
                }
            })
        })
    })
}

/// A trial as drawn.
struct Placed<'a> {
    series: usize,
    trial: &'a TrialEntry,
    p99: Option<f64>,
    fill: Fill,
}

/// The legend: a marker per system and frame shape (with its repeats), a dashed line per
/// latency budget, what each fill that occurs means, and the sideways offset.
fn legend(
    sweep: &Sweep<'_>,
    budgets: &[(crate::rate::LatencyBudget, Vec<&str>)],
) -> Vec<LegendEntry> {
    let mut legend: Vec<LegendEntry> = sweep
        .groups
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let repeats = g.searches.len();
            let text = if repeats > 1 {
                format!("{} ({repeats} repeats)", g.label())
            } else {
                g.label()
            };
            LegendEntry::new(Swatch::Marker(series_style(i), Fill::Solid), text)
        })
        .collect();
    for (b, cpis) in budgets {
        let at = if budgets.len() > 1 {
            format!(" at {}", cpis.join(", "))
        } else {
            String::new()
        };
        legend.push(LegendEntry::new(
            Swatch::Dashed(REFERENCE),
            format!("budget{at}: {b}"),
        ));
    }
    let goal = sweep
        .groups
        .first()
        .and_then(|g| g.searches[0].goals.first())
        .map(|g| {
            format!(
                "the {} goal (at most {}% of frames lost)",
                g.goal.name,
                fmt_num(g.goal.loss_ratio * 100.0)
            )
        });
    let drawn: Vec<Fill> = fills(sweep)
        .filter(|p| p.trial.rate.is_finite())
        .map(|p| p.fill)
        .collect();
    let meaning = |fill: Fill| match (fill, &goal) {
        (Fill::Solid, Some(goal)) => format!("low-loss for {goal}"),
        (Fill::Solid, None) => "passed".to_string(),
        (Fill::Hollow, Some(_)) => "high-loss (on the top edge: no latency measured)".to_string(),
        (Fill::Hollow, None) => "failed (on the top edge: no latency measured)".to_string(),
        (Fill::Struck, Some(_)) => {
            "not offered: the sender could not (says nothing about the system)".to_string()
        }
        (Fill::Struck, None) => "invalid (retried: says nothing about the system)".to_string(),
    };
    for fill in [Fill::Solid, Fill::Hollow, Fill::Struck] {
        if drawn.contains(&fill) {
            legend.push(LegendEntry::new(
                Swatch::Marker(KEY_STYLE, fill),
                meaning(fill),
            ));
        }
    }
    let series = sweep.groups.len();
    let reach = (0..series)
        .map(|i| offset(i, series).abs())
        .max()
        .unwrap_or(0);
    if reach > 0 && !drawn.is_empty() {
        legend.push(LegendEntry::heading(format!(
            "each series' markers sit up to {reach} px sideways of their rate, so that equal \
             trials of different series stay visible"
        )));
    }
    legend
}

/// Writes the plot to `path`.
pub fn write(path: &Path, sweep: &Sweep<'_>) -> Result<(), PlotError> {
    let trials = || {
        sweep.groups.iter().enumerate().flat_map(|(i, g)| {
            g.searches
                .iter()
                .flat_map(move |s| s.trials.iter().map(move |t| (i, *s, t)))
        })
    };
    let unit = sweep.unit();
    let x = Axis::fit(
        trials().map(|(_, _, t)| t.rate).filter(|r| *r > 0.0),
        true,
        true,
        0.05,
    );
    let budgets = sweep.budgets();
    let budget_ms = |b: crate::rate::LatencyBudget, rate: f64| b.at(rate).as_secs_f64() * 1e3;
    // A budget that follows 1/R is unbounded towards rate 0, where a linear axis starts: the
    // line covers only the rates near those tried, and never sets the latency axis alone.
    let lowest_rate = trials()
        .map(|(_, _, t)| t.rate)
        .filter(|r| *r > 0.0)
        .fold(f64::INFINITY, f64::min);
    let budget_from = if x.lo > 0.0 {
        x.lo
    } else if lowest_rate.is_finite() {
        lowest_rate * 0.8
    } else {
        x.hi
    };
    let y = Axis::fit(
        trials()
            .filter_map(|(_, _, t)| t.latency.as_ref().map(|l| l.p99_ms))
            .chain(
                budgets
                    .iter()
                    .flat_map(|(b, _)| [budget_ms(*b, budget_from), budget_ms(*b, x.hi)]),
            )
            .filter(|v| *v > 0.0),
        true,
        true,
        0.12,
    );

    let legend = legend(sweep, &budgets);
    let notes = sweep.notes();
    let page = Page::new(
        "Post-frame p99 latency against offered rate, every trial of every search",
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
                    format!("offered rate, {unit} (log)")
                } else {
                    format!("offered rate, {unit}")
                })
                .y_desc(if y.log {
                    "post-frame p99, ms (log)"
                } else {
                    "post-frame p99, ms"
                })
                .x_label_formatter(&xl)
                .y_label_formatter(&yl),
        )
        .draw()?;

        for (k, (b, _)) in budgets.iter().enumerate() {
            let line: Vec<(f64, f64)> = x
                .samples(120)
                .into_iter()
                .filter(|&rate| rate >= budget_from)
                .map(|rate| (x.pos(rate), y.pos(budget_ms(*b, rate).min(y.hi))))
                .collect();
            let (dash, gap) = DASHES[k % DASHES.len()];
            chart.draw_series(DashedLineSeries::new(
                line,
                dash,
                gap,
                REFERENCE.stroke_width(2),
            ))?;
        }

        let base = area.get_base_pixel();
        let mut any = false;
        let series = sweep.groups.len();
        for p in fills(sweep) {
            if !p.trial.rate.is_finite() {
                continue;
            }
            any = true;
            let y_at = p.p99.map_or(y.top(), |v| y.pos(v));
            let at = chart.backend_coord(&(x.pos(p.trial.rate), y_at));
            let at = (at.0 - base.0 + offset(p.series, series), at.1 - base.1);
            draw_marker(area, series_style(p.series), p.fill, at)?;
        }
        if !any {
            let centre =
                chart.backend_coord(&((x.bottom() + x.top()) / 2.0, (y.bottom() + y.top()) / 2.0));
            area.draw(&Text::new(
                "no trials",
                (centre.0 - base.0, centre.1 - base.1),
                font(AXIS_FONT, REFERENCE, HPos::Center, VPos::Center),
            ))?;
        }
        Ok(())
    })
}

//! `latency.svg`: post-frame p99 against offered rate, every trial of every search.
//!
//! Each trial is one marker, in its system and frame shape's colour, never joined to the others (the
//! search order says nothing about the system): low-loss for the search's first goal is a
//! filled circle, high-loss a cross, not offered (the sender could not) a hollow circle; a
//! trial without a latency sits on the top edge. Each
//! distinct latency budget is a dashed grey line evaluated over the whole rate axis. Axes are
//! logarithmic where their values span more than 20x.

use std::path::Path;

use crate::rate::sweep::{SearchEntry, TrialEntry, TrialStatus};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use super::axis::{Axis, fmt_num};
use super::frame::{
    AXIS_FONT, LegendEntry, Marker, Page, Swatch, draw_marker, draw_page, font, house_style,
};
use super::{PlotError, REFERENCE, Sweep, colour};

/// Dash patterns (dash, gap) of successive budget lines.
const DASHES: [(u32, u32); 3] = [(8, 5), (3, 4), (14, 4)];

/// How a trial of `search` is drawn: by its loss ratio against the search's first goal's,
/// and whether it has a latency to place it by; by its status when the search has no goals
/// (results of version 2).
pub fn marker(search: &SearchEntry, trial: &TrialEntry, has_latency: bool) -> Marker {
    let Some(goal) = search.goals.first() else {
        return match trial.status {
            TrialStatus::Passed => Marker::Filled,
            TrialStatus::Failed => Marker::Cross,
            TrialStatus::Invalid => Marker::Hollow,
        };
    };
    let goal_loss = goal.goal.loss_ratio;
    match trial.loss_ratio {
        None => Marker::Hollow,
        Some(loss) if loss <= goal_loss && has_latency => Marker::Filled,
        Some(_) => Marker::Cross,
    }
}

/// The legend: a swatch per system and frame shape (with its repeats), a dashed line per latency
/// budget, and what the markers mean for the first goal.
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
            LegendEntry::new(Swatch::Fill(colour(i)), text)
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
        .map_or_else(
            || "the first goal".to_string(),
            |g| {
                format!(
                    "the {} goal (at most {}% of frames lost)",
                    g.goal.name,
                    fmt_num(g.goal.loss_ratio * 100.0)
                )
            },
        );
    legend.extend([
        LegendEntry::new(
            Swatch::Marker(Marker::Filled, BLACK),
            format!("low-loss for {goal}"),
        ),
        LegendEntry::new(
            Swatch::Marker(Marker::Cross, BLACK),
            "high-loss (on the top edge: no latency measured)",
        ),
        LegendEntry::new(
            Swatch::Marker(Marker::Hollow, BLACK),
            "not offered: the sender could not (says nothing about the system)",
        ),
    ]);
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
    let page = Page {
        title: "Post-frame p99 latency against offered rate, every trial of every search",
        notes: &notes,
        legend: &legend,
    };
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
        for (i, s, t) in trials() {
            if !t.rate.is_finite() {
                continue;
            }
            any = true;
            let p99 = t
                .latency
                .as_ref()
                .map(|l| l.p99_ms)
                .filter(|v| v.is_finite());
            let at = chart.backend_coord(&(x.pos(t.rate), p99.map_or(y.top(), |v| y.pos(v))));
            let at = (at.0 - base.0, at.1 - base.1);
            draw_marker(area, marker(s, t, p99.is_some()), at, colour(i))?;
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

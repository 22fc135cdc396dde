//! `latency.svg`: post-frame p99 against offered rate, every trial of every search.
//!
//! Each trial is one marker in its system and frame shape's colour and shape (see
//! [`super::style`]), never joined to the others (the search order says nothing about the
//! system). Its fill says how it went: low-loss for the search's first goal is filled,
//! high-loss outlined, not offered (the sender could not) outlined and struck through, as
//! [`Fill`] means them in every plot; a search without goals (results of version 2) is marked
//! by its trials' status (passed, failed, invalid: not offered) the same way. A trial without
//! a latency sits on the top edge. With several series, each series' markers sit sideways of
//! the next series' by [`STEP`] pixels (fewer when many series would reach past
//! [`MAX_OFFSET`]), so that trials of different series at the same point stay visible; the
//! legend says how far the farthest sits. Each distinct latency budget is a grey line
//! evaluated over the whole rate axis, each with its own dash pattern, which its legend key
//! repeats. Where a filled marker lies above a budget line, the legend says why: a trial is
//! judged against its own frame shape's budget, and the goal counts the frames late, not the
//! p99. Axes are logarithmic where their values span more than 20x. The legend lists the
//! series, the budgets and only the fills that occur.

use std::path::Path;

use crate::rate::LatencyBudget;
use crate::rate::sweep::{SearchEntry, TrialEntry, TrialStatus};
use kplace::model::shape::FrameShape;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use super::axis::{Axis, fmt_num};
use super::frame::{AXIS_FONT, KEY_STYLE, LegendEntry, Page, Swatch, draw_page, font, house_style};
use super::style::{Fill, REFERENCE, budget_dashes, draw_marker, series_style};
use super::{PlotError, Sweep};

/// The farthest a series' markers sit sideways of their true place, pixels.
pub const MAX_OFFSET: f64 = 6.0;

/// How far apart sideways the markers of neighbouring series sit, pixels, unless that would
/// take the outermost past [`MAX_OFFSET`].
pub const STEP: f64 = 2.0;

/// How far apart sideways the markers of neighbouring series of `n` sit, pixels (before
/// rounding to whole pixels): [`STEP`], or less where `n` series would reach past
/// [`MAX_OFFSET`].
pub fn step(n: usize) -> f64 {
    if n < 2 {
        return 0.0;
    }
    (2.0 * MAX_OFFSET / (n - 1) as f64).min(STEP)
}

/// How far sideways the markers of series `i` of `n` sit, pixels: centred on the true place,
/// [`step`] apart, within `[-MAX_OFFSET, MAX_OFFSET]`.
pub fn offset(i: usize, n: usize) -> i32 {
    ((i as f64 - n.saturating_sub(1) as f64 / 2.0) * step(n)).round() as i32
}

/// How a trial of `search` is filled: by its loss ratio against the search's first goal's,
/// and whether it has a latency to place it by; by its status when the search has no goals
/// (an invalid trial was not offered).
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
                    search: s,
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
    search: &'a SearchEntry,
    trial: &'a TrialEntry,
    p99: Option<f64>,
    fill: Fill,
}

impl Placed<'_> {
    /// Whether the marker is filled and its p99 lies above the budget line `budget` at its
    /// rate.
    fn filled_above(&self, budget: LatencyBudget) -> bool {
        self.fill == Fill::Solid
            && self
                .p99
                .is_some_and(|p99| p99 > budget.at(self.trial.rate).as_secs_f64() * 1e3)
    }
}

/// Why filled markers lie above a budget line, where some do: a line of another frame shape's
/// budget (a trial is judged against its own), or the trial's own budget, which a p99 may
/// exceed while the frames late stay within the goal's loss ratio.
fn above_budget(sweep: &Sweep<'_>, budgets: &[(LatencyBudget, Vec<&FrameShape>)]) -> Vec<String> {
    let placed: Vec<Placed<'_>> = fills(sweep).filter(|p| p.trial.rate.is_finite()).collect();
    let mut why = Vec::new();
    let others = placed.iter().any(|p| {
        budgets
            .iter()
            .any(|(b, _)| *b != p.search.latency_budget && p.filled_above(*b))
            && !p.filled_above(p.search.latency_budget)
    });
    if others {
        why.push(
            "a filled marker above another frame shape's budget line is within its own: each \
             trial is judged against its own shape's budget"
                .to_string(),
        );
    }
    let own: Vec<&Placed<'_>> = placed
        .iter()
        .filter(|p| p.filled_above(p.search.latency_budget) && !p.search.goals.is_empty())
        .collect();
    // Results written before `frames_timed` counted the late frames over every frame sent.
    let untimed = |p: &&Placed<'_>| {
        p.trial
            .measurement
            .as_ref()
            .is_none_or(|m| m.frames_timed == 0)
    };
    if own.iter().any(untimed) {
        why.push(
            "a filled marker above its own budget line: these results counted its late frames \
             over every frame sent, the warm-up's too, which understates them"
                .to_string(),
        );
    }
    let loss = own
        .iter()
        .filter(|p| !untimed(p))
        .filter_map(|p| p.search.goals.first())
        .map(|g| g.goal.loss_ratio)
        .fold(None, |most: Option<f64>, l| {
            Some(most.map_or(l, |m| m.max(l)))
        });
    if let Some(loss) = loss {
        why.push(format!(
            "a filled marker above its own budget line: its p99 is over the budget, yet at most \
             {}% of its frames were late or lost, which the goal allows (it counts frames, not \
             the p99)",
            fmt_num(loss * 100.0)
        ));
    }
    why
}

/// The legend: a marker per system and frame shape (with its repeats), a line per latency
/// budget (its own dashes), what each fill that occurs means, why filled markers lie above a
/// budget line where some do, and the sideways offset.
fn legend(sweep: &Sweep<'_>, budgets: &[(LatencyBudget, Vec<&FrameShape>)]) -> Vec<LegendEntry> {
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
    for (k, (b, cpis)) in budgets.iter().enumerate() {
        let at = if budgets.len() > 1 {
            let shapes: Vec<String> = cpis.iter().map(|s| s.to_string()).collect();
            format!(" at {}", shapes.join(", "))
        } else {
            String::new()
        };
        legend.push(LegendEntry::new(
            Swatch::Dashed(budget_dashes(k)),
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
        (Fill::Solid, Some(goal)) => format!("{}: low-loss for {goal}", fill.meaning()),
        (Fill::Solid, None) => format!("{}: passed", fill.meaning()),
        (Fill::Hollow, Some(_)) => format!(
            "{}: high-loss (on the top edge: no latency measured)",
            fill.meaning()
        ),
        (Fill::Hollow, None) => format!(
            "{}: failed (on the top edge: no latency measured)",
            fill.meaning()
        ),
        (fill, _) => fill.meaning().to_string(),
    };
    for fill in [Fill::Solid, Fill::Hollow, Fill::Struck] {
        if drawn.contains(&fill) {
            legend.push(LegendEntry::new(
                Swatch::Marker(KEY_STYLE, fill),
                meaning(fill),
            ));
        }
    }
    legend.extend(
        above_budget(sweep, budgets)
            .into_iter()
            .map(LegendEntry::heading),
    );
    let series = sweep.groups.len();
    let reach = (0..series)
        .map(|i| offset(i, series).abs())
        .max()
        .unwrap_or(0);
    if reach > 0 && !drawn.is_empty() {
        let apart = step(series);
        let about = if apart.fract() == 0.0 { "" } else { "about " };
        legend.push(LegendEntry::heading(format!(
            "each series' markers sit {about}{} px sideways of the next series', up to {reach} \
             px from their rate, so that equal trials of different series stay visible",
            fmt_num(apart)
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
            let d = budget_dashes(k);
            chart.draw_series(DashedLineSeries::new(line, d.dash, d.gap, d.stroke()))?;
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

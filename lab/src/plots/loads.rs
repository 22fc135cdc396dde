//! `loads.svg`: every load each search measured, classified for each of its goals: the
//! evidence behind every answer.
//!
//! One row per search and goal (`all-cpu 1024x128 #0 robust`), rates along the x axis (log
//! where they span more than 20x), every marker in the colour and shape of its system and
//! frame shape (see [`super::style`]), which also leads the row's label: a load the goal's
//! trials decided meets it is filled, one they decided fails it outlined, one still undecided
//! outlined with a dot at its centre, one the sender never offered (every trial at it
//! unoffered) outlined and struck through, as [`Fill`] means them in every plot; the goal's
//! answer (its relevant lower bound) is ringed, and
//! the row's label ends with how the goal's search ended. Rows follow the search order, goals
//! in their order within a search. The legend explains only the fills that occur.

use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use super::axis::{Axis, Labels, fmt_num};
use super::frame::{
    AXIS_FONT, KEY_STYLE, LegendEntry, Page, SMALL_FONT, Swatch, draw_page, font, house_style,
};
use super::style::{Fill, MARKER_SIZE, REFERENCE, draw_marker, series_style};
use super::{PlotError, Sweep, same_rate};
use crate::rate::Class;

/// One row: a search's goal, its series, its label, and the loads it classified.
struct Row {
    series: usize,
    label: String,
    /// `(load, fill)` of every load tried.
    points: Vec<(f64, Fill)>,
    answer: Option<f64>,
}

/// How a load classified `class` is filled; `measured`: whether any trial at it was (one
/// whose every trial the sender could not offer was not).
fn fill(class: Class, measured: bool) -> Fill {
    match class {
        _ if !measured => Fill::Struck,
        Class::Lower => Fill::Solid,
        Class::Upper => Fill::Hollow,
        Class::Undecided => Fill::Dot,
    }
}

/// The legend: what each fill that occurs means, and the ring where an answer is ringed.
fn legend(rows: &[Row]) -> Vec<LegendEntry> {
    let drawn = |fill: Fill| rows.iter().any(|r| r.points.iter().any(|p| p.1 == fill));
    let mut legend = Vec::new();
    for (fill, why) in [
        (
            Fill::Solid,
            ": its trials decided it, whatever more would show",
        ),
        (Fill::Hollow, ": decided likewise"),
        (Fill::Dot, " (not enough full-length trials)"),
        (Fill::Struck, ""),
    ] {
        if drawn(fill) {
            legend.push(LegendEntry::new(
                Swatch::Marker(KEY_STYLE, fill),
                format!("{}{why}", fill.meaning()),
            ));
        }
    }
    if rows.iter().any(|r| r.answer.is_some()) {
        legend.push(LegendEntry::heading(
            "ringed: the goal's answer, the highest load meeting it below every load failing it",
        ));
    }
    legend
}

/// Writes the plot to `path`.
pub fn write(path: &Path, sweep: &Sweep<'_>) -> Result<(), PlotError> {
    let mut rows = Vec::new();
    for (i, g) in sweep.groups.iter().enumerate() {
        for s in &g.searches {
            let repeat = if g.searches.len() > 1 {
                format!(" #{}", s.repeat)
            } else {
                String::new()
            };
            for (k, goal) in s.goals.iter().enumerate() {
                rows.push(Row {
                    series: i,
                    label: format!(
                        "{}{repeat} {}: {}",
                        g.label(),
                        goal.goal.name,
                        goal.lower.map_or_else(
                            || goal.ending.kind().replace('_', " "),
                            |l| format!(
                                "{} ({})",
                                fmt_num(l),
                                goal.ending.kind().replace('_', " ")
                            )
                        )
                    ),
                    points: s
                        .loads
                        .iter()
                        .filter_map(|l| Some((l.load, fill(*l.classes.get(k)?, l.trials > 0))))
                        .collect(),
                    answer: goal.lower,
                });
            }
        }
    }
    let unit = sweep.unit();
    let x = Axis::fit(
        rows.iter()
            .flat_map(|r| r.points.iter().map(|p| p.0))
            .filter(|v| *v > 0.0),
        true,
        false,
        0.05,
    );
    let n = rows.len().max(1) as f64;
    let y = Axis {
        lo: 0.0,
        hi: n,
        log: false,
        ticks: Vec::new(),
        minor: Vec::new(),
        labels: Labels::Number,
    };
    let legend = legend(&rows);
    let notes = sweep.notes();
    let page = Page::new(
        "Every load measured, classified for each goal (one row per search and goal)",
        &notes,
        &legend,
    );
    // Rows read top-down: row 0 at the top.
    let row_y = |k: usize| n - k as f64 - 0.5;
    draw_page(path, &page, |area| {
        let mut chart = ChartBuilder::on(area)
            .margin(15)
            .x_label_area_size(50)
            .y_label_area_size(10)
            .build_cartesian_2d(x.coord(), y.coord())?;
        let xl = |p: &f64| x.label(*p);
        house_style(
            chart
                .configure_mesh()
                .disable_y_mesh()
                .x_desc(if x.log {
                    format!("offered rate, {unit} (log)")
                } else {
                    format!("offered rate, {unit}")
                })
                .x_label_formatter(&xl),
        )
        .draw()?;
        let base = area.get_base_pixel();
        let px = |xv: f64, yv: f64| {
            let (a, b) = chart.backend_coord(&(x.pos(xv), yv));
            (a - base.0, b - base.1)
        };
        let left = chart.backend_coord(&(x.bottom(), 0.0)).0 - base.0;
        for (k, row) in rows.iter().enumerate() {
            let yv = row_y(k);
            let style = series_style(row.series);
            let label_y = px(x.lo, yv + 0.32).1;
            draw_marker(area, style, Fill::Solid, (left + 4 + MARKER_SIZE, label_y))?;
            area.draw(&Text::new(
                row.label.clone(),
                (left + 10 + 2 * MARKER_SIZE, label_y),
                font(SMALL_FONT, BLACK, HPos::Left, VPos::Center),
            ))?;
            for &(load, fill) in &row.points {
                let at = px(load, yv - 0.12);
                draw_marker(area, style, fill, at)?;
                if row.answer.is_some_and(|a| same_rate(a, load)) {
                    area.draw(&Circle::new(at, MARKER_SIZE + 4, BLACK.stroke_width(2)))?;
                }
            }
        }
        if rows.is_empty() {
            area.draw(&Text::new(
                "no loads measured",
                px(x.value((x.bottom() + x.top()) / 2.0), n / 2.0),
                font(AXIS_FONT, REFERENCE, HPos::Center, VPos::Center),
            ))?;
        }
        Ok(())
    })
}

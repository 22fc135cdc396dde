//! `stages.svg`: where each system spends a frame, stage by stage, at its sustained rate.
//!
//! One stacked bar per system and frame shape, one segment per stage, from the last full-length trial at
//! the sustained rate of the repeat whose rate is the median (the lower middle of an even
//! count). A GPU stage counts its GPU stream time per frame where it was profiled, its host
//! time otherwise. Segments are coloured per stage and device class (`cpu`, `gpu`), each
//! carrying its stage's marker in white where it is tall enough (see [`super::style`]). A
//! system without a rate or without stage times has no bar: its slot says why (`no rate: ...`),
//! written up from the axis, so that nothing there reads as a value.

use std::path::Path;

use crate::rate::Stage;
use crate::rate::sweep::{SearchEntry, StageTime, TrialEntry, TrialStatus};
use plotters::prelude::*;
use plotters::style::FontTransform;
use plotters::style::text_anchor::{HPos, VPos};

use super::axis::{Axis, Labels, fmt_num};
use super::frame::{
    AXIS_FONT, BAR_FONT, BAR_GLYPH_SIZE, LegendEntry, Page, SMALL_FONT, Swatch, draw_bar_glyph,
    draw_page, fit_words, font, house_style, text_width, wrap,
};
use super::style::{REFERENCE, series_style};
use super::{Group, PlotError, Sweep, same_rate};

/// `cpu` or `gpu`: the class of a stage's device (`cpu`, `gpu0`, ...).
pub fn device_class(device: &str) -> &'static str {
    if device.starts_with("gpu") {
        "gpu"
    } else {
        "cpu"
    }
}

/// A stage's time per frame, ms: a GPU stage's profiled stream time when there is one.
pub fn stage_ms(stage: &StageTime) -> f64 {
    match (device_class(&stage.device), stage.gpu_ms_per_frame) {
        ("gpu", Some(gpu)) => gpu,
        _ => stage.per_frame_ms,
    }
}

/// The search and trial a bar is drawn from, or why there is none.
type Chosen<'a> = Result<(&'a SearchEntry, &'a TrialEntry), &'static str>;

/// What a group's bar is drawn from.
fn chosen<'a>(group: &Group<'a>) -> Chosen<'a> {
    let mut found: Vec<(&SearchEntry, f64)> = group
        .searches
        .iter()
        .filter_map(|s| s.sustained_rate.filter(|r| r.is_finite()).map(|r| (*s, r)))
        .collect();
    found.sort_by(|a, b| a.1.total_cmp(&b.1));
    let Some(&(search, rate)) = found.get(found.len().saturating_sub(1) / 2) else {
        return Err("no rate: no search found one");
    };
    let trial = search
        .trials
        .iter()
        .rev()
        .find(|t| {
            t.stage == Stage::Final && t.status != TrialStatus::Invalid && same_rate(t.rate, rate)
        })
        .ok_or("no stage times: no full-length trial at the rate")?;
    if trial.stages.is_empty() {
        return Err("no stage times: the system reported none");
    }
    Ok((search, trial))
}

/// Writes the plot to `path`.
pub fn write(path: &Path, sweep: &Sweep<'_>) -> Result<(), PlotError> {
    // The legend's stages, as (name, class), in order of first appearance.
    let mut keys: Vec<(String, &str)> = Vec::new();
    let bars: Vec<(&Group<'_>, Chosen<'_>)> = sweep.groups.iter().map(|g| (g, chosen(g))).collect();
    for (_, c) in &bars {
        if let Ok((_, t)) = c {
            for s in &t.stages {
                let key = (s.name.clone(), device_class(&s.device));
                if !keys.contains(&key) {
                    keys.push(key);
                }
            }
        }
    }
    let totals: Vec<f64> = bars
        .iter()
        .filter_map(|(_, c)| c.as_ref().ok())
        .map(|(_, t)| t.stages.iter().map(stage_ms).sum())
        .collect();
    let y = Axis::fit(totals, false, true, 0.45);
    let n = bars.len().max(1) as f64;
    let x = Axis {
        lo: 0.0,
        hi: n,
        log: false,
        ticks: Vec::new(),
        minor: Vec::new(),
        labels: Labels::Number,
    };

    let legend: Vec<LegendEntry> = keys
        .iter()
        .enumerate()
        .map(|(i, (name, class))| {
            LegendEntry::new(Swatch::Bar(series_style(i)), format!("{name} ({class})"))
        })
        .collect();
    let mut notes = sweep.notes();
    notes.push(
        "each bar: the median repeat's last full-length trial at its sustained rate; GPU \
         stages: GPU stream time per frame where profiled"
            .to_string(),
    );
    let page = Page::new(
        "Per-stage time per frame at the sustained rate (stacked, one bar per system and frame shape)",
        &notes,
        &legend,
    );
    draw_page(path, &page, |area| {
        let mut chart = ChartBuilder::on(area)
            .margin(15)
            .x_label_area_size(80)
            .y_label_area_size(72)
            .build_cartesian_2d(x.coord(), y.coord())?;
        let yl = |p: &f64| y.label(*p);
        house_style(
            chart
                .configure_mesh()
                .disable_x_mesh()
                .y_desc("time per frame, ms")
                .y_label_formatter(&yl),
        )
        .draw()?;
        let base = area.get_base_pixel();
        let px = |x: f64, y: f64| {
            let (a, b) = chart.backend_coord(&(x, y));
            (a - base.0, b - base.1)
        };
        let bottom = px(0.0, y.lo).1;
        let top = px(0.0, y.hi).1;
        let slot_px = f64::from(px(1.0, y.lo).0 - px(0.0, y.lo).0);
        for (i, (group, chosen)) in bars.iter().enumerate() {
            let (left, right, mid) = (i as f64 + 0.2, i as f64 + 0.8, i as f64 + 0.5);
            let (label, label_at) = match chosen {
                Ok((search, trial)) => {
                    let mut sum = 0.0;
                    for s in &trial.stages {
                        let k = keys
                            .iter()
                            .position(|(n, c)| *n == s.name && *c == device_class(&s.device))
                            .unwrap_or(0);
                        let ms = stage_ms(s);
                        let style = series_style(k);
                        let (top, foot) = (px(left, sum + ms), px(right, sum));
                        area.draw(&Rectangle::new([top, foot], style.colour.filled()))?;
                        if foot.1 - top.1 >= 2 * BAR_GLYPH_SIZE + 4 {
                            draw_bar_glyph(area, style, (px(mid, 0.0).0, (top.1 + foot.1) / 2))?;
                        }
                        sum += ms;
                    }
                    let rate = search.sustained_rate.unwrap_or(trial.rate);
                    (
                        format!("{} ms at {} {}", fmt_num(sum), fmt_num(rate), search.unit),
                        px(mid, sum),
                    )
                }
                // No bar: the words alone, written up from the axis.
                Err(why) => (why.to_string(), (px(mid, y.lo).0, bottom + 2)),
            };
            // Without room for the rate, the time alone.
            let room = f64::from(label_at.1 - top - 6);
            let label = match label.split_once(" at ") {
                Some((time, _)) if chosen.is_ok() && text_width(&label, BAR_FONT) > room => {
                    fit_words(time, room, BAR_FONT)
                }
                _ => fit_words(&label, room, BAR_FONT),
            };
            let colour = if chosen.is_ok() { BLACK } else { REFERENCE };
            area.draw(&Text::new(
                label,
                (label_at.0, label_at.1 - 5),
                font(BAR_FONT, colour, HPos::Left, VPos::Center)
                    .transform(FontTransform::Rotate270),
            ))?;
            let mut line_y = bottom + 8;
            for text in wrap(group.system, slot_px - 6.0, SMALL_FONT)
                .into_iter()
                .chain(wrap(&group.shape.to_string(), slot_px - 6.0, SMALL_FONT))
                .take(4)
            {
                area.draw(&Text::new(
                    text,
                    (px(mid, y.lo).0, line_y),
                    font(SMALL_FONT, BLACK, HPos::Center, VPos::Top),
                ))?;
                line_y += 16;
            }
        }
        if bars.is_empty() {
            area.draw(&Text::new(
                "no searches",
                px(n / 2.0, (y.lo + y.hi) / 2.0),
                font(AXIS_FONT, REFERENCE, HPos::Center, VPos::Center),
            ))?;
        }
        Ok(())
    })
}

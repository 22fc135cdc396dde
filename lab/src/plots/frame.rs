//! The page every plot is drawn on: a title block (title and wrapped notes) on top, the
//! chart on the left, and the legend in its own panel on the right, so that a legend never
//! covers data.
//!
//! Text is laid out with a width estimate (0.6 x font size per character, font size as the
//! SVG states it): wrapped lines stay inside their panel, and legend rows never overlap; the
//! tests check both by that estimate and as rendered with real fonts. A legend key shows its
//! series as the chart draws it ([`Swatch`]): a marker, a bar with its white marker, a line.

use std::path::Path;

use plotters::chart::MeshStyle;
use plotters::coord::Shift;
use plotters::coord::ranged1d::Ranged;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::DrawError;
use super::PlotError;
use super::style::{Dashes, Fill, SeriesStyle, Shape, draw_marker, draw_shape};

/// Page width, pixels.
pub const WIDTH: u32 = 1000;
/// Height of the chart and legend panels, pixels.
pub const BODY_HEIGHT: u32 = 560;
/// Width of the legend panel, pixels.
pub const LEGEND_WIDTH: u32 = 290;

/// Font sizes as plotters takes them (the SVG states `size / 1.24`).
pub const TITLE_FONT: f64 = 20.0;
/// Notes under the title.
pub const NOTE_FONT: f64 = 14.0;
/// Legend entries, tick labels and category labels.
pub const SMALL_FONT: f64 = 13.0;
/// Axis descriptions.
pub const AXIS_FONT: f64 = 15.0;
/// Labels on bars.
pub const BAR_FONT: f64 = 12.0;

/// The drawing area of a page, in pixels.
pub type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// The width in pixels a line of `text` takes at plotters font size `font`, as estimated.
pub fn text_width(text: &str, font: f64) -> f64 {
    0.6 * font / 1.24 * text.chars().count() as f64
}

/// `text` as it fits in `room` pixels at `font`: whole, else its first words ending in `...`
/// (never a word cut short, which could read as another number), else `...` alone.
pub fn fit_words(text: &str, room: f64, font: f64) -> String {
    if text_width(text, font) <= room {
        return text.to_string();
    }
    let mut kept = String::new();
    for word in text.split_whitespace() {
        let longer = if kept.is_empty() {
            word.to_string()
        } else {
            format!("{kept} {word}")
        };
        if text_width(&format!("{longer}..."), font) > room {
            break;
        }
        kept = longer;
    }
    format!("{kept}...")
}

/// `text` broken at spaces (or inside words longer than a line) into lines of at most
/// `width` pixels at `font`.
pub fn wrap(text: &str, width: f64, font: f64) -> Vec<String> {
    let per_char = 0.6 * font / 1.24;
    let max = ((width / per_char).floor() as usize).max(4);
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let mut word: Vec<char> = word.chars().collect();
        while word.len() > max {
            if !line.is_empty() {
                lines.push(std::mem::take(&mut line));
            }
            lines.push(word.drain(..max).collect());
        }
        let word: String = word.into_iter().collect();
        let needed = line.chars().count() + usize::from(!line.is_empty()) + word.chars().count();
        if needed > max && !line.is_empty() {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(&word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// A text style at plotters font size `size`, anchored at `h`, `v`.
pub fn font(size: f64, colour: RGBColor, h: HPos, v: VPos) -> TextStyle<'static> {
    ("sans-serif", size)
        .into_font()
        .color(&colour)
        .pos(Pos::new(h, v))
}

/// The key of a legend entry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Swatch {
    /// A filled square: a fill that carries no marker (a kind of span).
    Block(RGBColor),
    /// A bar's series: a filled square carrying the series' marker in white, as its bars do.
    Bar(SeriesStyle),
    /// A line's series: a short line through the series' marker, as its curve has.
    Line(SeriesStyle),
    /// A marker: a point series (filled), or what a marker's fill says (in black).
    Marker(SeriesStyle, Fill),
    /// A reference line, dashed as it is drawn.
    Dashed(Dashes),
}

/// The style of the keys that explain a marker's fill, whatever the series.
pub const KEY_STYLE: SeriesStyle = SeriesStyle {
    colour: BLACK,
    shape: Shape::Circle,
};

/// Draws the white marker that a bar of `style` carries at pixel `at`.
pub fn draw_bar_glyph(
    area: &Area<'_>,
    style: SeriesStyle,
    at: (i32, i32),
) -> Result<(), DrawError> {
    draw_shape(area, (style.shape, WHITE), Fill::Solid, at, BAR_GLYPH_SIZE)
}

/// The half-size of the marker a bar carries, pixels.
pub const BAR_GLYPH_SIZE: i32 = 4;

/// One legend entry: its key and its words.
#[derive(Debug, Clone, PartialEq)]
pub struct LegendEntry {
    /// The key; `None` for a heading.
    pub swatch: Option<Swatch>,
    /// The words, wrapped to the panel.
    pub text: String,
}

impl LegendEntry {
    /// An entry with a key.
    pub fn new(swatch: Swatch, text: impl Into<String>) -> Self {
        Self {
            swatch: Some(swatch),
            text: text.into(),
        }
    }

    /// A heading (no key).
    pub fn heading(text: impl Into<String>) -> Self {
        Self {
            swatch: None,
            text: text.into(),
        }
    }
}

/// What a page shows around its chart.
pub struct Page<'a> {
    /// The title: what the plot shows.
    pub title: &'a str,
    /// Lines under the title: the budget rule, what was left out.
    pub notes: &'a [String],
    /// The legend, in order.
    pub legend: &'a [LegendEntry],
    /// The page's width, pixels ([`WIDTH`] unless a plot needs more).
    pub width: u32,
    /// The height of the chart and legend panels, pixels.
    pub body_height: u32,
}

impl<'a> Page<'a> {
    /// A page of the usual size.
    pub fn new(title: &'a str, notes: &'a [String], legend: &'a [LegendEntry]) -> Self {
        Self {
            title,
            notes,
            legend,
            width: WIDTH,
            body_height: BODY_HEIGHT,
        }
    }
}

/// The mesh every plot draws: light grey grid lines, and the fonts of its axis descriptions
/// and tick labels.
pub fn house_style<'m, 'a, 'b, X, Y, DB>(
    mesh: &'m mut MeshStyle<'a, 'b, X, Y, DB>,
) -> &'m mut MeshStyle<'a, 'b, X, Y, DB>
where
    X: Ranged<ValueType: std::fmt::Debug>,
    Y: Ranged<ValueType: std::fmt::Debug>,
    DB: DrawingBackend,
{
    mesh.light_line_style(RGBColor(242, 242, 242))
        .bold_line_style(RGBColor(215, 215, 215))
        .axis_desc_style(("sans-serif", AXIS_FONT))
        .label_style(("sans-serif", SMALL_FONT))
}

/// Writes the page to `path` as an SVG: title block, legend panel, and the chart that
/// `chart` draws into the area left. The picture is drawn in memory and written whole
/// ([`kplace::os::write`]): never half a picture, never onto anything but a regular file.
pub fn draw_page(
    path: &Path,
    page: &Page<'_>,
    chart: impl FnOnce(&Area<'_>) -> Result<(), DrawError>,
) -> Result<(), PlotError> {
    let width = f64::from(page.width) - 20.0;
    let title_lines = wrap(page.title, width, TITLE_FONT);
    let note_lines: Vec<String> = page
        .notes
        .iter()
        .flat_map(|n| wrap(n, width, NOTE_FONT))
        .collect();
    let title_height = 12 + 24 * title_lines.len() as u32 + 17 * note_lines.len() as u32 + 8;
    let mut svg = String::new();
    let root = SVGBackend::with_string(&mut svg, (page.width, title_height + page.body_height))
        .into_drawing_area();
    let draw = || -> Result<(), DrawError> {
        root.fill(&WHITE)?;
        let (head, body) = root.split_vertically(title_height);
        let mut y = 12;
        for line in &title_lines {
            head.draw(&Text::new(
                line.clone(),
                (10, y),
                font(TITLE_FONT, BLACK, HPos::Left, VPos::Top),
            ))?;
            y += 24;
        }
        for line in &note_lines {
            head.draw(&Text::new(
                line.clone(),
                (10, y),
                font(NOTE_FONT, RGBColor(70, 70, 70), HPos::Left, VPos::Top),
            ))?;
            y += 17;
        }
        let (plot, legend) = body.split_horizontally(page.width - LEGEND_WIDTH);
        chart(&plot)?;
        draw_legend(&legend, page.legend)?;
        root.present()?;
        Ok(())
    };
    let drawn = draw();
    drop(root);
    drawn.map_err(|DrawError { text }| PlotError::Draw {
        path: path.to_path_buf(),
        message: text,
    })?;
    kplace::os::write::write_whole(path, kplace::os::write::Kind::File, svg.as_bytes())?;
    Ok(())
}

/// Draws the legend rows top-down in a box filling the panel's width.
fn draw_legend(area: &Area<'_>, entries: &[LegendEntry]) -> Result<(), DrawError> {
    if entries.is_empty() {
        return Ok(());
    }
    let (x0, y0) = (6, 14);
    let text_x = x0 + 34;
    let text_width = f64::from(LEGEND_WIDTH) - f64::from(text_x) - 14.0;
    let rows: Vec<(Option<Swatch>, Vec<String>)> = entries
        .iter()
        .map(|e| {
            let width = if e.swatch.is_some() {
                text_width
            } else {
                text_width + 28.0
            };
            (e.swatch, wrap(&e.text, width, SMALL_FONT))
        })
        .collect();
    let height: i32 = rows
        .iter()
        .map(|(_, l)| 16 * l.len() as i32 + 5)
        .sum::<i32>()
        + 10;
    let right = LEGEND_WIDTH as i32 - 8;
    area.draw(&Rectangle::new(
        [(x0, y0), (right, y0 + height)],
        RGBColor(180, 180, 180).stroke_width(1),
    ))?;
    let mut y = y0 + 8;
    for (swatch, lines) in rows {
        let mid = y + 7;
        let key = x0 + 8;
        if let Some(swatch) = swatch {
            draw_swatch(area, swatch, (key, mid))?;
        }
        let x = if swatch.is_some() { text_x } else { key };
        for line in lines {
            area.draw(&Text::new(
                line,
                (x, y),
                font(SMALL_FONT, BLACK, HPos::Left, VPos::Top),
            ))?;
            y += 16;
        }
        y += 5;
    }
    Ok(())
}

/// The width of a reference line's legend key, pixels.
const SWATCH_WIDTH: i32 = 22;

/// Draws a legend key about 20 px wide whose left middle is `(key, mid)`.
fn draw_swatch(area: &Area<'_>, swatch: Swatch, (key, mid): (i32, i32)) -> Result<(), DrawError> {
    match swatch {
        Swatch::Block(c) => {
            area.draw(&Rectangle::new(
                [(key, mid - 6), (key + 20, mid + 6)],
                c.filled(),
            ))?;
        }
        Swatch::Bar(style) => {
            area.draw(&Rectangle::new(
                [(key, mid - 7), (key + 20, mid + 7)],
                style.colour.filled(),
            ))?;
            draw_bar_glyph(area, style, (key + 10, mid))?;
        }
        Swatch::Line(style) => {
            area.draw(&PathElement::new(
                vec![(key - 2, mid), (key + 22, mid)],
                style.colour.stroke_width(2),
            ))?;
            draw_marker(area, style, Fill::Solid, (key + 10, mid))?;
        }
        Swatch::Marker(style, fill) => draw_marker(area, style, fill, (key + 10, mid))?,
        Swatch::Dashed(d) => {
            // The line's own pattern over the key's width, as many dashes as fit.
            let step = (d.dash + d.gap).max(1) as i32;
            let mut dx = 0;
            while dx < SWATCH_WIDTH {
                let end = (dx + d.dash as i32).min(SWATCH_WIDTH);
                area.draw(&PathElement::new(
                    vec![(key + dx, mid), (key + end, mid)],
                    d.stroke(),
                ))?;
                dx += step;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_too_long_loses_whole_words() {
        assert_eq!(
            fit_words("0.685 ms at 1134 CPI/s", 500.0, BAR_FONT),
            "0.685 ms at 1134 CPI/s"
        );
        let room = text_width("0.685 ms at...", BAR_FONT) + 1.0;
        assert_eq!(
            fit_words("0.685 ms at 1134 CPI/s", room, BAR_FONT),
            "0.685 ms at..."
        );
        assert_eq!(fit_words("0.685 ms", 5.0, BAR_FONT), "...");
    }

    #[test]
    fn wrapping_keeps_every_line_within_the_width() {
        let text = "budget at 1024x128: deadline (max of 6.4 ms and 1/R), a_very_long_word_without_spaces_at_all";
        let lines = wrap(text, 120.0, SMALL_FONT);
        assert!(lines.len() > 2, "{lines:?}");
        for line in &lines {
            assert!(text_width(line, SMALL_FONT) <= 120.0, "{line}");
        }
        let joined: String = lines.concat();
        assert_eq!(joined.replace(' ', ""), text.replace(' ', ""));
    }
}

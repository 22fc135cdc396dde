//! How a series looks: a colour from a colour-blind-safe palette and a marker shape, assigned
//! so that no two series of a plot look alike, however many there are.
//!
//! The colours are Okabe and Ito's (without black, which the plots keep for keys and
//! labels), as every common form of colour blindness still tells them apart; the shapes cycle
//! independently of the colours ([`series_style`]), so that a series is also told by its shape
//! in greyscale or past the seventh series. What a marker says about one point (a trial that
//! met the goal, failed it, or was not offered) is its fill ([`Fill`]), never its shape; each
//! fill means one thing in every plot ([`Fill::meaning`]). A reference line's dash pattern is
//! a [`Dashes`], which both the line and its legend key are drawn with.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::DrawError;

/// Series colours, in order: Okabe-Ito's blue, orange, bluish green, vermillion, reddish
/// purple, sky blue and yellow (yellow last: it is the faintest on white).
pub const PALETTE: [RGBColor; 7] = [
    RGBColor(0, 114, 178),
    RGBColor(230, 159, 0),
    RGBColor(0, 158, 115),
    RGBColor(213, 94, 0),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(240, 228, 66),
];

/// Marker shapes, in order. Their count (5) and the palette's (7) share no factor, so the
/// first 35 series all have a different (colour, shape) pair.
pub const SHAPES: [Shape; 5] = [
    Shape::Circle,
    Shape::Square,
    Shape::TriangleUp,
    Shape::Diamond,
    Shape::TriangleDown,
];

/// A marker's outline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Shape {
    /// A circle.
    Circle,
    /// A square on its side.
    Square,
    /// A triangle pointing up.
    TriangleUp,
    /// A square on its corner.
    Diamond,
    /// A triangle pointing down.
    TriangleDown,
}

/// What a marker says about its point, by how it is filled: one meaning in every plot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fill {
    /// Filled: met the goal (a trial low-loss, a load decided meeting it, a trial passed).
    Solid,
    /// Outlined: failed it (a trial high-loss or failed, a load decided failing it).
    Hollow,
    /// Outlined and struck through: not offered (the sender could not offer the rate, so the
    /// point says nothing about the system).
    Struck,
    /// Outlined with a dot at its centre: undecided (measured, but its trials so far decide
    /// neither way).
    Dot,
}

impl Fill {
    /// What the fill means, in every plot's legend alike; a plot adds what is its own (the
    /// goal, where a point without a latency sits) after it.
    pub fn meaning(self) -> &'static str {
        match self {
            Self::Solid => "met the goal",
            Self::Hollow => "failed the goal",
            Self::Struck => "not offered: the sender could not (says nothing about the system)",
            Self::Dot => "undecided: its trials so far decide neither way",
        }
    }
}

/// A reference line's look: its colour, stroke width, and dash pattern (pixels of line, then
/// of gap). A line and its legend key are drawn from the same value, so they look alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dashes {
    /// The colour.
    pub colour: RGBColor,
    /// The stroke width, pixels.
    pub width: u32,
    /// Each dash's length, pixels.
    pub dash: u32,
    /// Each gap's length, pixels.
    pub gap: u32,
}

impl Dashes {
    /// The style to stroke its dashes with.
    pub fn stroke(self) -> ShapeStyle {
        self.colour.stroke_width(self.width)
    }
}

/// A reference line of its own (the real-time rate): long dashes.
pub const REFERENCE_DASHES: Dashes = Dashes {
    colour: REFERENCE,
    width: 2,
    dash: 8,
    gap: 5,
};

/// Successive latency budgets' lines, in the order a plot lists the budgets: long dashes,
/// short ones (nearly dots), longer ones.
pub const BUDGET_DASHES: [Dashes; 3] = [
    REFERENCE_DASHES,
    Dashes {
        dash: 3,
        gap: 4,
        ..REFERENCE_DASHES
    },
    Dashes {
        dash: 14,
        gap: 4,
        ..REFERENCE_DASHES
    },
];

/// The line of the `k`th latency budget a plot lists.
pub fn budget_dashes(k: usize) -> Dashes {
    BUDGET_DASHES[k % BUDGET_DASHES.len()]
}

/// The half-size of the dot at the centre of a [`Fill::Dot`] marker, pixels.
pub const DOT_SIZE: i32 = 2;

/// The look of one series.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SeriesStyle {
    /// Its colour.
    pub colour: RGBColor,
    /// Its marker's shape.
    pub shape: Shape,
}

/// The style of the `i`th series of a plot: colour `i mod 7`, shape `i mod 5`, so that
/// neighbours differ in both and no pair repeats before the 36th series.
pub fn series_style(i: usize) -> SeriesStyle {
    SeriesStyle {
        colour: PALETTE[i % PALETTE.len()],
        shape: SHAPES[i % SHAPES.len()],
    }
}

/// The `i`th series colour (for fills that carry no marker: a trace's stages).
pub fn colour(i: usize) -> RGBColor {
    series_style(i).colour
}

/// The colour of reference lines (budget, real time) and of words about missing data.
pub const REFERENCE: RGBColor = RGBColor(90, 90, 90);

/// A marker's half-size, pixels.
pub const MARKER_SIZE: i32 = 5;

/// The corners of `shape` of half-size `size` around `(x, y)`; empty for a circle.
fn corners(shape: Shape, (x, y): (i32, i32), size: i32) -> Vec<(i32, i32)> {
    let s = f64::from(size);
    let at = |dx: f64, dy: f64| (x + dx.round() as i32, y + dy.round() as i32);
    match shape {
        Shape::Circle => Vec::new(),
        Shape::Square => {
            let h = 0.85 * s;
            vec![at(-h, -h), at(h, -h), at(h, h), at(-h, h)]
        }
        Shape::TriangleUp => vec![
            at(0.0, -1.2 * s),
            at(1.1 * s, 0.8 * s),
            at(-1.1 * s, 0.8 * s),
        ],
        Shape::TriangleDown => vec![
            at(0.0, 1.2 * s),
            at(-1.1 * s, -0.8 * s),
            at(1.1 * s, -0.8 * s),
        ],
        Shape::Diamond => {
            let h = 1.2 * s;
            vec![at(0.0, -h), at(h, 0.0), at(0.0, h), at(-h, 0.0)]
        }
    }
}

/// Draws a marker of `shape` in `colour`, filled as `fill`, at pixel `at` of `area`, of
/// half-size `size`.
pub fn draw_shape<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    (shape, colour): (Shape, RGBColor),
    fill: Fill,
    at: (i32, i32),
    size: i32,
) -> Result<(), DrawError> {
    let points = corners(shape, at, size);
    match (shape, fill) {
        (Shape::Circle, Fill::Solid) => area.draw(&Circle::new(at, size, colour.filled()))?,
        (Shape::Circle, _) => area.draw(&Circle::new(at, size, colour.stroke_width(2)))?,
        (_, Fill::Solid) => area.draw(&Polygon::new(points, colour.filled()))?,
        (_, _) => {
            let mut closed = points.clone();
            closed.push(points[0]);
            area.draw(&PathElement::new(closed, colour.stroke_width(2)))?;
        }
    }
    if fill == Fill::Dot {
        area.draw(&Circle::new(at, DOT_SIZE, colour.filled()))?;
    }
    if fill == Fill::Struck {
        let reach = size + size / 2 + 1;
        area.draw(&PathElement::new(
            vec![(at.0 - reach, at.1), (at.0 + reach, at.1)],
            colour.stroke_width(2),
        ))?;
    }
    Ok(())
}

/// Draws the marker of `style`, filled as `fill`, at pixel `at` of `area`.
pub fn draw_marker<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    style: SeriesStyle,
    fill: Fill,
    at: (i32, i32),
) -> Result<(), DrawError> {
    draw_shape(area, (style.shape, style.colour), fill, at, MARKER_SIZE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_two_of_the_first_35_series_look_alike_and_neighbours_differ_in_both() {
        let styles: Vec<SeriesStyle> = (0..35).map(series_style).collect();
        for (i, a) in styles.iter().enumerate() {
            for b in &styles[i + 1..] {
                assert_ne!(a, b);
            }
        }
        for pair in styles.windows(2) {
            assert_ne!(pair[0].colour, pair[1].colour);
            assert_ne!(pair[0].shape, pair[1].shape);
        }
        assert!(!PALETTE.contains(&REFERENCE) && !PALETTE.contains(&BLACK));
    }
}

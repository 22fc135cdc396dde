//! SVG plot of a rate search: post-CPI p99 latency against offered rate, one series per placement and CPI.
//!
//! The plot is written with plotters' SVG backend without any font feature: text goes into the
//! file as `<text>` elements for the viewer to render, so no system fonts are needed here.

use std::path::Path;

use anyhow::{Context, Result};
use plotters::coord::Shift;
use plotters::coord::combinators::{BindKeyPoints, LogCoord, WithKeyPoints};
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Image size in pixels.
const SIZE: (u32, u32) = (900, 600);

/// Axes whose values span more than this ratio are drawn on a log scale.
const LOG_RATIO: f64 = 20.0;

/// Series colours, in order (Tableau 10); series beyond the palette reuse it.
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Marker radius / half-size in pixels.
const MARKER: i32 = 4;

/// One trial of a rate search.
#[derive(Debug, Clone, PartialEq)]
pub struct PlotPoint {
    /// Offered rate, CPI/s.
    pub rate: f64,
    /// Post-CPI p99 latency in ms; `None`: the trial produced no measurement.
    pub p99_ms: Option<f64>,
    /// Whether the trial passed its gates.
    pub passed: bool,
}

/// The trials of one placement and CPI shape.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend label, e.g. "all-cpu 1024x128 #0".
    pub label: String,
    pub points: Vec<PlotPoint>,
    /// The sustained rate found, CPI/s, if any.
    pub sustained: Option<f64>,
}

/// Writes the plot of `series` to `path` as a 900x600 SVG.
///
/// x: offered rate, y: post-CPI p99; each axis is logarithmic when its values span more than a
/// factor of 20. Passing trials are filled circles, failing ones crosses; trials without a
/// measurement are drawn as failures on the top edge. Measured points of a series are joined by a
/// thin line in rate order, and its sustained rate is a dashed vertical line with a label.
pub fn write_svg(path: &Path, title: &str, series: &[Series]) -> Result<()> {
    let xs: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.rate).chain(s.sustained))
        .filter(|v| v.is_finite())
        .collect();
    let ys: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().filter_map(|p| p.p99_ms))
        .filter(|v| v.is_finite())
        .collect();
    let x = Axis::fit(&xs, 1.12, 0.05);
    // Extra headroom on y: the top edge is where trials without a measurement go.
    let y = Axis::fit(&ys, 1.6, 0.12);

    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    let draw = || -> Result<()> {
        root.fill(&WHITE)?;
        match (x.log, y.log) {
            (false, false) => draw_chart(&root, title, series, &x, &y, x.range(), y.range()),
            (true, false) => draw_chart(&root, title, series, &x, &y, x.log_range(), y.range()),
            (false, true) => draw_chart(&root, title, series, &x, &y, x.range(), y.log_range()),
            (true, true) => draw_chart(&root, title, series, &x, &y, x.log_range(), y.log_range()),
        }?;
        root.present()?;
        Ok(())
    };
    draw().with_context(|| format!("writing rate plot {}", path.display()))
}

/// One axis's extent, with values mapped into it.
#[derive(Debug, Clone, Copy)]
struct Axis {
    lo: f64,
    hi: f64,
    log: bool,
}

impl Axis {
    /// Fits an axis around `values` (all finite). `log_pad` is the factor of headroom on a log
    /// axis, `lin_pad` the fraction of the span on a linear one (below and above).
    fn fit(values: &[f64], log_pad: f64, lin_pad: f64) -> Axis {
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if values.is_empty() {
            return Axis {
                lo: 0.0,
                hi: 1.0,
                log: false,
            };
        }
        let min_pos = values
            .iter()
            .copied()
            .filter(|&v| v > 0.0)
            .fold(f64::INFINITY, f64::min);
        if min_pos.is_finite() && max / min_pos > LOG_RATIO {
            // Non-positive values are clamped to the bottom edge when mapped.
            return Axis {
                lo: min_pos / log_pad,
                hi: max * log_pad,
                log: true,
            };
        }
        let span = max - min;
        let pad = if span > 0.0 {
            span * lin_pad
        } else if max != 0.0 {
            max.abs() * lin_pad.max(0.1)
        } else {
            1.0
        };
        // Rates and latencies are non-negative: don't pad a non-negative axis below zero.
        let lo = if min >= 0.0 {
            (min - pad).max(0.0)
        } else {
            min - pad
        };
        Axis {
            lo,
            hi: max + pad,
            log: false,
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }

    /// A log axis with ticks at 1, 2 and 5 times powers of ten (only the powers of ten when that
    /// would be too many) and light grid lines at each integer multiple of a power of ten.
    fn log_range(&self) -> WithKeyPoints<LogCoord<f64>> {
        let decades = || {
            let first = self.lo.log10().floor() as i32;
            let last = self.hi.log10().ceil() as i32;
            (first..=last).map(|e| 10f64.powi(e))
        };
        let within = |v: &f64| *v >= self.lo && *v <= self.hi;
        let ticks = |mults: &[f64]| -> Vec<f64> {
            decades()
                .flat_map(|d| mults.iter().map(move |m| m * d))
                .filter(within)
                .collect()
        };
        let mut bold = ticks(&[1.0, 2.0, 5.0]);
        if bold.len() > 12 {
            bold = ticks(&[1.0]);
        }
        let light = ticks(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]);
        let coord: LogCoord<f64> = (self.lo..self.hi).log_scale().into();
        coord.with_key_points(bold).with_light_points(light)
    }

    /// Where `v` falls along the axis, 0 at `lo` to 1 at `hi`.
    fn fraction(&self, v: f64) -> f64 {
        let v = self.clamp(v);
        if self.log {
            (v.ln() - self.lo.ln()) / (self.hi.ln() - self.lo.ln())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        }
    }

    /// `v` clamped into the axis (so nothing is drawn outside it, and log axes never see <= 0).
    fn clamp(&self, v: f64) -> f64 {
        if v.is_nan() {
            self.lo
        } else {
            v.clamp(self.lo, self.hi)
        }
    }
}

fn draw_chart<X, Y>(
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    title: &str,
    series: &[Series],
    x: &Axis,
    y: &Axis,
    x_spec: X,
    y_spec: Y,
) -> Result<()>
where
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 26))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(65)
        .build_cartesian_2d(x_spec, y_spec)?;

    let x_fmt = |v: &f64| fmt_num(*v);
    let y_fmt = |v: &f64| fmt_num(*v);
    chart
        .configure_mesh()
        .x_desc(if x.log {
            "offered rate (CPI/s, log)"
        } else {
            "offered rate (CPI/s)"
        })
        .y_desc(if y.log {
            "post-CPI p99 (ms, log)"
        } else {
            "post-CPI p99 (ms)"
        })
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .light_line_style(RGBColor(240, 240, 240))
        .bold_line_style(RGBColor(215, 215, 215))
        .axis_desc_style(("sans-serif", 19))
        .label_style(("sans-serif", 16))
        .draw()?;

    if series.is_empty() || series.iter().all(|s| s.points.is_empty()) {
        let centre = (
            (x.lo + x.hi) / 2.0,
            if y.log {
                (y.lo * y.hi).sqrt()
            } else {
                (y.lo + y.hi) / 2.0
            },
        );
        chart.draw_series(std::iter::once(
            EmptyElement::at(centre)
                + Text::new(
                    "no trials",
                    (0, 0),
                    ("sans-serif", 20)
                        .into_font()
                        .color(&RGBColor(120, 120, 120))
                        .pos(Pos::new(HPos::Center, VPos::Center)),
                ),
        ))?;
    }

    for (i, s) in series.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let mut points: Vec<&PlotPoint> = s.points.iter().filter(|p| p.rate.is_finite()).collect();
        points.sort_by(|a, b| a.rate.total_cmp(&b.rate));
        let measured = |p: &PlotPoint| p.p99_ms.filter(|v| v.is_finite());

        // The joining line carries the legend entry.
        let line: Vec<(f64, f64)> = points
            .iter()
            .filter_map(|p| measured(p).map(|v| (x.clamp(p.rate), y.clamp(v))))
            .collect();
        chart
            .draw_series(LineSeries::new(line, colour.stroke_width(1)))?
            .label(s.label.as_str())
            .legend(move |(lx, ly)| {
                EmptyElement::at((lx, ly))
                    + PathElement::new(vec![(0, 0), (20, 0)], colour.stroke_width(1))
                    + Circle::new((10, 0), MARKER, colour.filled())
            });

        if let Some(rate) = s.sustained.filter(|v| v.is_finite()) {
            let sx = x.clamp(rate);
            chart.draw_series(DashedLineSeries::new(
                vec![(sx, y.lo), (sx, y.hi)],
                6,
                4,
                colour.stroke_width(1),
            ))?;
            // Labels of successive series step down so that close sustained rates stay legible;
            // near the right edge a label goes left of its line.
            let dy = 6 + 18 * i32::try_from(i % 12).unwrap_or(0);
            let (dx, h_pos) = if x.fraction(sx) > 0.7 {
                (-5, HPos::Right)
            } else {
                (5, HPos::Left)
            };
            let font = ("sans-serif", 15)
                .into_font()
                .color(&colour)
                .pos(Pos::new(h_pos, VPos::Top));
            chart.draw_series(std::iter::once(
                EmptyElement::at((sx, y.hi))
                    + Text::new(format!("sustained {} CPI/s", fmt_num(rate)), (dx, dy), font),
            ))?;
        }

        chart.draw_series(points.iter().map(|p| {
            let at = (x.clamp(p.rate), measured(p).map_or(y.hi, |v| y.clamp(v)));
            let marker: DynElement<'static, SVGBackend<'_>, (f64, f64)> =
                if p.passed && measured(p).is_some() {
                    Circle::new(at, MARKER, colour.filled()).into_dyn()
                } else {
                    Cross::new(at, MARKER, colour.stroke_width(2)).into_dyn()
                };
            marker
        }))?;
    }

    // Key to the markers, in black, after the series.
    chart
        .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())?
        .label("passed")
        .legend(|(lx, ly)| Circle::new((lx + 10, ly), MARKER, BLACK.filled()));
    chart
        .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())?
        .label("failed (top edge: no measurement)")
        .legend(|(lx, ly)| Cross::new((lx + 10, ly), MARKER, BLACK.stroke_width(2)));

    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(180, 180, 180))
        .label_font(("sans-serif", 16))
        .draw()?;
    Ok(())
}

/// A tick or rate value with a few significant digits and no trailing zeros.
fn fmt_num(v: f64) -> String {
    let a = v.abs();
    let s = if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else if a >= 0.01 {
        format!("{v:.3}")
    } else {
        return format!("{v:.1e}");
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(rate: f64, p99_ms: Option<f64>, passed: bool) -> PlotPoint {
        PlotPoint {
            rate,
            p99_ms,
            passed,
        }
    }

    /// Writes `series` into a fresh directory and returns the SVG text.
    fn render(series: &[Series]) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plot.svg");
        write_svg(&path, "rate search", series).unwrap();
        assert!(path.exists());
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(200)]);
        assert!(svg.contains("rate search"));
        svg
    }

    fn two_series() -> Vec<Series> {
        vec![
            Series {
                label: "all-cpu 1024x128 #0".into(),
                points: vec![
                    pt(400.0, Some(9.0), true),
                    pt(50.0, Some(4.0), true),
                    pt(800.0, Some(250.0), false),
                    pt(600.0, Some(30.0), true),
                    pt(1600.0, None, false),
                ],
                sustained: Some(600.0),
            },
            Series {
                label: "gpu-fft 1024x128 #1".into(),
                points: vec![
                    pt(50.0, Some(1.2), true),
                    pt(3200.0, Some(2.5), true),
                    pt(6400.0, Some(900.0), false),
                    pt(4800.0, Some(3.1), true),
                ],
                sustained: Some(4800.0),
            },
        ]
    }

    #[test]
    fn plot_two_series() {
        let svg = render(&two_series());
        for s in [
            "all-cpu 1024x128 #0",
            "gpu-fft 1024x128 #1",
            "sustained 600 CPI/s",
        ] {
            assert!(svg.contains(s), "missing {s}");
        }
        assert!(svg.contains("offered rate (CPI/s"));
        assert!(svg.contains("post-CPI p99 (ms"));
    }

    #[test]
    fn plot_linear_axes() {
        let series = vec![Series {
            label: "narrow".into(),
            points: vec![
                pt(100.0, Some(5.0), true),
                pt(150.0, Some(6.0), true),
                pt(200.0, Some(9.0), false),
            ],
            sustained: Some(150.0),
        }];
        let svg = render(&series);
        assert!(svg.contains("narrow"));
        assert!(svg.contains("offered rate (CPI/s)"));
        assert!(svg.contains("post-CPI p99 (ms)"));
    }

    #[test]
    fn plot_empty() {
        render(&[]);
        let svg = render(&[Series {
            label: "nothing yet".into(),
            points: vec![],
            sustained: None,
        }]);
        assert!(svg.contains("nothing yet"));
    }

    #[test]
    fn plot_single_point() {
        let svg = render(&[Series {
            label: "one trial".into(),
            points: vec![pt(250.0, Some(12.5), true)],
            sustained: Some(250.0),
        }]);
        assert!(svg.contains("one trial"));
        assert!(svg.contains("sustained 250 CPI/s"));
    }

    #[test]
    fn plot_all_none() {
        let svg = render(&[Series {
            label: "no measurements".into(),
            points: vec![pt(100.0, None, false), pt(1e4, None, false)],
            sustained: None,
        }]);
        assert!(svg.contains("no measurements"));
    }

    #[test]
    fn plot_zero_negative_and_nonfinite() {
        let svg = render(&[Series {
            label: "odd values".into(),
            points: vec![
                pt(0.0, Some(0.0), true),
                pt(-5.0, Some(-1.0), false),
                pt(1e3, Some(500.0), true),
                pt(f64::NAN, Some(1.0), true),
                pt(10.0, Some(f64::INFINITY), false),
            ],
            sustained: Some(0.0),
        }]);
        assert!(svg.contains("odd values"));
    }

    #[test]
    fn plot_error_names_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing").join("plot.svg");
        let err = write_svg(&path, "t", &two_series()).unwrap_err();
        assert!(format!("{err:#}").contains("plot.svg"), "{err:#}");
    }

    #[test]
    fn numbers_format_compactly() {
        assert_eq!(fmt_num(600.0), "600");
        assert_eq!(fmt_num(12.5), "12.5");
        assert_eq!(fmt_num(2.0), "2");
        assert_eq!(fmt_num(0.25), "0.25");
        assert_eq!(fmt_num(0.0), "0");
    }
}

//! One numeric axis of a plot: its extent, its ticks, and where a value falls along it.
//!
//! Guarantees: the extent starts and ends on a tick, so the tick labels always span every value
//! the axis was fitted to; an axis whose positive values span more than [`LOG_RATIO`] (and
//! that may be logarithmic) is logarithmic, with ticks at 1, 2 and 5 times powers of ten (only
//! the powers of ten when those would be too many); values outside the extent (or not
//! positive on a log axis, or NaN) are clamped onto its edge, never drawn outside.
//!
//! Plotters draws on plot coordinates: the value itself on a linear axis, its `log10` on a
//! logarithmic one, so every chart is a linear chart with chosen key points.

use std::ops::Range;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::coord::types::RangedCoordf64;

/// Axes whose positive values span more than this ratio are drawn on a log scale.
pub const LOG_RATIO: f64 = 20.0;

/// How tick labels are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Labels {
    /// The value with a few significant digits.
    Number,
    /// The value times 100, with a percent sign.
    Percent,
}

/// An axis, in value space and plot space.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    /// Lowest value shown.
    pub lo: f64,
    /// Highest value shown.
    pub hi: f64,
    /// Whether plot coordinates are `log10` of values.
    pub log: bool,
    /// Labelled ticks, values, ascending, `lo` and `hi` among them.
    pub ticks: Vec<f64>,
    /// Light grid lines, values.
    pub minor: Vec<f64>,
    /// How tick labels read.
    pub labels: Labels,
}

impl Axis {
    /// Fits an axis around the finite `values`. `may_log`: whether it may be logarithmic;
    /// `from_zero`: whether a linear axis starts at 0 (rates, times); `headroom`: the
    /// fraction of the span (linear) or the factor (log, as `1 + headroom`) kept free above the
    /// largest value.
    pub fn fit(
        values: impl IntoIterator<Item = f64>,
        may_log: bool,
        from_zero: bool,
        headroom: f64,
    ) -> Axis {
        let values: Vec<f64> = values.into_iter().filter(|v| v.is_finite()).collect();
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if values.is_empty() {
            return Axis::linear(0.0, 1.0, from_zero);
        }
        let min_pos = values
            .iter()
            .copied()
            .filter(|&v| v > 0.0)
            .fold(f64::INFINITY, f64::min);
        if may_log && min_pos.is_finite() && max / min_pos > LOG_RATIO {
            return Axis::logarithmic(min_pos / (1.0 + headroom / 2.0), max * (1.0 + headroom));
        }
        let span = if max > min {
            max - min
        } else {
            max.abs().max(1e-9)
        };
        Axis::linear(min, max + span * headroom, from_zero)
    }

    /// A linear axis over at least `[min, max]` with about six ticks at 1, 2, 2.5 or 5 times a
    /// power of ten.
    fn linear(min: f64, max: f64, from_zero: bool) -> Axis {
        let min = if from_zero { min.min(0.0) } else { min };
        let span = if max > min {
            max - min
        } else {
            max.abs().max(1.0)
        };
        let rough = span / 5.0;
        let power = 10f64.powf(rough.log10().floor());
        let step = [1.0, 2.0, 2.5, 5.0, 10.0]
            .into_iter()
            .map(|m| m * power)
            .find(|s| *s >= rough)
            .unwrap_or(10.0 * power);
        let lo = (min / step).floor() * step;
        let hi = (max / step).ceil() * step;
        let hi = if hi > lo { hi } else { lo + step };
        let n = ((hi - lo) / step).round() as usize;
        let ticks: Vec<f64> = (0..=n).map(|i| lo + i as f64 * step).collect();
        let minor = (0..n).map(|i| lo + (i as f64 + 0.5) * step).collect();
        Axis {
            lo,
            hi,
            log: false,
            ticks,
            minor,
            labels: Labels::Number,
        }
    }

    /// A log axis over at least `[min, max]` (both positive), bounded by ticks.
    fn logarithmic(min: f64, max: f64) -> Axis {
        let first = min.log10().floor() as i32;
        let last = max.log10().ceil() as i32;
        let multiples = |mults: &'static [f64]| {
            (first..=last).flat_map(move |e| mults.iter().map(move |m| m * 10f64.powi(e)))
        };
        let mut bounds_from: &'static [f64] = &[1.0, 2.0, 5.0];
        if last - first > 4 {
            bounds_from = &[1.0];
        }
        let candidates: Vec<f64> = multiples(bounds_from).collect();
        let lo = candidates
            .iter()
            .copied()
            .filter(|&c| c <= min * (1.0 + 1e-9))
            .fold(f64::NAN, f64::max);
        let hi = candidates
            .iter()
            .copied()
            .filter(|&c| c >= max * (1.0 - 1e-9))
            .fold(f64::NAN, f64::min);
        let within = |v: &f64| *v >= lo * (1.0 - 1e-9) && *v <= hi * (1.0 + 1e-9);
        let ticks: Vec<f64> = candidates.into_iter().filter(within).collect();
        let minor = multiples(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])
            .filter(within)
            .collect();
        Axis {
            lo,
            hi,
            log: true,
            ticks,
            minor,
            labels: Labels::Number,
        }
    }

    /// The 0 to 1 axis of a cumulative fraction, labelled in percent.
    pub fn fraction() -> Axis {
        Axis {
            lo: 0.0,
            hi: 1.0,
            log: false,
            ticks: vec![0.0, 0.25, 0.5, 0.75, 1.0],
            minor: vec![0.125, 0.375, 0.625, 0.875],
            labels: Labels::Percent,
        }
    }

    /// The plot coordinate of `v`, clamped onto the axis.
    pub fn pos(&self, v: f64) -> f64 {
        let v = if v.is_nan() {
            self.lo
        } else {
            v.clamp(self.lo, self.hi)
        };
        if self.log { v.log10() } else { v }
    }

    /// The plot coordinate of the axis's top (right) end.
    pub fn top(&self) -> f64 {
        self.pos(self.hi)
    }

    /// The plot coordinate of the axis's bottom (left) end.
    pub fn bottom(&self) -> f64 {
        self.pos(self.lo)
    }

    /// The value at plot coordinate `p`.
    pub fn value(&self, p: f64) -> f64 {
        if self.log { 10f64.powf(p) } else { p }
    }

    /// `n` values evenly spread along the axis (in plot space), ends included.
    pub fn samples(&self, n: usize) -> Vec<f64> {
        let (a, b) = (self.bottom(), self.top());
        let n = n.max(2);
        (0..n)
            .map(|i| self.value(a + (b - a) * i as f64 / (n - 1) as f64))
            .collect()
    }

    /// The tick label of plot coordinate `p`.
    pub fn label(&self, p: f64) -> String {
        let v = self.value(p);
        match self.labels {
            Labels::Number => fmt_num(v),
            Labels::Percent => format!("{}%", fmt_num(v * 100.0)),
        }
    }

    /// The coordinate plotters draws on: plot space with this axis's ticks and grid.
    pub fn coord(&self) -> PlotCoord {
        PlotCoord {
            inner: (self.bottom()..self.top()).into(),
            ticks: self.ticks.iter().map(|&t| self.pos(t)).collect(),
            grid: self.minor.iter().map(|&t| self.pos(t)).collect(),
        }
    }
}

/// A linear plotters coordinate with chosen ticks (labelled) and grid lines (light), labels
/// written by the chart's formatter ([`Axis::label`]).
pub struct PlotCoord {
    inner: RangedCoordf64,
    ticks: Vec<f64>,
    grid: Vec<f64>,
}

impl Ranged for PlotCoord {
    type ValueType = f64;
    type FormatOption = DefaultFormatting;

    fn range(&self) -> Range<f64> {
        self.inner.range()
    }

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.inner.map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            self.grid.clone()
        } else {
            self.ticks.clone()
        }
    }
}

/// A value with a few significant digits and no trailing zeros: `600`, `12.5`, `0.25`.
pub fn fmt_num(v: f64) -> String {
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

    #[test]
    fn linear_axes_end_on_ticks_around_the_values() {
        let a = Axis::fit([50.0, 6400.0, 3000.0], false, true, 0.05);
        assert!(!a.log);
        assert_eq!(a.lo, 0.0);
        assert!(a.hi >= 6400.0 * 1.05 - 1e-9, "{a:?}");
        assert_eq!(a.ticks.first(), Some(&a.lo));
        assert_eq!(a.ticks.last(), Some(&a.hi));
        assert!((4..=12).contains(&a.ticks.len()), "{a:?}");
    }

    #[test]
    fn wide_positive_spans_are_logarithmic() {
        let a = Axis::fit([50.0, 6400.0], true, true, 0.1);
        assert!(a.log);
        assert!(a.lo <= 50.0 && a.hi >= 6400.0, "{a:?}");
        assert_eq!(a.ticks.first(), Some(&a.lo));
        assert_eq!(a.ticks.last(), Some(&a.hi));
        assert!(
            a.ticks.contains(&100.0) && a.ticks.contains(&1000.0),
            "{a:?}"
        );
        assert_eq!(a.label(a.pos(2000.0)), "2000");
        // Many decades: only the powers of ten.
        let wide = Axis::fit([1e-3, 1e5], true, false, 0.0);
        assert!(
            wide.ticks
                .iter()
                .all(|t| (t.log10() - t.log10().round()).abs() < 1e-9)
        );
    }

    #[test]
    fn values_outside_clamp_onto_the_edges() {
        let a = Axis::fit([10.0, 1000.0], true, false, 0.0);
        assert_eq!(a.pos(0.0), a.bottom());
        assert_eq!(a.pos(-1.0), a.bottom());
        assert_eq!(a.pos(f64::NAN), a.bottom());
        assert_eq!(a.pos(1e9), a.top());
        let empty = Axis::fit([], true, true, 0.1);
        assert_eq!((empty.lo, empty.hi), (0.0, 1.0));
        let single = Axis::fit([5.0], true, false, 0.1);
        assert!(single.lo <= 5.0 && single.hi > 5.0, "{single:?}");
    }

    #[test]
    fn numbers_format_compactly() {
        assert_eq!(fmt_num(600.0), "600");
        assert_eq!(fmt_num(12.5), "12.5");
        assert_eq!(fmt_num(2.0), "2");
        assert_eq!(fmt_num(0.25), "0.25");
        assert_eq!(fmt_num(0.0), "0");
        assert_eq!(Axis::fraction().label(0.5), "50%");
    }
}

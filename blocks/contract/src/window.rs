//! The windows `blocks.window` applies: periodic (DFT-even) windows over N, in double.

use std::str::FromStr;

use crate::choice::NotAChoice;

/// A window's shape.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Shape {
    /// Rectangular: every coefficient 1.
    Rect,
    /// Hann.
    #[default]
    Hann,
    /// Hamming.
    Hamming,
    /// Blackman.
    Blackman,
}

impl FromStr for Shape {
    type Err = NotAChoice;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "rect" => Ok(Shape::Rect),
            "hann" => Ok(Shape::Hann),
            "hamming" => Ok(Shape::Hamming),
            "blackman" => Ok(Shape::Blackman),
            _ => Err(NotAChoice {
                expected: "rect, hann, hamming or blackman",
            }),
        }
    }
}

impl Shape {
    /// The periodic window of length `n`, in double.
    pub fn coefficients(self, n: usize) -> Vec<f64> {
        (0..n)
            .map(|i| {
                let t = 2.0 * std::f64::consts::PI * i as f64 / n as f64;
                match self {
                    Shape::Rect => 1.0,
                    Shape::Hann => 0.5 - 0.5 * t.cos(),
                    Shape::Hamming => 0.54 - 0.46 * t.cos(),
                    Shape::Blackman => 0.42 - 0.5 * t.cos() + 0.08 * (2.0 * t).cos(),
                }
            })
            .collect()
    }
}

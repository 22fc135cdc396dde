//! The coherent processing interval (CPI) shape and the radio constants of the workload.
//!
//! A [`Cpi`] is `N` samples (fast time) by `M` chirps (slow time). Its text form is
//! `<samples>x<chirps>`, e.g. `1024x128`, and parsing guarantees both dimensions are nonzero,
//! fit in a `u32` (bins are written as `u32` in the detection format) and that the number of
//! cells fits in a `usize`.

use std::fmt;
use std::num::ParseIntError;
use std::str::FromStr;

/// ADC sample rate `fs` in Hz.
pub const SAMPLE_RATE_HZ: f64 = 20.48e6;
/// Chirp sweep bandwidth `B` in Hz.
pub const BANDWIDTH_HZ: f64 = 307.2e6;
/// Carrier frequency `fc` in Hz.
pub const CARRIER_HZ: f64 = 77e9;
/// Speed of light `c` in m/s.
pub const SPEED_OF_LIGHT: f64 = 299_792_458.0;

/// The shape of one frame: `samples` (N, fast time) by `chirps` (M, slow time).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cpi {
    /// Samples per chirp, N (fast time; the range axis).
    pub samples: usize,
    /// Chirps per frame, M (slow time; the Doppler axis).
    pub chirps: usize,
}

impl Cpi {
    /// The chirp interval `T = N / fs` in seconds (50 us for N = 1024).
    pub fn chirp_interval_s(&self) -> f64 {
        self.samples as f64 / SAMPLE_RATE_HZ
    }

    /// The physical duration of the CPI, `M * T`, in seconds.
    pub fn period_s(&self) -> f64 {
        self.chirps as f64 * self.chirp_interval_s()
    }

    /// The number of cells, `N * M` (complex samples in a frame, bins in a range-Doppler map).
    pub fn cells(&self) -> usize {
        self.samples * self.chirps
    }

    /// The frame's shape as the runtime names it, innermost axis first: `NxM`.
    pub fn frame_shape(&self) -> kplace::model::shape::FrameShape {
        use kplace::model::shape::FrameShape;
        FrameShape::new(vec![self.samples as u64, self.chirps as u64])
            .unwrap_or_else(FrameShape::one)
    }
}

impl fmt::Display for Cpi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.samples, self.chirps)
    }
}

/// Why a CPI string did not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CpiParseError {
    /// The text has no `x` between the two dimensions.
    #[error("invalid CPI {input:?}: expected <samples>x<chirps>, e.g. 1024x128")]
    MissingSeparator {
        /// The text given.
        input: String,
    },
    /// One dimension is not an unsigned integer.
    #[error("invalid CPI {input:?}: {axis} {value:?} is not an unsigned integer ({cause})")]
    NotANumber {
        /// The text given.
        input: String,
        /// `samples` or `chirps`.
        axis: &'static str,
        /// The offending part of the text.
        value: String,
        /// The integer parser's complaint.
        cause: ParseIntError,
    },
    /// One dimension is zero.
    #[error("invalid CPI {input:?}: {axis} must be at least 1")]
    Zero {
        /// The text given.
        input: String,
        /// `samples` or `chirps`.
        axis: &'static str,
    },
    /// A dimension does not fit in a `u32`, or the cell count does not fit in a `usize`.
    #[error("invalid CPI {input:?}: too large (each dimension must fit in u32)")]
    TooLarge {
        /// The text given.
        input: String,
    },
}

impl FromStr for Cpi {
    type Err = CpiParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (samples, chirps) = s
            .split_once('x')
            .ok_or_else(|| CpiParseError::MissingSeparator { input: s.into() })?;
        let samples = parse_dimension(s, "samples", samples)?;
        let chirps = parse_dimension(s, "chirps", chirps)?;
        if samples.checked_mul(chirps).is_none() {
            return Err(CpiParseError::TooLarge { input: s.into() });
        }
        Ok(Cpi { samples, chirps })
    }
}

fn parse_dimension(input: &str, axis: &'static str, value: &str) -> Result<usize, CpiParseError> {
    let parsed: u32 = value.parse().map_err(|source: ParseIntError| {
        if matches!(source.kind(), std::num::IntErrorKind::PosOverflow) {
            CpiParseError::TooLarge {
                input: input.into(),
            }
        } else {
            CpiParseError::NotANumber {
                input: input.into(),
                axis,
                value: value.into(),
                cause: source,
            }
        }
    })?;
    if parsed == 0 {
        return Err(CpiParseError::Zero {
            input: input.into(),
            axis,
        });
    }
    usize::try_from(parsed).map_err(|_| CpiParseError::TooLarge {
        input: input.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_displays() {
        let cpi: Cpi = "1024x128".parse().unwrap();
        assert_eq!(
            cpi,
            Cpi {
                samples: 1024,
                chirps: 128
            }
        );
        assert_eq!(cpi.to_string(), "1024x128");
        assert_eq!(cpi.cells(), 131_072);
    }

    #[test]
    fn timing_matches_the_workload() {
        let cpi: Cpi = "1024x128".parse().unwrap();
        assert!((cpi.chirp_interval_s() - 50e-6).abs() < 1e-15);
        assert!((cpi.period_s() - 6.4e-3).abs() < 1e-15);
        let big: Cpi = "4096x512".parse().unwrap();
        assert!((big.chirp_interval_s() - 200e-6).abs() < 1e-15);
    }

    #[test]
    fn rejects_malformed_text_with_a_reason() {
        let err = "1024".parse::<Cpi>().unwrap_err();
        assert!(matches!(err, CpiParseError::MissingSeparator { .. }));
        assert!(err.to_string().contains("expected <samples>x<chirps>"));

        let err = "x".parse::<Cpi>().unwrap_err();
        assert!(matches!(
            err,
            CpiParseError::NotANumber {
                axis: "samples",
                ..
            }
        ));

        let err = "0x128".parse::<Cpi>().unwrap_err();
        assert_eq!(
            err,
            CpiParseError::Zero {
                input: "0x128".into(),
                axis: "samples"
            }
        );
        assert!(err.to_string().contains("samples must be at least 1"));

        let err = "abcx4".parse::<Cpi>().unwrap_err();
        assert!(err.to_string().contains("samples \"abc\""), "{err}");

        let err = "16x-2".parse::<Cpi>().unwrap_err();
        assert!(matches!(
            err,
            CpiParseError::NotANumber { axis: "chirps", .. }
        ));

        let err = "99999999999x2".parse::<Cpi>().unwrap_err();
        assert!(matches!(err, CpiParseError::TooLarge { .. }));
    }
}

//! The one error type of the pure rules: a parameter, split or shape the contract refuses.
//!
//! Each variant carries the values it was given; [`Display`](fmt::Display) writes the message
//! users see (the same words from every backend, as the tests of both libraries assert): it
//! names the parameter, what it got and what it must be. [`ParamError::parameter`] names the
//! parameter alone, for callers that want to point at it.

use std::fmt;

use crate::cfar::{MAX_SCALE, MAX_WINDOW};
use crate::fft::PLANNER_PARAM;
use crate::names::{KernelName, RANGE_FFT};

/// A value the kernel contract refuses.
#[derive(Clone, Debug, PartialEq)]
pub enum ParamError {
    /// A kernel that cannot be split was asked for tiles.
    NotSplit {
        /// The kernel.
        kernel: KernelName,
        /// The split axis asked for.
        axis: usize,
        /// The tile asked for.
        tile: u64,
    },
    /// `radar.range_fft` split along an axis other than 0 (chirps).
    RangeSplitAxis {
        /// The split axis asked for.
        axis: usize,
    },
    /// `radar.range_fft` split into tiles that do not divide the chirps (or are empty).
    RangeSplitTile {
        /// The tile asked for, in chirps.
        tile: u64,
        /// The chirps of the frame.
        chirps: u64,
    },
    /// `planner` is not one of `estimate`, `measure`, `patient`.
    Planner {
        /// The value given, trimmed.
        value: String,
    },
    /// `train` is 0.
    TrainZero,
    /// The CFAR window, `2 (guard + train) + 1`, exceeds [`MAX_WINDOW`].
    WindowTooLarge {
        /// `2 (guard + train) + 1`.
        window: u64,
        /// `guard` given.
        guard: u32,
        /// `train` given.
        train: u32,
    },
    /// Both `pfa` and `scale` given.
    PfaAndScale,
    /// `scale` outside `[0, MAX_SCALE]` (or NaN).
    Scale {
        /// The value given.
        scale: f64,
    },
    /// `pfa` outside `(0, 1)` (or NaN).
    Pfa {
        /// The value given.
        pfa: f64,
    },
    /// A power map with more range or Doppler bins than a detection record's `u32` can name.
    MapBins {
        /// Range bins.
        rows: u64,
        /// Doppler bins.
        cols: u64,
    },
    /// The CFAR window is wider than the map along some axis.
    WindowDoesNotFit {
        /// `2 (guard + train) + 1`.
        window: u64,
        /// `guard` in use.
        guard: u32,
        /// `train` in use.
        train: u32,
        /// Range bins.
        rows: u64,
        /// Doppler bins.
        cols: u64,
    },
}

impl ParamError {
    /// What the error is about: a parameter name (`train`, `pfa`, ...), `split`, or
    /// `input 0` for a map the window does not fit.
    pub fn parameter(&self) -> &'static str {
        match self {
            ParamError::NotSplit { .. }
            | ParamError::RangeSplitAxis { .. }
            | ParamError::RangeSplitTile { .. } => "split",
            ParamError::Planner { .. } => PLANNER_PARAM,
            ParamError::TrainZero => "train",
            ParamError::WindowTooLarge { .. } => "guard, train",
            ParamError::PfaAndScale => "pfa, scale",
            ParamError::Scale { .. } => "scale",
            ParamError::Pfa { .. } => "pfa",
            ParamError::MapBins { .. } | ParamError::WindowDoesNotFit { .. } => "input 0",
        }
    }
}

impl fmt::Display for ParamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamError::NotSplit { kernel, axis, tile } => write!(
                f,
                "{kernel} cannot be split (asked for tiles of {tile} along axis {axis})"
            ),
            ParamError::RangeSplitAxis { axis } => write!(
                f,
                "{RANGE_FFT} splits only along axis 0 (chirps), not axis {axis}"
            ),
            ParamError::RangeSplitTile { tile, chirps } => write!(
                f,
                "split tile of {tile} chirps does not divide the {chirps} chirps of input 0"
            ),
            ParamError::Planner { value } => write!(
                f,
                "parameter {PLANNER_PARAM}: {value:?} is not one of estimate, measure, patient"
            ),
            ParamError::TrainZero => f.write_str("parameter train must be at least 1"),
            ParamError::WindowTooLarge {
                window,
                guard,
                train,
            } => write!(
                f,
                "the CFAR window, 2 (guard + train) + 1 = {window} cells (guard {guard}, train \
                 {train}), exceeds the largest supported, {MAX_WINDOW}"
            ),
            ParamError::PfaAndScale => f.write_str(
                "parameters pfa and scale both given; give at most one (scale is a raw alpha)",
            ),
            ParamError::Scale { scale } => write!(
                f,
                "parameter scale must be >= 0 and <= {MAX_SCALE:e}, got {scale}"
            ),
            ParamError::Pfa { pfa } => write!(f, "parameter pfa must be in (0, 1), got {pfa}"),
            ParamError::MapBins { rows, cols } => write!(
                f,
                "input 0: [{rows}, {cols}] has more bins than detection records can name"
            ),
            ParamError::WindowDoesNotFit {
                window,
                guard,
                train,
                rows,
                cols,
            } => write!(
                f,
                "the CFAR window, 2 (guard + train) + 1 = {window} cells (guard {guard}, train \
                 {train}), does not fit the {rows} x {cols} map of input 0"
            ),
        }
    }
}

impl std::error::Error for ParamError {}

//! `blocks.fft`'s parameters and ports: which axis, which direction, what scale.

use std::str::FromStr;

use kplace_abi::Dtype;
use kplace_abi::export::ports::Ports;
use kplace_abi::export::{Config, KernelError};

use crate::choice::NotAChoice;
use crate::ports::{Rows, finite};

/// The `direction` parameter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Direction {
    /// `exp(-2 pi i k n / N)` (the default).
    #[default]
    Forward,
    /// `exp(+2 pi i k n / N)`, unnormalised.
    Inverse,
}

impl FromStr for Direction {
    type Err = NotAChoice;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "forward" => Ok(Direction::Forward),
            "inverse" => Ok(Direction::Inverse),
            _ => Err(NotAChoice {
                expected: "forward or inverse",
            }),
        }
    }
}

/// The `planner` parameter: FFTW's planning rigor on the CPU; accepted and unused by cuFFT,
/// which has none to choose.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Planner {
    /// Deterministic plans (the default).
    #[default]
    Estimate,
    /// Plans timed on this machine.
    Measure,
    /// Plans timed more thoroughly.
    Patient,
}

impl FromStr for Planner {
    type Err = NotAChoice;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "estimate" => Ok(Planner::Estimate),
            "measure" => Ok(Planner::Measure),
            "patient" => Ok(Planner::Patient),
            _ => Err(NotAChoice {
                expected: "estimate, measure or patient",
            }),
        }
    }
}

/// What `blocks.fft` checks at create.
#[derive(Clone, Copy, Debug)]
pub struct FftPorts {
    /// The ports (any shape, `cf32` in and out) and the split.
    pub rows: Rows,
    /// The transform's sign.
    pub direction: Direction,
    /// FFTW's rigor.
    pub planner: Planner,
    /// The factor every output value is multiplied by.
    pub scale: f32,
    /// N: the transformed axis's extent.
    pub n: usize,
    /// Elements between two successive values of one transform: the product of the extents
    /// after the transformed axis (1 along the last).
    pub inner: usize,
    /// Transforms a launch makes: its tile's, or the whole tensor's.
    pub transforms: usize,
}

impl FftPorts {
    /// Checks the parameters, the ports by `rule` and the split.
    pub fn check(config: &Config<'_>, rule: &Ports) -> Result<Self, KernelError> {
        config.reject_unknown_params(&["axis", "direction", "scale", "planner"])?;
        let direction: Direction = config.parse_param("direction")?.unwrap_or_default();
        let planner: Planner = config.parse_param("planner")?.unwrap_or_default();
        let scale = finite(config, "scale", 1.0)? as f32;
        let rank = config.inputs().first().map_or(1, |d| d.dims().len().max(1));
        let axis = config.parse_param::<usize>("axis")?.unwrap_or(rank - 1);
        if axis >= rank {
            return Err(KernelError::invalid(format!(
                "parameter axis is {axis}, but input 0 has {rank} axes"
            )));
        }
        if axis == 0 && config.split().is_some() && rank > 1 {
            return Err(KernelError::invalid(
                "cannot be split along axis 0: it is the axis transformed",
            ));
        }
        let rows = Rows::check(config, rule, Dtype::CF32, Dtype::CF32, true)?;
        let dims = rows.input.dims();
        // Sizes were checked to be addressable, so the products fit usize.
        let n = dims[axis] as usize;
        let inner = dims[axis + 1..].iter().product::<u64>() as usize;
        // A tensor of rank 1 is one transform, its axis 0 the one transformed.
        let tile = config.split().map_or(rows.rows, |(_, tile)| tile) as usize;
        Ok(Self {
            rows,
            direction,
            planner,
            scale,
            n,
            inner,
            transforms: tile * rows.row_len / n,
        })
    }
}

//! A stream block's layout in time, its taps, and the size of the history it carries.
//!
//! A stream block's input runs in time along axis `axis` and every axis before it; the axes
//! after it are lanes, each its own stream ([`Stream::check`]). A filter of K taps needs each
//! lane's last K - 1 samples from the frame before: a [`History`], kept in the launch's carry
//! and put before the frame in the workspace, lost frames counting as zeros.

use kplace_abi::export::ports::Ports;
use kplace_abi::export::{Config, KernelError};
use kplace_abi::{Dtype, TensorDesc};

use crate::ports::port;

/// The most taps a filter may have: its history is carried per lane, and its work per output
/// sample grows with it.
pub const MAX_TAPS: usize = 1 << 16;

/// A stream block's ports and their layout in time.
#[derive(Clone, Copy, Debug)]
pub struct Stream {
    /// Input 0.
    pub input: TensorDesc,
    /// Output 0.
    pub output: TensorDesc,
    /// Time steps in a frame (S).
    pub samples: usize,
    /// Lanes, each filtered on its own.
    pub lanes: usize,
    /// Scalars per sample: 2 for `cf32`, 1 for `f32`.
    pub parts: usize,
}

impl Stream {
    /// Checks the ports of a block taking one of `dtypes` and writing the same, by `rule`,
    /// with its time axis from parameter `axis` (default the last), refusing a split.
    pub fn check(
        config: &Config<'_>,
        rule: &Ports,
        dtypes: &[Dtype],
    ) -> Result<Stream, KernelError> {
        let dtype = config.inputs().first().map_or(dtypes[0], |d| d.dtype);
        if !dtypes.contains(&dtype) {
            let names: Vec<&str> = dtypes.iter().filter_map(|d| d.name()).collect();
            return Err(KernelError::invalid(format!(
                "input 0 must be {}, got {}",
                names.join(" or "),
                dtype.name().unwrap_or("an unknown dtype")
            )));
        }
        let input = port(rule, config.inputs(), 0, "input 0", dtype)?;
        let output = port(rule, config.outputs(), 0, "output 0", dtype)?;
        let dims = input.dims();
        let axis: usize = config.parse_param("axis")?.unwrap_or(dims.len() - 1);
        if axis >= dims.len() {
            return Err(KernelError::invalid(format!(
                "parameter axis is {axis}, but input 0 has {} axes",
                dims.len()
            )));
        }
        if config.split().is_some() {
            return Err(KernelError::invalid(
                "cannot be split: it carries the stream from frame to frame",
            ));
        }
        // Sizes were checked to be addressable, so the products fit usize.
        Ok(Stream {
            input,
            output,
            samples: dims[..=axis].iter().product::<u64>() as usize,
            lanes: dims[axis + 1..].iter().product::<u64>() as usize,
            parts: if dtype == Dtype::CF32 { 2 } else { 1 },
        })
    }

    /// Scalars in one time step of every lane.
    pub fn step(&self) -> usize {
        self.lanes * self.parts
    }

    /// Checks that the output holds `steps` time steps of every lane.
    pub fn expect_output(&self, steps: usize, what: &str) -> Result<(), KernelError> {
        let outputs: u64 = self.output.dims().iter().product();
        let want = steps * self.lanes;
        if outputs != want as u64 {
            return Err(KernelError::invalid(format!(
                "output 0 must hold {want} samples ({what}), got {:?}",
                self.output.dims()
            )));
        }
        Ok(())
    }
}

/// Parameter `taps`: 1 to [`MAX_TAPS`] finite coefficients.
pub fn taps(config: &Config<'_>) -> Result<Vec<f32>, KernelError> {
    let taps: Vec<f32> = config
        .parse_list("taps")?
        .ok_or_else(|| KernelError::invalid("parameter taps is required: [h0, h1, ...]"))?;
    if taps.is_empty() || taps.len() > MAX_TAPS {
        return Err(KernelError::invalid(format!(
            "parameter taps must have 1 to {MAX_TAPS} coefficients, got {}",
            taps.len()
        )));
    }
    if let Some(bad) = taps.iter().position(|t| !t.is_finite()) {
        return Err(KernelError::invalid(format!(
            "parameter taps: item {bad} is not a finite number"
        )));
    }
    Ok(taps)
}

/// Each lane's last samples, carried from frame to frame.
#[derive(Clone, Copy, Debug)]
pub struct History {
    /// Time steps kept: taps - 1.
    pub steps: usize,
    /// Scalars per time step.
    pub step: usize,
    /// Time steps in a frame.
    pub frame: usize,
    /// Whether the history goes from frame to frame (else each frame starts from zeros).
    pub carried: bool,
}

impl History {
    /// Scalars of history.
    pub fn scalars(&self) -> usize {
        self.steps * self.step
    }

    /// The carry's bytes: the history, or nothing when it is not carried.
    pub fn carry_bytes(&self) -> u64 {
        if self.carried {
            (self.scalars() * size_of::<f32>()) as u64
        } else {
            0
        }
    }

    /// The workspace's scalars: the history, then a frame.
    pub fn extended_len(&self) -> usize {
        self.scalars() + self.frame * self.step
    }

    /// Scalars of the carried history that `frames_missing` lost frames push out (their
    /// zeros shifted in), at most all of it.
    pub fn lost_shift(&self, frames_missing: u64) -> usize {
        let lost = usize::try_from(frames_missing)
            .unwrap_or(usize::MAX)
            .saturating_mul(self.frame * self.step);
        lost.min(self.scalars())
    }
}

/// What `blocks.fir` checks at create (its module docs in the CPU library state the rule).
#[derive(Clone, Debug)]
pub struct FirSpec {
    /// The ports and the time axis.
    pub stream: Stream,
    /// h, K coefficients.
    pub taps: Vec<f32>,
    /// D.
    pub decimation: usize,
    /// The K - 1 steps carried, unless `stream: false`.
    pub history: History,
}

impl FirSpec {
    /// Checks parameters `taps`, `decimation`, `axis` and `stream`, and the ports by `rule`:
    /// D divides the frame's samples, and the output holds S / D steps of every lane.
    pub fn check(config: &Config<'_>, rule: &Ports) -> Result<Self, KernelError> {
        config.reject_unknown_params(&["taps", "decimation", "axis", "stream"])?;
        let stream = Stream::check(config, rule, &[Dtype::CF32, Dtype::F32])?;
        let taps = taps(config)?;
        let samples = stream.samples;
        let decimation: usize = config.parse_param("decimation")?.unwrap_or(1);
        if decimation == 0 || !samples.is_multiple_of(decimation) {
            return Err(KernelError::invalid(format!(
                "parameter decimation {decimation} must divide the {samples} samples of a frame"
            )));
        }
        let steps = samples / decimation;
        stream.expect_output(steps, &format!("{steps} of each of {} lanes", stream.lanes))?;
        Ok(FirSpec {
            history: History {
                steps: taps.len() - 1,
                step: stream.step(),
                frame: samples,
                carried: config.parse_param("stream")?.unwrap_or(true),
            },
            stream,
            taps,
            decimation,
        })
    }

    /// The workspace's bytes: the history, then the frame, per lane.
    pub fn workspace_bytes(&self) -> u64 {
        (self.history.extended_len() * size_of::<f32>()) as u64
    }
}

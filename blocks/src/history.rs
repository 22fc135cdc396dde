//! What the stateful blocks share: a stream laid out in time and lanes, its taps, and the
//! history of each lane carried from frame to frame.
//!
//! A stream block's input runs in time along axis `axis` and every axis before it; the axes
//! after it are lanes, each its own stream ([`Stream::check`]). A filter of K taps needs each
//! lane's last K - 1 samples from the frame before: [`History`] keeps them in the launch's
//! carry, puts them before the frame in the workspace, zero-fills the frames the runtime says
//! were lost, and keeps the new last samples for the next frame.

use kplace_abi::export::{Config, KernelError, Launch};
use kplace_abi::{Dtype, TensorDesc};

use crate::layout::port;

/// The most taps a filter may have: its history is carried per lane, and its work per output
/// sample grows with it.
pub const MAX_TAPS: usize = 1 << 16;

/// A stream block's ports and their layout in time.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stream {
    pub input: TensorDesc,
    pub output: TensorDesc,
    /// Time steps in a frame (S).
    pub samples: usize,
    /// Lanes, each filtered on its own.
    pub lanes: usize,
    /// Scalars per sample: 2 for `cf32`, 1 for `f32`.
    pub parts: usize,
}

impl Stream {
    /// Checks the ports of a block taking one of `dtypes` and writing the same, with its
    /// time axis from parameter `axis` (default the last), refusing a split.
    pub fn check(config: &Config<'_>, dtypes: &[Dtype]) -> Result<Stream, KernelError> {
        let dtype = config.inputs().first().map_or(dtypes[0], |d| d.dtype);
        if !dtypes.contains(&dtype) {
            let names: Vec<&str> = dtypes.iter().filter_map(|d| d.name()).collect();
            return Err(KernelError::invalid(format!(
                "input 0 must be {}, got {}",
                names.join(" or "),
                dtype.name().unwrap_or("an unknown dtype")
            )));
        }
        let input = port(config.inputs(), 0, "input 0", dtype)?;
        let output = port(config.outputs(), 0, "output 0", dtype)?;
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
pub(crate) fn taps(config: &Config<'_>) -> Result<Vec<f32>, KernelError> {
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
pub(crate) struct History {
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
    pub fn len(&self) -> usize {
        self.steps * self.step
    }

    /// The carry's bytes: the history, or nothing when it is not carried.
    pub fn carry_bytes(&self) -> u64 {
        if self.carried {
            (self.len() * size_of::<f32>()) as u64
        } else {
            0
        }
    }

    /// The workspace's scalars: the history, then a frame.
    pub fn extended_len(&self) -> usize {
        self.len() + self.frame * self.step
    }

    /// The workspace holding the history (from the carry, the lost frames' zeros shifted in,
    /// or zeros when not carried) then the frame `x`, and the carry to [`History::keep`] into.
    ///
    /// # Safety
    /// The launch's workspace and carry are this launch's alone (the runtime runs a stateful
    /// stage one frame at a time).
    pub unsafe fn extend<'a>(
        &self,
        launch: &Launch<'a>,
        x: &[f32],
    ) -> Result<(&'a mut [f32], Option<&'a mut [f32]>), KernelError> {
        let kept = self.len();
        // SAFETY: the caller's contract.
        let extended = unsafe { launch.workspace_slice::<f32>(self.extended_len())? };
        let carry = if self.carried {
            // SAFETY: the caller's contract.
            let carry = unsafe { launch.carry_slice::<f32>(kept)? };
            let lost = (launch.frames_missing() as usize).saturating_mul(self.frame * self.step);
            let shift = lost.min(kept);
            carry.copy_within(shift.., 0);
            carry[kept - shift..].fill(0.0);
            extended[..kept].copy_from_slice(carry);
            Some(carry)
        } else {
            extended[..kept].fill(0.0);
            None
        };
        extended[kept..].copy_from_slice(&x[..self.frame * self.step]);
        Ok((extended, carry))
    }

    /// Keeps the last time steps of `extended` in `carry` for the next frame.
    pub fn keep(&self, carry: Option<&mut [f32]>, extended: &[f32]) {
        if let Some(carry) = carry {
            carry.copy_from_slice(&extended[extended.len() - self.len()..]);
        }
    }
}

//! `blocks.fir`: a decimating FIR filter over a continuous stream, the stream's history carried
//! from frame to frame.
//!
//! - Input 0: `cf32` or `f32`, any rank. Time runs along axis `axis` (parameter, default the
//!   last) and every axis before it, in row-major order; the axes after it are lanes
//!   (channels), each filtered on its own. So `[N]` is one stream of N samples, and
//!   `[R, T, C]` with `axis: 1` is C channels of R*T samples each.
//! - Output 0: the input's dtype, `S / D` time steps of the same lanes (S the samples per lane
//!   in a frame, D the decimation), in any shape with that many elements.
//! - `y[m] = sum over k < K of h[k] * x[m D - k]`, where `x` is the whole stream of a lane and
//!   samples before the stream began are 0: one long convolution, decimated, whatever the
//!   frame boundaries. The sum runs in single precision, `k` from 0 up, one product and one
//!   addition at a time (so a reference that sums in that order agrees bit for bit).
//! - Parameters: `taps` (a list of K real coefficients, at least one), `decimation` (D,
//!   default 1, dividing S, so that every frame starts on an output sample), `axis`, and
//!   `stream` (default true; false filters every frame on its own, as if the stream began at
//!   each: bursts rather than a stream).
//! - Stateful: the carry holds the last K - 1 samples of each lane. A lost frame is
//!   zero-filled: its samples count as zeros, so the output is that of the stream with the
//!   lost frames replaced by silence. With `stream: false` nothing is carried, and the runtime
//!   runs frames concurrently. Not split. The workspace holds the history's samples followed
//!   by the frame's, per lane.

use std::ffi::CStr;

use kplace_abi::export::{Config, KernelError, KernelImpl, Launch};
use kplace_abi::{DeviceKind, Dtype, KernelFlags, MemorySpace, TensorDesc};

use crate::layout::{PORTS, port};

/// The `blocks.fir` state.
#[derive(Debug)]
pub struct Fir {
    input: TensorDesc,
    output: TensorDesc,
    taps: Vec<f32>,
    decimation: usize,
    /// Samples per lane in a frame (S).
    samples: usize,
    /// Lanes, each filtered on its own.
    lanes: usize,
    /// Scalars per sample: 2 for `cf32`, 1 for `f32`.
    parts: usize,
    /// Whether the history goes from frame to frame (else each frame starts from zeros).
    stream: bool,
}

/// The most taps a filter may have: its history is carried per lane, and its work per output
/// sample grows with it.
pub const MAX_TAPS: usize = 1 << 16;

impl Fir {
    /// Scalars of history per lane: K - 1 samples.
    fn history(&self) -> usize {
        (self.taps.len() - 1) * self.parts
    }

    /// Scalars in one time step of every lane.
    fn step(&self) -> usize {
        self.lanes * self.parts
    }
}

impl KernelImpl for Fir {
    const NAME: &'static CStr = c"blocks.fir";
    const DEVICE: DeviceKind = DeviceKind::CPU;
    const MEMORY: MemorySpace = MemorySpace::HOST;
    const N_INPUTS: u32 = 1;
    const N_OUTPUTS: u32 = 1;
    const NAMES_ITS_ERRORS: bool = true;
    const FLAGS: KernelFlags = KernelFlags::STATEFUL;

    fn create(config: &Config<'_>) -> Result<Self, KernelError> {
        config.reject_unknown_params(&["taps", "decimation", "axis", "stream"])?;
        let dtype = config.inputs().first().map_or(Dtype::CF32, |d| d.dtype);
        if dtype != Dtype::CF32 && dtype != Dtype::F32 {
            return Err(KernelError::invalid(format!(
                "input 0 must be cf32 or f32, got {}",
                dtype.name().unwrap_or("an unknown dtype")
            )));
        }
        let input = port(config.inputs(), 0, "input 0", dtype)?;
        let output = port(config.outputs(), 0, "output 0", dtype)?;
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
        let dims = input.dims();
        let axis: usize = config.parse_param("axis")?.unwrap_or(dims.len() - 1);
        if axis >= dims.len() {
            return Err(KernelError::invalid(format!(
                "parameter axis is {axis}, but input 0 has {} axes",
                dims.len()
            )));
        }
        // Sizes were checked to be addressable, so the products fit usize.
        let samples = dims[..=axis].iter().product::<u64>() as usize;
        let lanes = dims[axis + 1..].iter().product::<u64>() as usize;
        let decimation: usize = config.parse_param("decimation")?.unwrap_or(1);
        if decimation == 0 || !samples.is_multiple_of(decimation) {
            return Err(KernelError::invalid(format!(
                "parameter decimation {decimation} must divide the {samples} samples of a frame"
            )));
        }
        let outputs: u64 = output.dims().iter().product();
        if outputs != (samples / decimation * lanes) as u64 {
            return Err(KernelError::invalid(format!(
                "output 0 must hold {} samples ({} of each of {lanes} lanes), got {:?}",
                samples / decimation * lanes,
                samples / decimation,
                output.dims()
            )));
        }
        if config.split().is_some() {
            return Err(KernelError::invalid(
                "cannot be split: it carries the stream from frame to frame",
            ));
        }
        Ok(Fir {
            input,
            output,
            taps,
            decimation,
            samples,
            lanes,
            parts: if dtype == Dtype::CF32 { 2 } else { 1 },
            stream: config.parse_param("stream")?.unwrap_or(true),
        })
    }

    fn workspace_bytes(&self) -> u64 {
        ((self.history() * self.lanes + self.samples * self.step()) * size_of::<f32>()) as u64
    }

    fn carry_bytes(&self) -> u64 {
        if self.stream {
            (self.history() * self.lanes * size_of::<f32>()) as u64
        } else {
            0
        }
    }

    fn launch(&self, launch: &Launch<'_>) -> Result<(), KernelError> {
        let input = PORTS.launch(launch.input(0), "input 0", &self.input)?;
        let output = PORTS.launch(launch.output(0), "output 0", &self.output)?;
        let (carried, step) = (self.history() * self.lanes, self.step());
        // SAFETY: the runtime runs a stateful stage one frame at a time, over the whole
        // frame, so the input is complete, the output, workspace and carry this launch's own.
        let (x, y, extended) = unsafe {
            (
                input.host_slice::<f32>()?,
                output.host_slice_mut::<f32>()?,
                launch.workspace_slice::<f32>(carried + self.samples * step)?,
            )
        };
        // The history, then the frame: time steps of every lane, in order.
        let carry = if self.stream {
            // SAFETY: as above.
            let carry = unsafe { launch.carry_slice::<f32>(carried)? };
            // The lost frames' samples are zeros: shift them into the history.
            let lost = (launch.frames_missing() as usize).saturating_mul(self.samples * step);
            let shift = lost.min(carried);
            carry.copy_within(shift.., 0);
            carry[carried - shift..].fill(0.0);
            extended[..carried].copy_from_slice(carry);
            Some(carry)
        } else {
            extended[..carried].fill(0.0);
            None
        };
        extended[carried..].copy_from_slice(&x[..self.samples * step]);
        let k_last = self.taps.len() - 1;
        for (m, out) in y.chunks_exact_mut(step).enumerate() {
            let newest = k_last + m * self.decimation;
            out.fill(0.0);
            for (k, &h) in self.taps.iter().enumerate() {
                let at = (newest - k) * step;
                for (o, &v) in out.iter_mut().zip(&extended[at..at + step]) {
                    *o += h * v;
                }
            }
        }
        if let Some(carry) = carry {
            carry.copy_from_slice(&extended[extended.len() - carried..]);
        }
        Ok(())
    }
}

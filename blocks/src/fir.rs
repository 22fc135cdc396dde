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
use kplace_abi::{DeviceKind, Dtype, KernelFlags, MemorySpace};

pub use crate::history::MAX_TAPS;
use crate::history::{History, Stream, taps};
use crate::layout::PORTS;

/// The `blocks.fir` state.
#[derive(Debug)]
pub struct Fir {
    stream: Stream,
    taps: Vec<f32>,
    decimation: usize,
    history: History,
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
        let stream = Stream::check(config, &[Dtype::CF32, Dtype::F32])?;
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
        Ok(Fir {
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

    fn workspace_bytes(&self) -> u64 {
        (self.history.extended_len() * size_of::<f32>()) as u64
    }

    fn carry_bytes(&self) -> u64 {
        self.history.carry_bytes()
    }

    fn launch(&self, launch: &Launch<'_>) -> Result<(), KernelError> {
        let input = PORTS.launch(launch.input(0), "input 0", &self.stream.input)?;
        let output = PORTS.launch(launch.output(0), "output 0", &self.stream.output)?;
        let step = self.stream.step();
        // SAFETY: the runtime runs a stateful stage one frame at a time, over the whole
        // frame, so the input is complete, the output, workspace and carry this launch's own.
        let (y, (extended, carry)) = unsafe {
            let x = input.host_slice::<f32>()?;
            (
                output.host_slice_mut::<f32>()?,
                self.history.extend(launch, x)?,
            )
        };
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
        self.history.keep(carry, extended);
        Ok(())
    }
}

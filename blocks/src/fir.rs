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
use kplace_abi::{DeviceKind, KernelFlags, MemorySpace};
use kplace_blocks_contract::names;

use kplace_blocks_contract::stream::FirSpec;
pub use kplace_blocks_contract::stream::MAX_TAPS;

use crate::history::HostHistory;
use crate::layout::PORTS;

/// The `blocks.fir` state.
#[derive(Debug)]
pub struct Fir(FirSpec);

impl KernelImpl for Fir {
    const NAME: &'static CStr = names::FIR;
    const DEVICE: DeviceKind = DeviceKind::CPU;
    const MEMORY: MemorySpace = MemorySpace::HOST;
    const N_INPUTS: u32 = 1;
    const N_OUTPUTS: u32 = 1;
    const NAMES_ITS_ERRORS: bool = true;
    const FLAGS: KernelFlags = KernelFlags::STATEFUL;

    fn create(config: &Config<'_>) -> Result<Self, KernelError> {
        FirSpec::check(config, &PORTS).map(Self)
    }

    fn workspace_bytes(&self) -> u64 {
        self.0.workspace_bytes()
    }

    fn carry_bytes(&self) -> u64 {
        self.0.history.carry_bytes()
    }

    fn launch(&self, launch: &Launch<'_>) -> Result<(), KernelError> {
        let fir = &self.0;
        let input = PORTS.launch(launch.input(0), "input 0", &fir.stream.input)?;
        let output = PORTS.launch(launch.output(0), "output 0", &fir.stream.output)?;
        let step = fir.stream.step();
        // SAFETY: the runtime runs a stateful stage one frame at a time, over the whole
        // frame, so the input is complete, the output, workspace and carry this launch's own.
        let (y, (extended, carry)) = unsafe {
            let x = input.host_slice::<f32>()?;
            (
                output.host_slice_mut::<f32>()?,
                fir.history.extend(launch, x)?,
            )
        };
        let k_last = fir.taps.len() - 1;
        for (m, out) in y.chunks_exact_mut(step).enumerate() {
            let newest = k_last + m * fir.decimation;
            out.fill(0.0);
            for (k, &h) in fir.taps.iter().enumerate() {
                let at = (newest - k) * step;
                for (o, &v) in out.iter_mut().zip(&extended[at..at + step]) {
                    *o += h * v;
                }
            }
        }
        fir.history.keep(carry, extended);
        Ok(())
    }
}

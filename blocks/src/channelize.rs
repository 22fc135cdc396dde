//! `blocks.channelize`: a polyphase channelizer. It splits a stream into M channels, each a
//! 1/M-wide band at 1/M of the rate, the stream's history carried from frame to frame.
//!
//! - Input 0: `cf32`. Time runs along axis `axis` (default the last) and every axis before it;
//!   the axes after it are lanes, each channelized on its own (as `blocks.fir`).
//! - Output 0: `cf32`, S / M time steps of every lane's M channels, `[S / M, lanes, M]` in
//!   row-major order (any shape with that many elements).
//! - `y_k[m] = sum over i < K of h[i] x[m M - i] exp(2 pi i k i / M)`: channel k is the stream
//!   shifted down by k / M cycles per sample, filtered by the prototype low-pass `h`, and kept
//!   every M-th sample, so it is centred on k / M cycles per sample (the upper channels hold
//!   the negative frequencies). Samples before the stream began are 0, and lost frames count
//!   as zeros, as in `blocks.fir`. Computed as a polyphase filter bank: M branch sums of K / M
//!   products each, summed in single precision from the oldest tap up, then one unnormalised
//!   inverse FFT of M points (FFTW) per output step.
//! - Parameters: `channels` (M, at least 2, dividing the frame's S samples per lane), `taps`
//!   (the prototype, K real coefficients, padded with zeros to a multiple of M), `axis`.
//! - Stateful, not split. Workspace: the history then the frame, per lane.

use std::ffi::CStr;

use kplace_abi::export::{Config, KernelError, KernelImpl, Launch};
use kplace_abi::{DeviceKind, Dtype, KernelFlags, MemorySpace};
use kplace_blocks_contract::names;
use kplace_fftw::{BatchedFft, Complex32, Direction, Rigor};

use kplace_blocks_contract::stream::{History, Stream, taps};

use crate::history::HostHistory;
use crate::layout::PORTS;

/// The `blocks.channelize` state: the prototype's polyphase branches and the channels' FFT.
#[derive(Debug)]
pub struct Channelize {
    stream: Stream,
    channels: usize,
    /// The prototype, padded with zeros to `branches * channels` taps.
    taps: Vec<f32>,
    history: History,
    fft: BatchedFft,
}

impl KernelImpl for Channelize {
    const NAME: &'static CStr = names::CHANNELIZE;
    const DEVICE: DeviceKind = DeviceKind::CPU;
    const MEMORY: MemorySpace = MemorySpace::HOST;
    const N_INPUTS: u32 = 1;
    const N_OUTPUTS: u32 = 1;
    const NAMES_ITS_ERRORS: bool = true;
    const FLAGS: KernelFlags = KernelFlags::STATEFUL;

    fn create(config: &Config<'_>) -> Result<Self, KernelError> {
        config.reject_unknown_params(&["channels", "taps", "axis"])?;
        let stream = Stream::check(config, &PORTS, &[Dtype::CF32])?;
        let channels: usize = config
            .parse_param("channels")?
            .ok_or_else(|| KernelError::invalid("parameter channels is required"))?;
        let samples = stream.samples;
        if channels < 2 || !samples.is_multiple_of(channels) {
            return Err(KernelError::invalid(format!(
                "parameter channels {channels} must be at least 2 and divide the {samples} \
                 samples of a frame"
            )));
        }
        let mut taps = taps(config)?;
        taps.resize(taps.len().div_ceil(channels) * channels, 0.0);
        let steps = samples / channels;
        stream.expect_output(
            steps * channels,
            &format!(
                "{steps} steps of {channels} channels of each of {} lanes",
                stream.lanes
            ),
        )?;
        let fft = BatchedFft::new(
            channels,
            steps * stream.lanes,
            channels,
            Direction::Inverse,
            Rigor::Estimate,
        )?;
        Ok(Channelize {
            history: History {
                steps: taps.len() - 1,
                step: stream.step(),
                frame: samples,
                carried: true,
            },
            stream,
            channels,
            taps,
            fft,
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
        let (m_channels, lanes) = (self.channels, self.stream.lanes);
        let step = self.stream.step();
        // SAFETY: the runtime runs a stateful stage one frame at a time, over the whole
        // frame, so the input is complete, the output, workspace and carry this launch's own.
        let (y, (extended, carry)) = unsafe {
            let x = input.host_slice::<f32>()?;
            (
                output.host_slice_mut::<Complex32>()?,
                self.history.extend(launch, x)?,
            )
        };
        let newest_first = self.taps.len() - 1;
        let branches = self.taps.len() / m_channels;
        // Branch r of output step m and lane l: v_r = sum over p of h[p M + r] x[m M - p M - r],
        // written where the channels' inverse FFT then turns the branches into channels.
        for (m, row) in y.chunks_exact_mut(lanes * m_channels).enumerate() {
            let newest = newest_first + m * m_channels;
            for (lane, out) in row.chunks_exact_mut(m_channels).enumerate() {
                for (r, v) in out.iter_mut().enumerate() {
                    let (mut re, mut im) = (0.0f32, 0.0f32);
                    for p in (0..branches).rev() {
                        let h = self.taps[p * m_channels + r];
                        let at = (newest - p * m_channels - r) * step + 2 * lane;
                        re += h * extended[at];
                        im += h * extended[at + 1];
                    }
                    *v = Complex32::new(re, im);
                }
            }
        }
        self.fft.execute(y)?;
        self.history.keep(carry, extended);
        Ok(())
    }
}

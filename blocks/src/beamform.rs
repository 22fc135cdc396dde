//! `blocks.beamform` and `blocks.combine`: narrowband beamformers, a weighted sum of an array's
//! channels per beam.
//!
//! - Input 0: `cf32 [.., C]`, the last axis the array's C channels (a snapshot per index of
//!   the other axes). Output 0: `cf32 [.., B]`, one value per beam for each snapshot, in the
//!   same order: its leading dimensions hold as many snapshots as the input's (the same
//!   dimensions, or e.g. `[R * T, B]` from `[R, T, C]`).
//! - Both compute `y[.., b] = sum over c of w[b, c] * x[.., c]` in double precision, rounded
//!   once. `blocks.beamform` steers a uniform linear array: `w[b, c] = (1 / C) *
//!   exp(-2 pi i * spacing * c * sin(angle_b))`, computed in double at create, so a plane wave
//!   from `angle_b` (degrees from broadside, channel c leading channel 0 by
//!   `2 pi * spacing * c * sin(angle)`) adds up in phase in beam b with its own amplitude.
//!   Parameters: `angles`, the B beam directions in degrees within [-90, 90], a list
//!   (`angles: [-30, 0, 14.5]`); `spacing`, the element spacing in wavelengths, default 0.5.
//! - `blocks.combine` takes the weights as its input 1, `cf32 [B, C]` (a constant tensor read
//!   from an `.npy` file: tapered, adaptive or any other weights, computed offline), read at
//!   each launch. No parameters.
//! - Split along axis 0 in tiles that divide it (rank 2 or more), or not split. No workspace.

use std::ffi::CStr;

use kplace_abi::export::{Config, KernelError, KernelImpl, Launch};
use kplace_abi::{DeviceKind, MemorySpace, TensorDesc};
use kplace_blocks_contract::beams::Beams;
use kplace_blocks_contract::names;

use crate::layout::{PORTS, tile_slices};

/// The `blocks.beamform` state: the ports, and the weights, beam-major.
#[derive(Debug)]
pub struct Beamform {
    beams: Beams,
    /// `w[b, c]` as (re, im), row b holding the channels.
    weights: Vec<(f64, f64)>,
}

/// The `blocks.combine` state: the ports, and the weights' descriptor (input 1).
#[derive(Debug)]
pub struct Combine {
    beams: Beams,
    weights: TensorDesc,
}

/// The CPU launch both beamformers share.
trait HostBeams {
    /// Writes the launch's tile of beams, weight `w(b, c)` for beam b and channel c.
    fn launch(
        &self,
        launch: &Launch<'_>,
        w: impl Fn(usize, usize) -> (f64, f64),
    ) -> Result<(), KernelError>;
}

impl HostBeams for Beams {
    fn launch(
        &self,
        launch: &Launch<'_>,
        w: impl Fn(usize, usize) -> (f64, f64),
    ) -> Result<(), KernelError> {
        let input = PORTS.launch(launch.input(0), "input 0", &self.input)?;
        let output = PORTS.launch(launch.output(0), "output 0", &self.output)?;
        let snapshots = self.tile_snapshots(launch.tile())?;
        // SAFETY: the tile's snapshots of the input are complete and its rows of the output
        // this launch's alone (the runtime's rule for tiles). Each snapshot is C complex
        // values in and B out: the element range is in snapshots, scaled per side.
        let (x, y) = unsafe {
            tile_slices::<f32, f32>(
                input,
                output,
                snapshots,
                (2 * self.channels, 2 * self.beams),
            )?
        };
        for (x, y) in x
            .chunks_exact(2 * self.channels)
            .zip(y.chunks_exact_mut(2 * self.beams))
        {
            for (b, y) in y.chunks_exact_mut(2).enumerate() {
                let (mut re, mut im) = (0.0, 0.0);
                for (c, x) in x.chunks_exact(2).enumerate() {
                    let ((wr, wi), xr, xi) = (w(b, c), f64::from(x[0]), f64::from(x[1]));
                    re += wr * xr - wi * xi;
                    im += wr * xi + wi * xr;
                }
                y[0] = re as f32;
                y[1] = im as f32;
            }
        }
        Ok(())
    }
}

impl KernelImpl for Beamform {
    const NAME: &'static CStr = names::BEAMFORM;
    const DEVICE: DeviceKind = DeviceKind::CPU;
    const MEMORY: MemorySpace = MemorySpace::HOST;
    const N_INPUTS: u32 = 1;
    const N_OUTPUTS: u32 = 1;
    const NAMES_ITS_ERRORS: bool = true;

    fn create(config: &Config<'_>) -> Result<Self, KernelError> {
        let (beams, weights) = Beams::steered(config, &PORTS)?;
        Ok(Self { beams, weights })
    }

    fn workspace_bytes(&self) -> u64 {
        0
    }

    fn launch(&self, launch: &Launch<'_>) -> Result<(), KernelError> {
        let channels = self.beams.channels;
        self.beams
            .launch(launch, |b, c| self.weights[b * channels + c])
    }
}

impl KernelImpl for Combine {
    const NAME: &'static CStr = names::COMBINE;
    const DEVICE: DeviceKind = DeviceKind::CPU;
    const MEMORY: MemorySpace = MemorySpace::HOST;
    const N_INPUTS: u32 = 2;
    const N_OUTPUTS: u32 = 1;
    const NAMES_ITS_ERRORS: bool = true;

    fn create(config: &Config<'_>) -> Result<Self, KernelError> {
        let (beams, weights) = Beams::weighted(config, &PORTS)?;
        Ok(Self { beams, weights })
    }

    fn workspace_bytes(&self) -> u64 {
        0
    }

    fn launch(&self, launch: &Launch<'_>) -> Result<(), KernelError> {
        let weights = PORTS.launch(launch.input(1), "input 1", &self.weights)?;
        let len = 2 * self.beams.beams * self.beams.channels;
        // SAFETY: the weights were checked against their descriptor, `len` floats; no launch
        // writes an input.
        let w = unsafe { weights.host_range::<f32>(0..len)? };
        let channels = self.beams.channels;
        self.beams.launch(launch, |b, c| {
            let k = 2 * (b * channels + c);
            (f64::from(w[k]), f64::from(w[k + 1]))
        })
    }
}

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

use kplace_abi::export::ports::describe;
use kplace_abi::export::{Config, KernelError, KernelImpl, Launch};
use kplace_abi::{DeviceKind, Dtype, MemorySpace, TensorDesc};

use crate::layout::{PORTS, finite, port, tile_slices};

/// What both beamformers check at create: the ports, the beams and the split.
#[derive(Debug)]
struct Beams {
    input: TensorDesc,
    output: TensorDesc,
    /// The extent of axis 0.
    rows: u64,
    /// Snapshots per index of axis 0.
    snapshots: usize,
    channels: usize,
    beams: usize,
}

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

/// The `angles` parameter: degrees, each within [-90, 90].
fn angles(config: &Config<'_>) -> Result<Vec<f64>, KernelError> {
    let angles: Vec<f64> = config.parse_list("angles")?.ok_or_else(|| {
        KernelError::invalid("parameter angles is missing: the beams' directions in degrees")
    })?;
    if angles.is_empty() {
        return Err(KernelError::invalid(
            "parameter angles is empty: name at least one beam",
        ));
    }
    match angles.iter().find(|a| !(-90.0..=90.0).contains(*a)) {
        Some(a) => Err(KernelError::invalid(format!(
            "parameter angles: {a} is not an angle in degrees within [-90, 90]"
        ))),
        None => Ok(angles),
    }
}

impl Beams {
    /// Checks input 0, output 0 (`beams` per snapshot) and the split.
    fn check(config: &Config<'_>, beams: usize, per_beam: &str) -> Result<Beams, KernelError> {
        let input = port(config.inputs(), 0, "input 0", Dtype::CF32)?;
        let output = port(config.outputs(), 0, "output 0", Dtype::CF32)?;
        let (dims, out) = (input.dims(), output.dims());
        let channels = dims[dims.len() - 1] as usize;
        let leading = &dims[..dims.len() - 1];
        let snapshots: u64 = leading.iter().product();
        let out_snapshots: u64 = out[..out.len() - 1].iter().product();
        if out[out.len() - 1] != beams as u64 || out_snapshots != snapshots {
            let example: Vec<u64> = leading.iter().copied().chain([beams as u64]).collect();
            return Err(KernelError::invalid(format!(
                "output 0 must be cf32 [.., {beams}]: one value per {per_beam} ({beams}) for \
                 each of the input's {snapshots} snapshots, e.g. {example:?}; got {}",
                describe(&output)
            )));
        }
        match config.split() {
            None => {}
            Some((0, _)) if dims.len() == 1 => {
                return Err(KernelError::invalid(format!(
                    "cannot be split: its one axis is the channels ({})",
                    describe(&input)
                )));
            }
            Some((0, tile)) if tile >= 1 && dims[0].is_multiple_of(tile) => {}
            Some((axis, tile)) => {
                return Err(KernelError::invalid(format!(
                    "split along axis {axis} in tiles of {tile}: only along axis 0, in \
                     tiles that divide its {}",
                    dims[0]
                )));
            }
        }
        let rows = if dims.len() == 1 { 1 } else { dims[0] };
        Ok(Beams {
            input,
            output,
            rows,
            // Sizes were checked to be addressable.
            snapshots: (snapshots / rows) as usize,
            channels,
            beams,
        })
    }

    /// Writes the launch's tile of beams, weight `w(b, c)` for beam b and channel c.
    fn launch(
        &self,
        launch: &Launch<'_>,
        w: impl Fn(usize, usize) -> (f64, f64),
    ) -> Result<(), KernelError> {
        let input = PORTS.launch(launch.input(0), "input 0", &self.input)?;
        let output = PORTS.launch(launch.output(0), "output 0", &self.output)?;
        let tile = launch.tile();
        // A rank-1 input is one snapshot: its tile is the channels, taken whole.
        let (begin, end) = if self.input.dims().len() == 1 {
            (0, 1)
        } else {
            match tile.begin.checked_add(tile.count) {
                Some(end) if end <= self.rows => (tile.begin as usize, end as usize),
                _ => {
                    return Err(KernelError::invalid(format!(
                        "tile [{}, +{}) is outside the {} indices of axis 0",
                        tile.begin, tile.count, self.rows
                    )));
                }
            }
        };
        let snapshots = begin * self.snapshots..end * self.snapshots;
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
    const NAME: &'static CStr = c"blocks.beamform";
    const DEVICE: DeviceKind = DeviceKind::CPU;
    const MEMORY: MemorySpace = MemorySpace::HOST;
    const N_INPUTS: u32 = 1;
    const N_OUTPUTS: u32 = 1;
    const NAMES_ITS_ERRORS: bool = true;

    fn create(config: &Config<'_>) -> Result<Self, KernelError> {
        config.reject_unknown_params(&["angles", "spacing"])?;
        let angles = angles(config)?;
        let spacing = finite(config, "spacing", 0.5)?;
        let beams = Beams::check(config, angles.len(), "angle")?;
        let channels = beams.channels;
        let weights = angles
            .iter()
            .flat_map(|a| {
                let step = -std::f64::consts::TAU * spacing * a.to_radians().sin();
                (0..channels).map(move |c| {
                    let (s, co) = (step * c as f64).sin_cos();
                    (co / channels as f64, s / channels as f64)
                })
            })
            .collect();
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
    const NAME: &'static CStr = c"blocks.combine";
    const DEVICE: DeviceKind = DeviceKind::CPU;
    const MEMORY: MemorySpace = MemorySpace::HOST;
    const N_INPUTS: u32 = 2;
    const N_OUTPUTS: u32 = 1;
    const NAMES_ITS_ERRORS: bool = true;

    fn create(config: &Config<'_>) -> Result<Self, KernelError> {
        config.reject_unknown_params(&[])?;
        let weights = port(config.inputs(), 1, "input 1", Dtype::CF32)?;
        let input = port(config.inputs(), 0, "input 0", Dtype::CF32)?;
        let channels = input.dims()[input.dims().len() - 1];
        let [beams, c] = weights.dims()[..] else {
            return Err(KernelError::invalid(format!(
                "input 1 must be the weights, cf32 [B, {channels}] (beams, channels); got {}",
                describe(&weights)
            )));
        };
        if c != channels {
            return Err(KernelError::invalid(format!(
                "input 1 must be the weights, cf32 [B, {channels}]: one per channel of input \
                 0 ({}); got {}",
                describe(&input),
                describe(&weights)
            )));
        }
        let beams = Beams::check(config, beams as usize, "row of the weights")?;
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

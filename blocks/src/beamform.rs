//! `blocks.beamform`: a narrowband delay-and-sum beamformer for a uniform linear array.
//!
//! - Input 0: `cf32 [.., C]`, the last axis the array's C channels (a snapshot per index of
//!   the other axes). Output 0: `cf32 [.., B]`, one value per beam for each snapshot, in the
//!   same order: its leading dimensions hold as many snapshots as the input's (the same
//!   dimensions, or e.g. `[R * T, B]` from `[R, T, C]`).
//! - `y[.., b] = (1 / C) * sum over c of w[b, c] * x[.., c]` with
//!   `w[b, c] = exp(-2 pi i * spacing * c * sin(angle_b))`, computed in double and rounded once:
//!   a plane wave from `angle_b` (degrees from broadside, channel c leading channel 0 by
//!   `2 pi * spacing * c * sin(angle)`) adds up in phase in beam b with its own amplitude.
//! - Parameters: `angles`, the B beam directions in degrees within [-90, 90], a list
//!   (`angles: [-30, 0, 14.5]`); `spacing`, the element spacing in wavelengths, default 0.5.
//! - Split along axis 0 in tiles that divide it (rank 2 or more), or not split. No workspace.

use std::ffi::CStr;

use kplace_abi::export::ports::describe;
use kplace_abi::export::{Config, KernelError, KernelImpl, Launch};
use kplace_abi::{DeviceKind, Dtype, MemorySpace, TensorDesc};

use crate::layout::{PORTS, finite, port, tile_slices};

/// The `blocks.beamform` state: the weights, beam-major.
#[derive(Debug)]
pub struct Beamform {
    input: TensorDesc,
    output: TensorDesc,
    /// The extent of axis 0.
    rows: u64,
    /// Snapshots per index of axis 0.
    snapshots: usize,
    channels: usize,
    beams: usize,
    /// `w[b, c]` as (re, im), row b holding the channels.
    weights: Vec<(f64, f64)>,
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
        let input = port(config.inputs(), 0, "input 0", Dtype::CF32)?;
        let output = port(config.outputs(), 0, "output 0", Dtype::CF32)?;
        let (dims, out) = (input.dims(), output.dims());
        let (channels, beams) = (dims[dims.len() - 1] as usize, angles.len());
        let leading = &dims[..dims.len() - 1];
        let snapshots: u64 = leading.iter().product();
        let out_snapshots: u64 = out[..out.len() - 1].iter().product();
        if out[out.len() - 1] != beams as u64 || out_snapshots != snapshots {
            let example: Vec<u64> = leading.iter().copied().chain([beams as u64]).collect();
            return Err(KernelError::invalid(format!(
                "output 0 must be cf32 [.., {beams}]: one value per angle ({beams}) for each \
                 of the input's {snapshots} snapshots, e.g. {example:?}; got {}",
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
        let rows = if dims.len() == 1 { 1 } else { dims[0] };
        Ok(Self {
            input,
            output,
            rows,
            // Sizes were checked to be addressable.
            snapshots: (snapshots / rows) as usize,
            channels,
            beams,
            weights,
        })
    }

    fn workspace_bytes(&self) -> u64 {
        0
    }

    fn launch(&self, launch: &Launch<'_>) -> Result<(), KernelError> {
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
            for (y, w) in y
                .chunks_exact_mut(2)
                .zip(self.weights.chunks_exact(self.channels))
            {
                let (mut re, mut im) = (0.0, 0.0);
                for (x, &(wr, wi)) in x.chunks_exact(2).zip(w) {
                    let (xr, xi) = (f64::from(x[0]), f64::from(x[1]));
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

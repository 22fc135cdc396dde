//! The beamformers' ports and weights: `blocks.beamform` (steered at given angles) and
//! `blocks.combine` (weights given as input 1).

use std::ops::Range;

use kplace_abi::export::ports::{Ports, describe};
use kplace_abi::export::{Config, KernelError};
use kplace_abi::{Dtype, TensorDesc, Tile};

use crate::ports::{finite, port};

/// What both beamformers check at create: the ports, the beams and the split.
#[derive(Clone, Copy, Debug)]
pub struct Beams {
    /// The rule the ports were checked by, and launches are.
    pub rule: Ports,
    /// Input 0, `cf32 [.., C]`.
    pub input: TensorDesc,
    /// Output 0, `cf32 [.., B]`.
    pub output: TensorDesc,
    /// The extent of axis 0 (1 for a rank-1 input: one snapshot).
    pub rows: u64,
    /// Snapshots per index of axis 0.
    pub snapshots: usize,
    /// C.
    pub channels: usize,
    /// B.
    pub beams: usize,
}

/// The `angles` parameter: degrees, each within [-90, 90].
pub fn angles(config: &Config<'_>) -> Result<Vec<f64>, KernelError> {
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
    /// Checks input 0, output 0 (`beams` per snapshot) and the split, by `rule`.
    pub fn check(
        config: &Config<'_>,
        rule: &Ports,
        beams: usize,
        per_beam: &str,
    ) -> Result<Beams, KernelError> {
        let input = port(rule, config.inputs(), 0, "input 0", Dtype::CF32)?;
        let output = port(rule, config.outputs(), 0, "output 0", Dtype::CF32)?;
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
            rule: *rule,
            input,
            output,
            rows,
            // Sizes were checked to be addressable.
            snapshots: (snapshots / rows) as usize,
            channels,
            beams,
        })
    }

    /// The snapshots of the input (and of the output) that a launch's `tile` covers, after
    /// checking it lies within axis 0.
    pub fn tile_snapshots(&self, tile: Tile) -> Result<Range<usize>, KernelError> {
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
        Ok(begin * self.snapshots..end * self.snapshots)
    }

    /// `blocks.beamform`'s create: parameters `angles` and `spacing`, the ports by `rule`,
    /// and the steering weights `w[b, c] = (1 / C) exp(-2 pi i spacing c sin(angle_b))` as
    /// (re, im) in double, beam-major.
    pub fn steered(
        config: &Config<'_>,
        rule: &Ports,
    ) -> Result<(Beams, Vec<(f64, f64)>), KernelError> {
        config.reject_unknown_params(&["angles", "spacing"])?;
        let angles = angles(config)?;
        let spacing = finite(config, "spacing", 0.5)?;
        let beams = Beams::check(config, rule, angles.len(), "angle")?;
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
        Ok((beams, weights))
    }

    /// `blocks.combine`'s create: no parameters; the ports by `rule`, the weights input 1,
    /// `cf32 [B, C]`. Returns the beams and the weights' descriptor.
    pub fn weighted(config: &Config<'_>, rule: &Ports) -> Result<(Beams, TensorDesc), KernelError> {
        config.reject_unknown_params(&[])?;
        let weights = port(rule, config.inputs(), 1, "input 1", Dtype::CF32)?;
        let input = port(rule, config.inputs(), 0, "input 0", Dtype::CF32)?;
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
        let beams = Beams::check(config, rule, beams as usize, "row of the weights")?;
        Ok((beams, weights))
    }
}

//! The reductions' ports: `blocks.mean` (`f32`), and `blocks.power` and `blocks.magnitude`
//! given an `axis` (`cf32`): the input in, its dimensions without the reduced axis out.

use std::ops::Range;

use kplace_abi::export::ports::{Ports, describe};
use kplace_abi::export::{Config, KernelError};
use kplace_abi::{Dtype, TensorDesc, Tile};

use crate::ports::{Rows, port};

/// What a reduction checks at create: the ports, the reduced axis and the factor.
///
/// The input is `outer` blocks of `count` indices of the reduced axis, each `inner` values;
/// the output is `outer` blocks of `inner` values.
#[derive(Clone, Copy, Debug)]
pub struct Reduce {
    /// Input 0, `[.., M, ..]`.
    pub input: TensorDesc,
    /// Output 0, `f32`: the input's dimensions without the reduced axis.
    pub output: TensorDesc,
    /// The reduced axis.
    pub axis: usize,
    /// The extent of axis 0: what tiles count.
    pub rows: u64,
    /// Blocks of the axes before the reduced one per index of axis 0 (the reduced axis 0:
    /// one block in all).
    pub outer_per_row: usize,
    /// M: the reduced axis's extent.
    pub count: usize,
    /// Values per index of the reduced axis: the product of the extents after it.
    pub inner: usize,
    /// What each sum is multiplied by: `scale / M`.
    pub factor: f64,
}

impl Reduce {
    /// Checks ports `from` in and `f32` out by `rule`, reducing `axis` with `scale`: the
    /// input has two axes or more, the output its dimensions without `axis`; split only along
    /// axis 0 in tiles that divide it, and only when it is not the axis reduced.
    pub fn check(
        config: &Config<'_>,
        rule: &Ports,
        from: Dtype,
        axis: usize,
        scale: f64,
    ) -> Result<Self, KernelError> {
        let input = port(rule, config.inputs(), 0, "input 0", from)?;
        let output = port(rule, config.outputs(), 0, "output 0", Dtype::F32)?;
        let dims = input.dims();
        if axis >= dims.len() {
            return Err(KernelError::invalid(format!(
                "parameter axis is {axis}, but input 0 ({}) has {} axes",
                describe(&input),
                dims.len()
            )));
        }
        let want: Vec<u64> = dims
            .iter()
            .enumerate()
            .filter(|&(a, _)| a != axis)
            .map(|(_, &d)| d)
            .collect();
        if want.is_empty() || output.dims() != want.as_slice() {
            let from = from.name().unwrap_or("?");
            return Err(KernelError::invalid(format!(
                "takes {from} [.., M, ..] to f32 [..], the input's dimensions without axis \
                 {axis} (a rank of 2 or more), got {} to {}",
                describe(&input),
                describe(&output)
            )));
        }
        match config.split() {
            None => {}
            Some((0, _)) if axis == 0 => {
                return Err(KernelError::invalid(
                    "cannot be split along axis 0: it is the axis reduced (every output value \
                     reads every index of it)",
                ));
            }
            Some((0, tile)) if tile >= 1 && dims[0].is_multiple_of(tile) => {}
            Some((0, tile)) => {
                return Err(KernelError::invalid(format!(
                    "split tile of {tile} does not divide the {} indices of axis 0",
                    dims[0]
                )));
            }
            Some((split, _)) => {
                return Err(KernelError::invalid(format!(
                    "cannot be split along axis {split}: only along axis 0"
                )));
            }
        }
        // Sizes were checked to be addressable, so the counts fit usize.
        let count = dims[axis] as usize;
        let outer = dims[..axis].iter().product::<u64>() as usize;
        Ok(Self {
            input,
            output,
            axis,
            rows: dims[0],
            outer_per_row: if axis == 0 {
                1
            } else {
                outer / dims[0] as usize
            },
            count,
            inner: dims[axis + 1..].iter().product::<u64>() as usize,
            factor: scale / count as f64,
        })
    }

    /// The blocks of the axes before the reduced one that `tile` covers (all of them when
    /// axis 0 is reduced: such a stage is not split), after checking it lies within axis 0.
    pub fn blocks(&self, tile: Tile) -> Result<Range<usize>, KernelError> {
        if self.axis == 0 {
            return Ok(0..1);
        }
        match tile.begin.checked_add(tile.count) {
            Some(end) if end <= self.rows => {
                let per = self.outer_per_row;
                Ok(tile.begin as usize * per..end as usize * per)
            }
            _ => Err(KernelError::invalid(format!(
                "tile [{}, +{}) is outside the {} indices of axis 0",
                tile.begin, tile.count, self.rows
            ))),
        }
    }

    /// The input's elements that `blocks` (from [`Reduce::blocks`]) read.
    pub fn input_elements(&self, blocks: &Range<usize>) -> Range<usize> {
        let per = self.count * self.inner;
        blocks.start * per..blocks.end * per
    }

    /// The output's elements that `blocks` write.
    pub fn output_elements(&self, blocks: &Range<usize>) -> Range<usize> {
        blocks.start * self.inner..blocks.end * self.inner
    }
}

/// `blocks.mean`'s create: parameters `axis` (default 0) and `scale` (default 1), `f32` ports.
pub fn mean(config: &Config<'_>, rule: &Ports) -> Result<Reduce, KernelError> {
    config.reject_unknown_params(&["axis", "scale"])?;
    let scale = crate::ports::finite(config, "scale", 1.0)?;
    let axis = config.parse_param::<usize>("axis")?.unwrap_or(0);
    Reduce::check(config, rule, Dtype::F32, axis, scale)
}

/// What a detector (`blocks.power`, `blocks.magnitude`) computes: every value, or with
/// parameter `axis` the mean along it.
#[derive(Clone, Copy, Debug)]
pub enum Detector {
    /// `cf32` in, `f32` of the same dimensions out.
    Each(Rows),
    /// The mean along an axis of every value's power or magnitude.
    Mean(Reduce),
}

impl Detector {
    /// A detector's create: parameter `axis` (absent: every value), `cf32` in, `f32` out.
    pub fn check(config: &Config<'_>, rule: &Ports) -> Result<Self, KernelError> {
        config.reject_unknown_params(&["axis"])?;
        match config.parse_param::<usize>("axis")? {
            None => Rows::check(config, rule, Dtype::CF32, Dtype::F32, false).map(Detector::Each),
            Some(axis) => Reduce::check(config, rule, Dtype::CF32, axis, 1.0).map(Detector::Mean),
        }
    }
}

//! `blocks.transpose`'s ports and permutation: any numeric tensor in, its axes reordered out.

use kplace_abi::TensorDesc;
use kplace_abi::export::ports::{Ports, describe};
use kplace_abi::export::{Config, KernelError};

use crate::ports::port;

/// What `blocks.transpose` checks at create.
#[derive(Clone, Debug)]
pub struct Transpose {
    /// Input 0.
    pub input: TensorDesc,
    /// Output 0: the input's dtype, its dimensions in the order of `axes`.
    pub output: TensorDesc,
    /// Output axis `a` is input axis `axes[a]`.
    pub axes: Vec<usize>,
    /// Bytes of one element (1, 2, 4, 8 or 16).
    pub element_bytes: usize,
    /// Per output axis, the input's stride along it, in elements.
    pub strides: Vec<u64>,
    /// Elements of either tensor.
    pub elements: usize,
}

impl Transpose {
    /// Checks parameter `axes` (a permutation of the input's axes, default their reverse,
    /// as NumPy's `transpose`) and the ports by `rule`; refuses a split.
    pub fn check(config: &Config<'_>, rule: &Ports) -> Result<Self, KernelError> {
        config.reject_unknown_params(&["axes"])?;
        let dtype = config
            .inputs()
            .first()
            .ok_or_else(|| KernelError::invalid("input 0 is missing"))?
            .dtype;
        let element = dtype.element().ok_or_else(|| {
            KernelError::invalid(format!(
                "input 0 must be numbers (any numeric dtype), got {}",
                dtype.name().unwrap_or("an unknown dtype")
            ))
        })?;
        let input = port(rule, config.inputs(), 0, "input 0", dtype)?;
        let output = port(rule, config.outputs(), 0, "output 0", dtype)?;
        let dims = input.dims();
        let rank = dims.len();
        let axes: Vec<usize> = config
            .parse_list("axes")?
            .unwrap_or_else(|| (0..rank).rev().collect());
        let mut seen = vec![false; rank];
        let permutation = axes.len() == rank
            && axes
                .iter()
                .all(|&a| a < rank && !std::mem::replace(&mut seen[a], true));
        if !permutation {
            return Err(KernelError::invalid(format!(
                "parameter axes must name every axis of input 0 ({}) once, as a permutation \
                 of 0..{rank}; got {axes:?}",
                describe(&input)
            )));
        }
        let want: Vec<u64> = axes.iter().map(|&a| dims[a]).collect();
        if output.dims() != want.as_slice() {
            return Err(KernelError::invalid(format!(
                "output 0 must be input 0's dimensions in the order of axes {axes:?}, \
                 {want:?}; got {}",
                describe(&output)
            )));
        }
        if let Some((axis, tile)) = config.split() {
            return Err(KernelError::invalid(format!(
                "cannot be split (asked for tiles of {tile} along axis {axis}): a tile of the \
                 input is no tile of the output"
            )));
        }
        // The input's row-major strides, read in the output's order.
        let mut input_strides = vec![1u64; rank];
        for a in (0..rank.saturating_sub(1)).rev() {
            input_strides[a] = input_strides[a + 1] * dims[a + 1];
        }
        Ok(Self {
            strides: axes.iter().map(|&a| input_strides[a]).collect(),
            // Sizes were checked to be addressable, so the count fits usize.
            elements: dims.iter().product::<u64>() as usize,
            element_bytes: element.bytes() as usize,
            input,
            output,
            axes,
        })
    }

    /// The output's dimensions.
    pub fn dims(&self) -> &[u64] {
        self.output.dims()
    }

    /// The index table the CUDA kernel reads: the output's dimensions, then the input's
    /// strides along them.
    pub fn table(&self) -> Vec<u64> {
        self.dims().iter().chain(&self.strides).copied().collect()
    }
}

//! `blocks.mean`'s ports: `f32 [M, ..]` in, the mean over axis 0 out, never split.

use kplace_abi::export::ports::{Ports, describe};
use kplace_abi::export::{Config, KernelError};
use kplace_abi::{Dtype, TensorDesc};

use crate::ports::{finite, port};

/// What `blocks.mean` checks at create: ports, the averaged extent and the factor.
#[derive(Clone, Copy, Debug)]
pub struct MeanPorts {
    /// Input 0, `f32 [M, ..]`.
    pub input: TensorDesc,
    /// Output 0, `f32 [..]`.
    pub output: TensorDesc,
    /// M.
    pub rows: usize,
    /// Values per index of axis 0: the output's size.
    pub row_len: usize,
    /// `scale / M`.
    pub factor: f64,
}

impl MeanPorts {
    /// Checks parameter `scale`, the ports by `rule` and the split (none).
    pub fn check(config: &Config<'_>, rule: &Ports) -> Result<Self, KernelError> {
        config.reject_unknown_params(&["scale"])?;
        let scale = finite(config, "scale", 1.0)?;
        let input = port(rule, config.inputs(), 0, "input 0", Dtype::F32)?;
        let output = port(rule, config.outputs(), 0, "output 0", Dtype::F32)?;
        let dims = input.dims();
        if dims.len() < 2 || output.dims() != &dims[1..] {
            return Err(KernelError::invalid(format!(
                "takes f32 [M, ..] to f32 [..] (the input's dimensions after the first), \
                 got {} to {}",
                describe(&input),
                describe(&output)
            )));
        }
        if let Some((axis, tile)) = config.split() {
            return Err(KernelError::invalid(format!(
                "cannot be split (asked for tiles of {tile} along axis {axis}): every \
                 output value reads every index of axis 0"
            )));
        }
        // Sizes were checked to be addressable, so the counts fit usize.
        let rows = dims[0] as usize;
        Ok(Self {
            input,
            output,
            rows,
            row_len: output.dims().iter().product::<u64>() as usize,
            factor: scale / rows as f64,
        })
    }
}

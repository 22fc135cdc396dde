//! The ports every block checks, and the part of them one launch covers.
//!
//! A block reads and writes row-major tensors, in host memory on the CPU and in device memory
//! on CUDA (the [`Ports`] rule each check is given). [`Rows`] describes a block whose output
//! has its input's dimensions (element-wise blocks, and blocks working along the last axis):
//! the tensors are `rows` indices of axis 0, each `row_len` elements, and a tile of axis 0
//! covers the same elements of both ports, so tiles write disjoint parts of the output and
//! read only their own part of the input.

use std::ops::Range;

use kplace_abi::export::ports::{Ports, describe};
use kplace_abi::export::{Config, KernelError, Launch};
use kplace_abi::{Dtype, Tensor, TensorDesc, Tile};

/// Checks port `index` of `ports` (`what`) by `rule`: `dtype`, the rule's memory, no empty
/// dimension, enough bytes. Any rank the ABI allows.
pub fn port(
    rule: &Ports,
    ports: &[TensorDesc],
    index: usize,
    what: &str,
    dtype: Dtype,
) -> Result<TensorDesc, KernelError> {
    let rank = ports.get(index).map_or(1, |d| d.dims().len().max(1));
    let layout = (0..rank)
        .map(|axis| format!("d{axis}"))
        .collect::<Vec<_>>()
        .join(", ");
    rule.port(ports, index, what, dtype, &format!("[{layout}]"))
}

/// Parameter `name` as a finite number, `default` when absent.
pub fn finite(config: &Config<'_>, name: &str, default: f64) -> Result<f64, KernelError> {
    match config.parse_param::<f64>(name)? {
        None => Ok(default),
        Some(v) if v.is_finite() => Ok(v),
        Some(v) => Err(KernelError::invalid(format!(
            "parameter {name} must be a finite number, got {v}"
        ))),
    }
}

/// A block's ports when its output has its input's dimensions.
#[derive(Clone, Copy, Debug)]
pub struct Rows {
    /// The rule the ports were checked by, and launches are.
    pub rule: Ports,
    /// Input 0.
    pub input: TensorDesc,
    /// Output 0.
    pub output: TensorDesc,
    /// The extent of axis 0: what tiles count.
    pub rows: u64,
    /// Elements per index of axis 0.
    pub row_len: usize,
    /// The extent of the last axis.
    pub last: usize,
}

impl Rows {
    /// Checks a stage taking `from` and writing `to` of the same dimensions, by `rule`.
    /// `along_last` says the block works along the last axis, so a split along axis 0 needs a
    /// second axis.
    pub fn check(
        config: &Config<'_>,
        rule: &Ports,
        from: Dtype,
        to: Dtype,
        along_last: bool,
    ) -> Result<Rows, KernelError> {
        let input = port(rule, config.inputs(), 0, "input 0", from)?;
        let output = port(rule, config.outputs(), 0, "output 0", to)?;
        if input.dims() != output.dims() {
            return Err(KernelError::invalid(format!(
                "output 0 must have the input's dimensions {:?}, got {}",
                input.dims(),
                describe(&output)
            )));
        }
        let dims = input.dims();
        let rows = dims[0];
        // The size was checked to be addressable, so every count fits usize.
        let row_len = dims[1..].iter().product::<u64>() as usize;
        let last = dims[dims.len() - 1] as usize;
        match config.split() {
            None => {}
            Some((0, _)) if along_last && dims.len() == 1 => {
                return Err(KernelError::invalid(format!(
                    "cannot be split: its one axis is the axis it works along ({})",
                    describe(&input)
                )));
            }
            Some((0, tile)) if tile >= 1 && rows.is_multiple_of(tile) => {}
            Some((0, tile)) => {
                return Err(KernelError::invalid(format!(
                    "split tile of {tile} does not divide the {rows} indices of axis 0"
                )));
            }
            Some((axis, _)) => {
                return Err(KernelError::invalid(format!(
                    "cannot be split along axis {axis}: only along axis 0"
                )));
            }
        }
        Ok(Rows {
            rule: *rule,
            input,
            output,
            rows,
            row_len,
            last,
        })
    }

    /// The elements of either port that `tile` covers, after checking it lies within axis 0.
    pub fn elements(&self, tile: Tile) -> Result<Range<usize>, KernelError> {
        match tile.begin.checked_add(tile.count) {
            Some(end) if end <= self.rows => {
                Ok(tile.begin as usize * self.row_len..end as usize * self.row_len)
            }
            _ => Err(KernelError::invalid(format!(
                "tile [{}, +{}) is outside the {} indices of axis 0",
                tile.begin, tile.count, self.rows
            ))),
        }
    }

    /// The launch's input and output, checked against the descriptors create accepted.
    pub fn tensors<'a>(
        &self,
        launch: &Launch<'a>,
    ) -> Result<(&'a Tensor, &'a Tensor), KernelError> {
        Ok((
            self.rule.launch(launch.input(0), "input 0", &self.input)?,
            self.rule
                .launch(launch.output(0), "output 0", &self.output)?,
        ))
    }
}

//! `blocks.mean`: the mean over axis 0.
//!
//! - Input 0: `f32 [M, ..]` (rank 2 or more). Output 0: `f32 [..]`, the input's dimensions
//!   without the first.
//! - `y[..] = scale / M * sum over m of x[m, ..]`, summed in double in the order of m and
//!   rounded once. Parameter `scale`: a finite number, default 1.
//! - Not split: every output value reads every index of axis 0.
//! - Workspace: one double per output value, the running sums.

use std::ffi::CStr;

use kplace_abi::export::ports::describe;
use kplace_abi::export::{Config, KernelError, KernelImpl, Launch};
use kplace_abi::{DeviceKind, Dtype, MemorySpace, TensorDesc};

use crate::layout::{PORTS, finite, port};

/// The `blocks.mean` state.
#[derive(Debug)]
pub struct Mean {
    input: TensorDesc,
    output: TensorDesc,
    /// M.
    rows: usize,
    /// Values per index of axis 0: the output's size.
    row_len: usize,
    /// `scale / M`.
    factor: f64,
}

impl KernelImpl for Mean {
    const NAME: &'static CStr = c"blocks.mean";
    const DEVICE: DeviceKind = DeviceKind::CPU;
    const MEMORY: MemorySpace = MemorySpace::HOST;
    const N_INPUTS: u32 = 1;
    const N_OUTPUTS: u32 = 1;
    const NAMES_ITS_ERRORS: bool = true;

    fn create(config: &Config<'_>) -> Result<Self, KernelError> {
        config.reject_unknown_params(&["scale"])?;
        let scale = finite(config, "scale", 1.0)?;
        let input = port(config.inputs(), 0, "input 0", Dtype::F32)?;
        let output = port(config.outputs(), 0, "output 0", Dtype::F32)?;
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
        let rows = dims[0] as usize;
        Ok(Self {
            input,
            output,
            rows,
            row_len: output.dims().iter().product::<u64>() as usize,
            factor: scale / rows as f64,
        })
    }

    fn workspace_bytes(&self) -> u64 {
        (self.row_len * size_of::<f64>()) as u64
    }

    fn launch(&self, launch: &Launch<'_>) -> Result<(), KernelError> {
        let input = PORTS.launch(launch.input(0), "input 0", &self.input)?;
        let output = PORTS.launch(launch.output(0), "output 0", &self.output)?;
        // SAFETY: an unsplit stage reads its whole input, complete, and writes its whole
        // output alone. The input is rows * row_len values, the output row_len.
        let (x, y) = unsafe {
            (
                input.host_range::<f32>(0..self.rows * self.row_len)?,
                output.host_range_mut::<f32>(0..self.row_len)?,
            )
        };
        // SAFETY: the workspace is this launch's alone; doubles are plain data, and every
        // one is written before it is read.
        let sums: &mut [f64] = unsafe { launch.workspace_slice(self.row_len) }?;
        sums.fill(0.0);
        for row in x.chunks_exact(self.row_len) {
            for (s, &v) in sums.iter_mut().zip(row) {
                *s += f64::from(v);
            }
        }
        for (y, s) in y.iter_mut().zip(sums.iter()) {
            *y = (s * self.factor) as f32;
        }
        Ok(())
    }
}

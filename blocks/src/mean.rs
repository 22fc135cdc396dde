//! `blocks.mean`: the mean over axis 0.
//!
//! - Input 0: `f32 [M, ..]` (rank 2 or more). Output 0: `f32 [..]`, the input's dimensions
//!   without the first.
//! - `y[..] = scale / M * sum over m of x[m, ..]`, summed in double in the order of m and
//!   rounded once. Parameter `scale`: a finite number, default 1.
//! - Not split: every output value reads every index of axis 0.
//! - Workspace: one double per output value, the running sums.

use std::ffi::CStr;

use kplace_abi::export::{Config, KernelError, KernelImpl, Launch};
use kplace_abi::{DeviceKind, MemorySpace};
use kplace_blocks_contract::mean::MeanPorts;
use kplace_blocks_contract::names;

use crate::layout::PORTS;

/// The `blocks.mean` state.
#[derive(Debug)]
pub struct Mean(MeanPorts);

impl KernelImpl for Mean {
    const NAME: &'static CStr = names::MEAN;
    const DEVICE: DeviceKind = DeviceKind::CPU;
    const MEMORY: MemorySpace = MemorySpace::HOST;
    const N_INPUTS: u32 = 1;
    const N_OUTPUTS: u32 = 1;
    const NAMES_ITS_ERRORS: bool = true;

    fn create(config: &Config<'_>) -> Result<Self, KernelError> {
        MeanPorts::check(config, &PORTS).map(Self)
    }

    fn workspace_bytes(&self) -> u64 {
        (self.0.row_len * size_of::<f64>()) as u64
    }

    fn launch(&self, launch: &Launch<'_>) -> Result<(), KernelError> {
        let ports = &self.0;
        let input = PORTS.launch(launch.input(0), "input 0", &ports.input)?;
        let output = PORTS.launch(launch.output(0), "output 0", &ports.output)?;
        // SAFETY: an unsplit stage reads its whole input, complete, and writes its whole
        // output alone. The input is rows * row_len values, the output row_len.
        let (x, y) = unsafe {
            (
                input.host_range::<f32>(0..ports.rows * ports.row_len)?,
                output.host_range_mut::<f32>(0..ports.row_len)?,
            )
        };
        // SAFETY: the workspace is this launch's alone; doubles are plain data, and every
        // one is written before it is read.
        let sums: &mut [f64] = unsafe { launch.workspace_slice(ports.row_len) }?;
        sums.fill(0.0);
        for row in x.chunks_exact(ports.row_len) {
            for (s, &v) in sums.iter_mut().zip(row) {
                *s += f64::from(v);
            }
        }
        for (y, s) in y.iter_mut().zip(sums.iter()) {
            *y = (s * ports.factor) as f32;
        }
        Ok(())
    }
}

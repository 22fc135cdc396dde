//! `blocks.mean`: the mean along an axis; and the reduction it shares with `blocks.power`
//! and `blocks.magnitude` given an `axis`.
//!
//! - Input 0: `f32 [.., M, ..]` (rank 2 or more), M along axis `axis` (parameter, default 0).
//!   Output 0: `f32`, the input's dimensions without that axis.
//! - `y[a, b] = scale / M * sum over m of x[a, m, b]` (`a` the indices before the axis, `b`
//!   those after it), summed in double in the order of m and rounded once. Parameter
//!   `scale`: a finite number, default 1.
//! - Split along axis 0 in tiles that divide it when axis 0 is not the axis averaged (a
//!   tile's output is its own rows); not split when it is (every output value reads every
//!   index of axis 0).
//! - Workspace: one double per value after the axis, the running sums.

use std::ffi::CStr;

use kplace_abi::export::{Config, KernelError, KernelImpl, Launch};
use kplace_abi::{DeviceKind, MemorySpace};
use kplace_blocks_contract::names;
use kplace_blocks_contract::reduce::{self, Reduce};

use crate::layout::PORTS;

/// The `blocks.mean` state.
#[derive(Debug)]
pub struct Mean(Reduce);

/// The workspace of a reduction: its running sums.
pub(crate) fn sums_bytes(r: &Reduce) -> u64 {
    (r.inner * size_of::<f64>()) as u64
}

/// One launch of the reduction `r`: each output value is `factor` times the sum, in double
/// in the order of the reduced axis, of `value` of the `P` scalars of every input element
/// it covers, rounded once.
pub(crate) fn reduce<const P: usize>(
    r: &Reduce,
    launch: &Launch<'_>,
    value: impl Fn(&[f32]) -> f64,
) -> Result<(), KernelError> {
    let input = PORTS.launch(launch.input(0), "input 0", &r.input)?;
    let output = PORTS.launch(launch.output(0), "output 0", &r.output)?;
    let blocks = r.blocks(launch.tile())?;
    let (read, written) = (r.input_elements(&blocks), r.output_elements(&blocks));
    // SAFETY: a tile's input rows are complete and its output rows its own (an unsplit
    // stage: the whole of both); the output's rows are the input's, less the reduced axis.
    let (x, y) = unsafe {
        (
            input.host_range::<f32>(read.start * P..read.end * P)?,
            output.host_range_mut::<f32>(written)?,
        )
    };
    // SAFETY: the workspace is this launch's alone; doubles are plain data, and every one is
    // written before it is read.
    let sums: &mut [f64] = unsafe { launch.workspace_slice(r.inner) }?;
    for (x, y) in x
        .chunks_exact(r.count * r.inner * P)
        .zip(y.chunks_exact_mut(r.inner))
    {
        sums.fill(0.0);
        for row in x.chunks_exact(r.inner * P) {
            for (s, v) in sums.iter_mut().zip(row.chunks_exact(P)) {
                *s += value(v);
            }
        }
        for (y, s) in y.iter_mut().zip(sums.iter()) {
            *y = (s * r.factor) as f32;
        }
    }
    Ok(())
}

impl KernelImpl for Mean {
    const NAME: &'static CStr = names::MEAN;
    const DEVICE: DeviceKind = DeviceKind::CPU;
    const MEMORY: MemorySpace = MemorySpace::HOST;
    const N_INPUTS: u32 = 1;
    const N_OUTPUTS: u32 = 1;
    const NAMES_ITS_ERRORS: bool = true;

    fn create(config: &Config<'_>) -> Result<Self, KernelError> {
        reduce::mean(config, &PORTS).map(Self)
    }

    fn workspace_bytes(&self) -> u64 {
        sums_bytes(&self.0)
    }

    fn launch(&self, launch: &Launch<'_>) -> Result<(), KernelError> {
        reduce::<1>(&self.0, launch, |v| f64::from(v[0]))
    }
}

//! `blocks.add` and `blocks.multiply`: two inputs combined element by element.
//!
//! - Input 0: `cf32` or `f32`, any shape. Output 0: the same dtype and dimensions.
//! - Input 1: the same dtype (for `blocks.multiply` also `f32` when input 0 is `cf32`), with
//!   input 0's last dimensions (all of them, or a suffix: a row of `[M, N]` is `[N]`) or
//!   holding a single value; it repeats over input 0's leading axes: element `i` of input 0
//!   meets element `i % len` of input 1. It may be a constant tensor (docs/graphs.md: a
//!   reference spectrum, a taper, a complex gain) or another stage's output.
//! - `blocks.add`: `x + w`. `blocks.multiply`: `x * w`, or `x * conj(w)` with `conjugate:
//!   true` (a matched filter in the frequency domain); complex products as `(xr wr - xi wi,
//!   xr wi + xi wr)`. Each part in double, rounded once.
//! - Split along axis 0 in tiles that divide it, or not split. No workspace.

use std::ffi::CStr;
use std::marker::PhantomData;

use kplace_abi::export::{Config, KernelError, KernelImpl, Launch};
use kplace_abi::{DeviceKind, MemorySpace};
use kplace_blocks_contract::binary::{Binary as Spec, Op};
pub use kplace_blocks_contract::binary::{Product, Sum, Which};

use crate::layout::{PORTS, tile_slices};

/// A two-input element-wise block's state.
#[derive(Debug)]
pub struct Binary<W> {
    spec: Spec,
    which: PhantomData<W>,
}

/// `blocks.add`.
pub type Add = Binary<Sum>;
/// `blocks.multiply`.
pub type Multiply = Binary<Product>;

/// Input 1's element `k` as `(re, im)` in double (`im` 0 for a real input 1), its imaginary
/// part negated when `conjugate`.
fn other(w: &[f32], k: usize, complex: bool, conjugate: bool) -> (f64, f64) {
    if complex {
        let im = f64::from(w[2 * k + 1]);
        (f64::from(w[2 * k]), if conjugate { -im } else { im })
    } else {
        (f64::from(w[k]), 0.0)
    }
}

impl<W: Which> KernelImpl for Binary<W> {
    const NAME: &'static CStr = W::NAME;
    const DEVICE: DeviceKind = DeviceKind::CPU;
    const MEMORY: MemorySpace = MemorySpace::HOST;
    const N_INPUTS: u32 = 2;
    const N_OUTPUTS: u32 = 1;
    const NAMES_ITS_ERRORS: bool = true;

    fn create(config: &Config<'_>) -> Result<Self, KernelError> {
        Ok(Self {
            spec: Spec::check(config, &PORTS, W::OP)?,
            which: PhantomData,
        })
    }

    fn workspace_bytes(&self) -> u64 {
        0
    }

    fn launch(&self, launch: &Launch<'_>) -> Result<(), KernelError> {
        let spec = &self.spec;
        let (input, output) = spec.rows.tensors(launch)?;
        let weights = PORTS.launch(launch.input(1), "input 1", &spec.other)?;
        let elements = spec.rows.elements(launch.tile())?;
        let first = elements.start;
        let parts = if spec.complex { 2 } else { 1 };
        let other_parts = if spec.other_complex { 2 } else { 1 };
        // SAFETY: as every tile: its input rows are complete, its output rows its own; no
        // launch writes input 1, read whole (`other_len` elements).
        let (x, y, w) = unsafe {
            let (x, y) = tile_slices::<f32, f32>(input, output, elements, (parts, parts))?;
            (
                x,
                y,
                weights.host_range::<f32>(0..spec.other_len * other_parts)?,
            )
        };
        let len = spec.other_len;
        let (complex, conjugate) = (spec.other_complex, spec.conjugate);
        if spec.complex {
            for (i, (y, x)) in y.chunks_exact_mut(2).zip(x.chunks_exact(2)).enumerate() {
                let (xr, xi) = (f64::from(x[0]), f64::from(x[1]));
                let (wr, wi) = other(w, (first + i) % len, complex, conjugate);
                let (re, im) = match W::OP {
                    Op::Add => (xr + wr, xi + wi),
                    Op::Multiply if complex => (xr * wr - xi * wi, xr * wi + xi * wr),
                    // A real factor: no terms of its zero imaginary part (whose products
                    // could be -0 or NaN).
                    Op::Multiply => (xr * wr, xi * wr),
                };
                y[0] = re as f32;
                y[1] = im as f32;
            }
        } else {
            for (i, (y, &x)) in y.iter_mut().zip(x).enumerate() {
                let (wr, _) = other(w, (first + i) % len, false, false);
                let x = f64::from(x);
                *y = match W::OP {
                    Op::Add => x + wr,
                    Op::Multiply => x * wr,
                } as f32;
            }
        }
        Ok(())
    }
}

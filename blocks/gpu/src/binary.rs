//! `blocks.add` and `blocks.multiply` on CUDA: one thread per output element, input 1's
//! element `i % len` met in double and rounded once (the CPU library's arithmetic). Input 1
//! is read where the runtime put it (a constant tensor is uploaded once before the first
//! frame). Split along axis 0 as on the CPU; no workspace; one enqueue per launch.

use std::ffi::CStr;
use std::marker::PhantomData;

use kplace_abi::Tile;
use kplace_abi::export::{Config, KernelError, Launch};
use kplace_blocks_contract::binary::{Binary, Op};
pub use kplace_blocks_contract::binary::{Product, Sum, Which};
use kplace_cudakit::queue::{CudaQueue, Queue, arg};

use crate::gpu::{PORTS, Plain, PlainPlan, address, grid};
use crate::source::Function;

/// A two-input element-wise block's launch, independent of CUDA.
#[derive(Clone, Copy, Debug)]
pub struct BinaryPlan<W> {
    spec: Binary,
    which: PhantomData<W>,
}

/// `blocks.add` on CUDA.
pub type Add = Plain<BinaryPlan<Sum>>;
/// `blocks.multiply` on CUDA.
pub type Multiply = Plain<BinaryPlan<Product>>;

impl<W: Which> BinaryPlan<W> {
    /// Enqueues `tile` of the input at `x` with input 1 at `w` into the output at `y`.
    ///
    /// # Safety
    /// `x`, `w` and `y` must address input 0, input 1 and the output, valid for the queue
    /// until the work completes, and no concurrent launch may write the tile's part of the
    /// output.
    pub unsafe fn enqueue(
        &self,
        queue: &impl Queue<Function>,
        (x, w, y): (u64, u64, u64),
        tile: Tile,
    ) -> Result<(), KernelError> {
        let spec = &self.spec;
        let elements = spec.rows.elements(tile)?;
        let bytes = if spec.complex { 8 } else { 4 };
        let (x, y) = (
            x + bytes * elements.start as u64,
            y + bytes * elements.start as u64,
        );
        let (first, len, count) = (
            elements.start as u64,
            spec.other_len as u64,
            elements.len() as u64,
        );
        let conjugate = u32::from(spec.conjugate);
        let function = match (W::OP, spec.complex, spec.other_complex) {
            (Op::Add, true, _) => Function::AddComplex,
            (Op::Add, false, _) => Function::AddReal,
            (Op::Multiply, true, true) => Function::MultiplyComplex,
            (Op::Multiply, true, false) => Function::MultiplyByReal,
            (Op::Multiply, false, _) => Function::MultiplyReal,
        };
        // SAFETY: the arguments of `(const T *x, const U *w, T *y, kb_u64 first, kb_u64
        // len, kb_u32 conjugate, kb_u64 count)`; the tile's part of input 0 and the output,
        // and the whole of input 1, as the caller promises.
        unsafe {
            queue.launch(
                function,
                grid(count)?,
                &mut [
                    arg(&x),
                    arg(&w),
                    arg(&y),
                    arg(&first),
                    arg(&len),
                    arg(&conjugate),
                    arg(&count),
                ],
            )
        }
    }
}

impl<W: Which> PlainPlan for BinaryPlan<W> {
    const NAME: &'static CStr = W::NAME;
    const N_INPUTS: u32 = 2;

    fn plan(config: &Config<'_>) -> Result<Self, KernelError> {
        Ok(Self {
            spec: Binary::check(config, &PORTS, W::OP)?,
            which: PhantomData,
        })
    }

    fn enqueue_launch(
        &self,
        queue: &CudaQueue<'_, Function>,
        launch: &Launch<'_>,
    ) -> Result<(), KernelError> {
        let (x, y) = self.spec.rows.tensors(launch)?;
        let w = address(launch.input(1), "input 1", &self.spec.other)?;
        // SAFETY: every port was checked against the descriptors create accepted; no launch
        // writes an input; the runtime's rule for tiles gives this launch its part of the
        // output.
        unsafe { self.enqueue(queue, (x.data as u64, w, y.data as u64), launch.tile()) }
    }
}

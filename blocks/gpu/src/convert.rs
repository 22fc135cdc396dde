//! `blocks.convert` on CUDA: numbers of any type to single precision, times `scale`, each part
//! in double and rounded once (the CPU library's arithmetic; half types decoded exactly from
//! their bits). Split along axis 0 as on the CPU; no workspace; one enqueue per launch.

use std::ffi::CStr;

use kplace_abi::export::{Config, KernelError, Launch};
use kplace_abi::{Scalar, Tile};
use kplace_blocks_contract::convert::ConvertPorts;
use kplace_blocks_contract::names;
use kplace_cudakit::queue::{CudaQueue, Queue, arg};

use crate::gpu::{PORTS, Plain, PlainPlan, grid};
use crate::source::Function;

/// The conversion's launch, independent of CUDA.
#[derive(Clone, Copy, Debug)]
pub struct ConvertPlan {
    ports: ConvertPorts,
    function: Function,
}

impl ConvertPlan {
    /// Enqueues `tile` of the input at `x` into the output at `y`.
    ///
    /// # Safety
    /// `x` and `y` must address the input and output, valid for the queue until the work
    /// completes, and no concurrent launch may write the tile's part of the output.
    pub unsafe fn enqueue(
        &self,
        queue: &impl Queue<Function>,
        x: u64,
        y: u64,
        tile: Tile,
    ) -> Result<(), KernelError> {
        let ports = &self.ports;
        let elements = ports.rows.elements(tile)?;
        let out_parts: u64 = if ports.complex { 2 } else { 1 };
        let x = x + ports.from.bytes() * elements.start as u64;
        let y = y + 4 * out_parts * elements.start as u64;
        let parts = elements.len() as u64 * ports.from.parts() as u64;
        let to_complex = u32::from(ports.complex && !ports.from.complex);
        let scale = ports.scale;
        // SAFETY: the arguments of `(const T *, float *, kb_u64, kb_u32, double)`, T the
        // input's scalar (the function chosen for it); the tile's part of both tensors.
        unsafe {
            queue.launch(
                self.function,
                grid(parts)?,
                &mut [arg(&x), arg(&y), arg(&parts), arg(&to_complex), arg(&scale)],
            )
        }
    }
}

/// `blocks.convert` on CUDA.
pub type Convert = Plain<ConvertPlan>;

impl PlainPlan for ConvertPlan {
    const NAME: &'static CStr = names::CONVERT;

    fn plan(config: &Config<'_>) -> Result<Self, KernelError> {
        let ports = ConvertPorts::check(config, &PORTS)?;
        let function = match ports.from.scalar {
            Scalar::I8 => Function::ConvertI8,
            Scalar::I16 => Function::ConvertI16,
            Scalar::I32 => Function::ConvertI32,
            Scalar::F16 => Function::ConvertF16,
            Scalar::BF16 => Function::ConvertBf16,
            Scalar::F32 => Function::ConvertF32,
            Scalar::F64 => Function::ConvertF64,
        };
        Ok(Self { ports, function })
    }

    fn enqueue_launch(
        &self,
        queue: &CudaQueue<'_, Function>,
        launch: &Launch<'_>,
    ) -> Result<(), KernelError> {
        let (x, y) = self.ports.rows.tensors(launch)?;
        // SAFETY: the tensors were checked against the descriptors create accepted; the
        // tile's output is this launch's.
        unsafe { self.enqueue(queue, x.data as u64, y.data as u64, launch.tile()) }
    }
}

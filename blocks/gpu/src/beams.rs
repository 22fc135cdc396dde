//! `blocks.beamform` and `blocks.combine` on CUDA: one thread per (snapshot, beam) summing over
//! the channels in double, in channel order, rounded once (the CPU library's arithmetic). The
//! steering weights are computed at create by the contract and uploaded; `blocks.combine`
//! reads its weights from input 1 where the runtime put them. Split along axis 0 as on the CPU;
//! no workspace; one enqueue per launch.

use std::ffi::CStr;

use kplace_abi::export::{Config, KernelError, KernelImpl, Launch};
use kplace_abi::{DeviceKind, MemorySpace, TensorDesc, Tile};
use kplace_blocks_contract::beams::Beams;
use kplace_blocks_contract::names;
use kplace_cudakit::driver::DeviceBuffer;
use kplace_cudakit::queue::{CudaQueue, Queue, arg};

use crate::gpu::{Gpu, PORTS, Plain, PlainPlan, address, grid};
use crate::source::Function;

/// A beamformer's launch, independent of CUDA: the ports, and which weights.
#[derive(Clone, Debug)]
pub struct BeamsPlan {
    beams: Beams,
    function: Function,
}

impl BeamsPlan {
    /// `blocks.beamform`'s plan and its steering weights, `(re, im)` in double, beam-major.
    pub fn steered(config: &Config<'_>) -> Result<(Self, Vec<f64>), KernelError> {
        let (beams, weights) = Beams::steered(config, &PORTS)?;
        let weights = weights.into_iter().flat_map(|(re, im)| [re, im]).collect();
        let function = Function::Beamform;
        Ok((Self { beams, function }, weights))
    }

    /// `blocks.combine`'s plan and its weights' descriptor (input 1).
    pub fn weighted(config: &Config<'_>) -> Result<(Self, TensorDesc), KernelError> {
        let (beams, weights) = Beams::weighted(config, &PORTS)?;
        let function = Function::Combine;
        Ok((Self { beams, function }, weights))
    }

    /// Enqueues `tile` of the input at `x` into the output at `y`, with the weights at `w`
    /// (doubles for `blocks.beamform`, floats for `blocks.combine`).
    ///
    /// # Safety
    /// `x`, `y` and `w` must address the input, the output and the weights, valid for the
    /// queue until the work completes; no concurrent launch may write the tile's part of the
    /// output.
    pub unsafe fn enqueue(
        &self,
        queue: &impl Queue<Function>,
        x: u64,
        y: u64,
        w: u64,
        tile: Tile,
    ) -> Result<(), KernelError> {
        let snapshots = self.beams.tile_snapshots(tile)?;
        let (channels, beams) = (self.beams.channels as u64, self.beams.beams as u64);
        let x = x + 8 * channels * snapshots.start as u64;
        let y = y + 8 * beams * snapshots.start as u64;
        let count = snapshots.len() as u64 * beams;
        // SAFETY: the arguments of `(const float *, float *, const W *, kb_u64, kb_u64,
        // kb_u64)`; the tile's snapshots of both tensors.
        unsafe {
            queue.launch(
                self.function,
                grid(count)?,
                &mut [
                    arg(&x),
                    arg(&y),
                    arg(&w),
                    arg(&channels),
                    arg(&beams),
                    arg(&count),
                ],
            )
        }
    }

    /// The launch's input and output addresses, checked.
    fn ports(&self, launch: &Launch<'_>) -> Result<(u64, u64), KernelError> {
        Ok((
            address(launch.input(0), "input 0", &self.beams.input)?,
            address(launch.output(0), "output 0", &self.beams.output)?,
        ))
    }
}

/// `blocks.beamform` on CUDA: the plan and its steering weights on the device.
#[derive(Debug)]
pub struct Beamform {
    plan: BeamsPlan,
    weights: DeviceBuffer,
    gpu: Gpu,
}

impl KernelImpl for Beamform {
    const NAME: &'static CStr = names::BEAMFORM;
    const DEVICE: DeviceKind = DeviceKind::CUDA;
    const MEMORY: MemorySpace = MemorySpace::DEVICE;
    const N_INPUTS: u32 = 1;
    const N_OUTPUTS: u32 = 1;
    const NAMES_ITS_ERRORS: bool = true;

    fn create(config: &Config<'_>) -> Result<Self, KernelError> {
        let (plan, weights) = BeamsPlan::steered(config)?;
        let gpu = Gpu::open(config)?;
        let weights = DeviceBuffer::upload(&gpu.device, &weights)?;
        Ok(Self { plan, weights, gpu })
    }

    fn workspace_bytes(&self) -> u64 {
        0
    }

    fn launch(&self, launch: &Launch<'_>) -> Result<(), KernelError> {
        let (x, y) = self.plan.ports(launch)?;
        // SAFETY: the ports were checked; the weights live as long as the state; the tile's
        // output is this launch's.
        unsafe {
            self.plan.enqueue(
                &self.gpu.queue(launch, None),
                x,
                y,
                self.weights.address(),
                launch.tile(),
            )
        }
    }
}

/// `blocks.combine`'s plan: the beams' and the weights' descriptor (input 1).
#[derive(Clone, Debug)]
pub struct CombinePlan {
    beams: BeamsPlan,
    weights: TensorDesc,
}

/// `blocks.combine` on CUDA.
pub type Combine = Plain<CombinePlan>;

impl PlainPlan for CombinePlan {
    const NAME: &'static CStr = names::COMBINE;
    const N_INPUTS: u32 = 2;

    fn plan(config: &Config<'_>) -> Result<Self, KernelError> {
        let (beams, weights) = BeamsPlan::weighted(config)?;
        Ok(Self { beams, weights })
    }

    fn enqueue_launch(
        &self,
        queue: &CudaQueue<'_, Function>,
        launch: &Launch<'_>,
    ) -> Result<(), KernelError> {
        let (x, y) = self.beams.ports(launch)?;
        let w = address(launch.input(1), "input 1", &self.weights)?;
        // SAFETY: every port was checked; no launch writes an input; the tile's output is
        // this launch's.
        unsafe { self.beams.enqueue(queue, x, y, w, launch.tile()) }
    }
}

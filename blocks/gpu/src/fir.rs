//! `blocks.fir` on CUDA: the decimating FIR over a continuous stream, its history carried from
//! frame to frame in device memory (the runtime's carry on the stage's stream).
//!
//! Parameters, ports, the rule and the order of the sums are the CPU library's
//! (`kplace_blocks_contract::stream::FirSpec`), so the output is equal bit for bit. Three
//! enqueues per launch: `kb_fir_history` puts the carried history (the lost frames' zeros
//! shifted in, or zeros with `stream: false`) in the workspace; `kb_fir` computes every output
//! sample, reading the history there and the frame where it lies; `kb_fir_keep` writes the
//! extended stream's last K - 1 steps to the carry (not with `stream: false`). Stateful, not
//! split. Workspace: the history (K - 1 steps of every lane).

use std::ffi::CStr;

use kplace_abi::export::{Config, KernelError, KernelImpl, Launch};
use kplace_abi::{DeviceKind, KernelFlags, MemorySpace};
use kplace_blocks_contract::names;
use kplace_blocks_contract::stream::FirSpec;
use kplace_cudakit::driver::DeviceBuffer;
use kplace_cudakit::queue::{Queue, arg};
use kplace_cudakit::workspace::Layout;

use crate::gpu::{Gpu, PORTS, address, grid};
use crate::source::Function;

/// The FIR's launch sequence, independent of CUDA.
#[derive(Clone, Debug)]
pub struct FirPlan {
    spec: FirSpec,
}

impl FirPlan {
    /// Validates a configuration as `create` does.
    pub fn from_config(config: &Config<'_>) -> Result<Self, KernelError> {
        Ok(Self {
            spec: FirSpec::check(config, &PORTS)?,
        })
    }

    /// What create checked: ports, taps, decimation and history.
    pub fn spec(&self) -> &FirSpec {
        &self.spec
    }

    /// The workspace: the history.
    pub fn layout(&self) -> Layout<1> {
        Layout::new([(self.spec.history.scalars() * size_of::<f32>()) as u64])
    }

    /// Enqueues one frame: the input at `x` filtered into the output at `y`, with the taps at
    /// `taps`, the history from and to the carry at `carry` (ignored with `stream: false`)
    /// after `frames_missing` lost frames.
    ///
    /// # Safety
    /// `x`, `y`, `taps`, `workspace` (`workspace_bytes` bytes) and, when the history is
    /// carried, `carry` (the history's bytes) must be valid for the queue until the work
    /// completes; the runtime runs a stateful stage one frame at a time, so the output,
    /// workspace and carry are this launch's alone.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn enqueue(
        &self,
        queue: &impl Queue<Function>,
        x: u64,
        y: u64,
        taps: u64,
        (workspace, workspace_bytes): (u64, u64),
        carry: u64,
        frames_missing: u64,
    ) -> Result<(), KernelError> {
        let history = &self.spec.history;
        let [held] = self.layout().carve(workspace, workspace_bytes)?;
        let kept = history.scalars() as u64;
        let carried = if history.carried { carry } else { 0 };
        if history.carried && carry == 0 && kept > 0 {
            return Err(KernelError::invalid(
                "the launch has no carry for the history",
            ));
        }
        let shift = history.lost_shift(frames_missing) as u64;
        let step = self.spec.stream.step() as u64;
        let n_taps = self.spec.taps.len() as u64;
        let decimation = self.spec.decimation as u64;
        let count = (history.frame / self.spec.decimation) as u64 * step;
        let frame_len = (history.frame * history.step) as u64;
        // SAFETY: for each launch, the arguments of its CUDA C signature in order; the
        // addresses are the caller's promise, the history lies in the workspace.
        unsafe {
            if kept > 0 {
                queue.launch(
                    Function::FirHistory,
                    grid(kept)?,
                    &mut [arg(&carried), arg(&held), arg(&kept), arg(&shift)],
                )?;
            }
            queue.launch(
                Function::Fir,
                grid(count)?,
                &mut [
                    arg(&held),
                    arg(&x),
                    arg(&y),
                    arg(&taps),
                    arg(&n_taps),
                    arg(&kept),
                    arg(&step),
                    arg(&decimation),
                    arg(&count),
                ],
            )?;
            if carried != 0 && kept > 0 {
                queue.launch(
                    Function::FirKeep,
                    grid(kept)?,
                    &mut [
                        arg(&held),
                        arg(&x),
                        arg(&carried),
                        arg(&kept),
                        arg(&frame_len),
                    ],
                )?;
            }
        }
        Ok(())
    }
}

/// `blocks.fir` on CUDA: the plan and its taps on the device.
#[derive(Debug)]
pub struct Fir {
    plan: FirPlan,
    taps: DeviceBuffer,
    gpu: Gpu,
}

impl KernelImpl for Fir {
    const NAME: &'static CStr = names::FIR;
    const DEVICE: DeviceKind = DeviceKind::CUDA;
    const MEMORY: MemorySpace = MemorySpace::DEVICE;
    const N_INPUTS: u32 = 1;
    const N_OUTPUTS: u32 = 1;
    const NAMES_ITS_ERRORS: bool = true;
    const FLAGS: KernelFlags = KernelFlags::STATEFUL;

    fn create(config: &Config<'_>) -> Result<Self, KernelError> {
        let plan = FirPlan::from_config(config)?;
        let gpu = Gpu::open(config)?;
        let taps = DeviceBuffer::upload(&gpu.device, &plan.spec.taps)?;
        Ok(Self { plan, taps, gpu })
    }

    fn workspace_bytes(&self) -> u64 {
        self.plan.layout().bytes()
    }

    fn carry_bytes(&self) -> u64 {
        self.plan.spec.history.carry_bytes()
    }

    fn launch(&self, launch: &Launch<'_>) -> Result<(), KernelError> {
        let stream = &self.plan.spec.stream;
        let x = address(launch.input(0), "input 0", &stream.input)?;
        let y = address(launch.output(0), "output 0", &stream.output)?;
        if launch.carry_bytes() < self.carry_bytes() {
            return Err(KernelError::invalid(format!(
                "the carry of {} bytes is smaller than the {} the history needs",
                launch.carry_bytes(),
                self.carry_bytes()
            )));
        }
        // SAFETY: the ports were checked against the descriptors create accepted, the carry's
        // size just now and the workspace's by the carving; the taps live as long as the
        // state; the runtime runs this stateful stage one frame at a time.
        unsafe {
            self.plan.enqueue(
                &self.gpu.queue(launch, None),
                x,
                y,
                self.taps.address(),
                (launch.workspace() as u64, launch.workspace_bytes()),
                launch.carry() as u64,
                launch.frames_missing(),
            )
        }
    }
}

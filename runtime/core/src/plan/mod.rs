//! Planning: a graph and a placement become a [`Plan`], with every stage bound to a loaded
//! kernel and a device, every tensor bound to memory (and, where it crosses the bus, to a
//! mirror and a transfer: [`memory`]), and every pool sized.
//!
//! It happens in two steps. [`Layout::new`] ([`layout`]) is pure: it places the stages, fits
//! their tiles ([`tiles`]: a GPU stage launches in larger tiles than the graph's), lays out the
//! memory and sizes the tensors' pools, reading no device. [`bind`] then opens the GPUs the
//! stages name and binds each stage to its kernel, creating it once to learn its workspace.
//! [`Plan::with_gpus`] does both.
//!
//! Planning is where invalid combinations are caught, before anything runs: a stage with no
//! placement, a placement naming an unknown stage, a tile that does not fit its stage, a
//! crossing the runtime does not do, a GPU placement where no GPU is usable, a device kind no
//! loaded library offers the kernel for, a kernel taking a different number of tensors or
//! declaring memory its device cannot use, or a kernel refusing the stage's parameters or
//! shapes. `kplace plan` prints the result with [`Plan`]'s `Display` (`display`); it may
//! describe a GPU placement on a machine without a GPU ([`PlanMode::Describe`]), which
//! `kplace run` refuses.

// Plan errors are made once, before anything runs, and carry the names and places a user needs
// to fix their files; their size on the stack does not matter.
#![allow(clippy::result_large_err)]

pub mod bind;
mod display;
pub mod gpu_path;
pub mod layout;
pub mod memory;
pub mod tiles;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use kplace_abi::TensorDesc;

use crate::cuda::{Gpu, GpuError, GpuProvider};
use crate::model::graph::{Graph, StageId, TensorId, TensorSpec};
use crate::model::placement::{Device, Placement, RuntimeSettings};
use crate::plugin::{KernelHandle, KernelState, PluginError};

pub use crate::model::placement::{LIB_DIR_ENV, library_search_dirs};
pub use bind::default_library_file;
pub use layout::{Layout, tensor_pools_for};
pub use memory::{
    BufferSpace, Demand, Direction, GpuWork, Lifetime, MemoryAvailable, MemoryNeed, Mirror,
    PlannedEdge, Transfer,
};
pub use tiles::TileOrigin;

/// A graph bound to devices, kernels and pools.
#[derive(Debug)]
pub struct Plan {
    /// The graph.
    pub graph: Graph,
    /// The placement it was planned with.
    pub placement: Placement,
    /// One entry per graph stage, in graph order.
    pub stages: Vec<PlannedStage>,
    /// One entry per graph tensor, in graph order.
    pub edges: Vec<PlannedEdge>,
    /// Every pool the executor allocates at start.
    pub pools: Vec<PoolSpec>,
    /// Executor settings.
    pub runtime: RuntimeSettings,
    /// The GPUs the stages use, opened (empty for an all-CPU plan).
    pub gpus: BTreeMap<u32, Arc<dyn Gpu>>,
    /// Why GPU stages were planned without a device, when planned with
    /// [`PlanMode::Describe`] on a machine where the GPU is not usable. Such a plan cannot run.
    pub gpu_unusable: Option<GpuError>,
}

/// How much planning may assume.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlanMode {
    /// A plan to run: every device must be usable and every kernel is created once.
    Run,
    /// A plan to show: when a GPU is not usable, its stages are planned without a device (their
    /// kernels are found but not created, so their workspaces are unknown) and
    /// [`Plan::gpu_unusable`] says why.
    Describe,
}

/// A stage bound to a device and a kernel.
#[derive(Debug)]
pub struct PlannedStage {
    /// The graph stage.
    pub stage: StageId,
    /// Where it runs, and what running there takes.
    pub on: StageOn,
    /// Its kernel.
    pub kernel: KernelHandle,
    /// Launches per frame (tiles of a split stage, else 1).
    pub launches: u64,
    /// Where a split stage's tile came from (the plan's graph holds the tile itself); `None`
    /// for a stage that is not split.
    pub tile_origin: Option<TileOrigin>,
    /// Workspace bytes each launch needs; `None` when the kernel could not be created to ask
    /// (a GPU stage described without a GPU).
    pub workspace_bytes: Option<u64>,
    /// What a stateful stage carries from frame to frame; `None` for a stateless one (or a
    /// GPU stage described without a GPU, whose kernel was not created to ask).
    pub carry: Option<PlannedCarry>,
}

/// Where a planned stage runs, with what only that device needs: one value, so that a stage's
/// device and its GPU work cannot disagree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StageOn {
    /// On the host CPU: each launch runs to its end on a worker.
    Cpu,
    /// On a GPU: its launches are enqueued on a stream of their own.
    Gpu {
        /// The CUDA ordinal.
        ordinal: u32,
        /// The stream's priority.
        priority: i32,
        /// What the stage enqueues around its launches.
        work: GpuWork,
    },
}

impl PlannedStage {
    /// The device it runs on.
    pub fn device(&self) -> Device {
        match self.on {
            StageOn::Cpu => Device::Cpu,
            StageOn::Gpu { ordinal, .. } => Device::Gpu(ordinal),
        }
    }

    /// For a GPU stage, what it enqueues around its launches; `None` on the CPU.
    pub fn gpu(&self) -> Option<&GpuWork> {
        match &self.on {
            StageOn::Cpu => None,
            StageOn::Gpu { work, .. } => Some(work),
        }
    }
}

/// A stateful stage's carry: one block per pipeline, kept from frame to frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlannedCarry {
    /// Its size, as the kernel asked.
    pub bytes: u64,
    /// Whether lost frames zero it (else the kernel is told how many were lost).
    pub reset_on_gap: bool,
}

/// What a pool's blocks hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolPurpose {
    /// Buffers of this tensor where its writer writes it, one per slot: each slot's own, or,
    /// for a tensor that lives only while a frame's stages run ([`Lifetime::Stages`]), shared
    /// by the frames in flight.
    Tensor(TensorId),
    /// One mirror of this tensor per slot, on the other side of the bus.
    Mirror(TensorId),
    /// Workspaces of this stage. A CPU stage's launch runs to its end on a worker, so each
    /// worker has one; a GPU stage's launch enqueues work that runs later, so each launch of a
    /// frame has its own, per slot.
    Workspace(StageId),
    /// The carry of this stateful stage: one block, kept for the run, in its kernel's memory.
    Carry(StageId),
    /// Zeros in pinned memory, copied over a stateful GPU stage's carry when it must start
    /// afresh (device memory cannot be cleared from the host without waiting).
    CarryZeros(StageId),
    /// Pinned memory a stateful GPU stage's carry passes through when a run that switches
    /// placements moves it to or from another placement.
    CarryStaging(StageId),
}

/// A fixed-block pool the executor allocates at start.
#[derive(Clone, Debug)]
pub struct PoolSpec {
    /// A name for reports: the tensor's name, `<tensor>.mirror` or `workspace.<stage>`.
    pub name: String,
    /// What it holds.
    pub purpose: PoolPurpose,
    /// Where it lives.
    pub space: BufferSpace,
    /// Size of each block.
    pub block_bytes: u64,
    /// Number of blocks.
    pub blocks: usize,
}

impl PoolSpec {
    /// Bytes the pool occupies (saturating; a plan's pools were checked to fit in memory).
    pub fn total_bytes(&self) -> u64 {
        self.block_bytes.saturating_mul(self.blocks as u64)
    }
}

/// Why planning failed.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// A graph stage has no entry in the placement.
    #[error("placement {}: stage {stage} (graph {}:{line}) has no placement; add `{stage}: cpu` or a GPU", placement.display(), graph.display())]
    Unplaced {
        /// The placement file.
        placement: PathBuf,
        /// The graph file.
        graph: PathBuf,
        /// The stage.
        stage: String,
        /// Its line in the graph.
        line: u64,
    },
    /// The placement names a stage the graph lacks.
    #[error("placement {}:{line}: unknown stage {stage}; graph {} has stages {known}", placement.display(), graph.display())]
    UnknownStage {
        /// The placement file.
        placement: PathBuf,
        /// Line of the entry.
        line: u64,
        /// The graph file.
        graph: PathBuf,
        /// The unknown name.
        stage: String,
        /// The graph's stages, comma separated.
        known: String,
    },
    /// No default library file was found.
    #[error(
        "no {kind} kernel library given and {file} was not found in: {searched} (build it with `cargo build --release`, set {LIB_DIR_ENV}, or name it under `libraries:` in the placement)"
    )]
    LibraryNotFound {
        /// `cpu` or `gpu`.
        kind: &'static str,
        /// The file name searched for.
        file: &'static str,
        /// The directories searched.
        searched: String,
    },
    /// Loading a library or creating a kernel failed.
    #[error("stage {stage}: {cause}")]
    Plugin {
        /// The stage.
        stage: String,
        /// The loader's or kernel's error.
        cause: PluginError,
    },
    /// A stage's GPU failed while its kernel was being created.
    #[error("stage {stage}: {cause}")]
    Device {
        /// The stage.
        stage: String,
        /// The device's error.
        cause: GpuError,
    },
    /// The placement asks for a kernel no library offers on that device.
    #[error("stage {stage} is placed on {device} (placement {}:{line}), but {library} offers no {kind} kernel {kernel}; it offers: {offers}", placement.display())]
    NoKernel {
        /// The stage.
        stage: String,
        /// The device asked for.
        device: Device,
        /// The placement file.
        placement: PathBuf,
        /// Line of the entry.
        line: u64,
        /// The library searched, with its path.
        library: String,
        /// `cpu` or `cuda`.
        kind: &'static str,
        /// The kernel's logical name.
        kernel: String,
        /// What the library offers instead.
        offers: String,
    },
    /// The kernel's table disagrees with the stage's tensors.
    #[error(
        "stage {stage}: kernel {kernel} takes {want_in} inputs and {want_out} outputs, but the graph gives it {got_in} and {got_out}"
    )]
    Ports {
        /// The stage.
        stage: String,
        /// The kernel.
        kernel: String,
        /// Inputs the kernel takes.
        want_in: u32,
        /// Outputs the kernel writes.
        want_out: u32,
        /// Inputs the graph gives.
        got_in: usize,
        /// Outputs the graph gives.
        got_out: usize,
    },
    /// A stateful kernel's stage is split into tiles: its launches would share one carry.
    #[error(
        "stage {stage} (graph {}:{line}): kernel {kernel} carries state from frame to frame, so its stage runs whole; remove its `split`",
        graph.display()
    )]
    StatefulSplit {
        /// The stage.
        stage: String,
        /// The kernel.
        kernel: String,
        /// The graph file.
        graph: PathBuf,
        /// The stage's line.
        line: u64,
    },
    /// A stage is placed on a GPU that cannot be used here.
    #[error("stage {stage} is placed on {device} (placement {}:{line}), but no GPU is usable: {cause}; place it on `cpu`, or see `kplace devices`", placement.display())]
    NoGpu {
        /// The stage.
        stage: String,
        /// The device asked for.
        device: Device,
        /// The placement file.
        placement: PathBuf,
        /// Line of the entry.
        line: u64,
        /// Why the device cannot be used.
        cause: GpuError,
    },
    /// A placement's `tile` does not fit its stage.
    #[error("placement {}:{line}: stage {stage}: {why}", placement.display())]
    Tile {
        /// The stage.
        stage: String,
        /// The placement file.
        placement: PathBuf,
        /// Line of the entry.
        line: u64,
        /// What is wrong, and the tiles that would fit.
        why: String,
    },
    /// A placement needs a data movement this runtime does not do.
    #[error("tensor {tensor}: {why}")]
    Unsupported {
        /// The tensor.
        tensor: String,
        /// What is not supported, with the stages involved.
        why: String,
    },
    /// The pools need more memory of a kind than the machine has.
    #[error(
        "the plan needs {} of {space} ({split}), but {} is available ({measured}); its largest pools: {largest}; use a smaller frame shape (--shape) or fewer slots (--slots)",
        human_bytes(*need),
        human_bytes(*available)
    )]
    OutOfMemory {
        /// `host memory` or `memory on gpu:N`.
        space: String,
        /// Bytes the pools need there.
        need: u64,
        /// How the need splits (pageable and pinned).
        split: String,
        /// Bytes available.
        available: u64,
        /// Where the available figure came from.
        measured: String,
        /// The largest pools there, with their sizes.
        largest: String,
    },
    /// A pool's bytes, or a total, do not fit in 64 bits.
    #[error(
        "{what} overflows 64 bits of bytes; use a smaller frame shape (--shape) or fewer slots (--slots)"
    )]
    MemoryOverflow {
        /// The pool or total.
        what: String,
    },
    /// A kernel declares a memory space that does not match its device.
    #[error(
        "stage {stage}: kernel {kernel} runs on {device} but declares {memory} memory, which this runtime cannot provide there"
    )]
    Memory {
        /// The stage.
        stage: String,
        /// The kernel.
        kernel: String,
        /// The device.
        device: Device,
        /// The memory space it declares.
        memory: &'static str,
    },
}

/// The descriptor kernels see for `tensor` in `space`.
pub fn tensor_desc(tensor: &TensorSpec, space: BufferSpace) -> TensorDesc {
    let mut shape = [0u64; kplace_abi::MAX_RANK];
    shape[..tensor.shape.len()].copy_from_slice(&tensor.shape);
    TensorDesc {
        dtype: tensor.dtype,
        memory: space.memory(),
        rank: tensor.shape.len() as u32,
        reserved: 0,
        shape,
        bytes: tensor.bytes,
    }
}

impl Plan {
    /// Plans `graph` on `placement` to run it, on this machine's GPUs.
    pub fn new(graph: Graph, placement: Placement) -> Result<Plan, PlanError> {
        Plan::with_gpus(
            graph,
            placement,
            crate::cuda::driver::CudaProvider::global(),
            PlanMode::Run,
        )
    }

    /// Plans `graph` on `placement` with GPUs from `gpus`: lays it out ([`Layout::new`], pure),
    /// opens the GPUs its stages name ([`bind::open_gpus`]), then loads the libraries it needs
    /// and, for every stage whose device is usable, creates its kernel once to validate it
    /// ([`bind::bind`]).
    pub fn with_gpus(
        graph: Graph,
        placement: Placement,
        gpus: &dyn GpuProvider,
        mode: PlanMode,
    ) -> Result<Plan, PlanError> {
        let layout = Layout::new(graph, placement)?;
        let opened = bind::open_gpus(&layout, gpus, mode)?;
        bind::bind(layout, opened)
    }

    /// Whether the plan can run: every stage's device was usable when it was planned.
    pub fn runnable(&self) -> Result<(), &GpuError> {
        match &self.gpu_unusable {
            Some(cause) => Err(cause),
            None => Ok(()),
        }
    }

    /// The GPU a stage runs on, `None` for a CPU stage.
    pub fn gpu_of(&self, id: StageId) -> Option<&Arc<dyn Gpu>> {
        match self.stages[id.0].on {
            StageOn::Cpu => None,
            StageOn::Gpu { ordinal, .. } => self.gpus.get(&ordinal),
        }
    }

    /// The pool holding `purpose`'s blocks.
    pub fn pool_of(&self, purpose: PoolPurpose) -> Option<usize> {
        self.pools.iter().position(|p| p.purpose == purpose)
    }

    /// Creates the kernel state of stage `id` (one per frame slot), with the stage's GPU
    /// context current on the calling thread.
    pub fn create_state(&self, id: StageId) -> Result<KernelState, bind::CreateError> {
        self.create_state_with(id, &self.graph.stage(id).params)
    }

    /// [`Plan::create_state`] with `params` instead of the stage's own (new values asked for
    /// while a run goes on).
    pub fn create_state_with(
        &self,
        id: StageId,
        params: &[(String, String)],
    ) -> Result<KernelState, bind::CreateError> {
        let planned = &self.stages[id.0];
        let on = (planned.device(), self.gpu_of(id));
        bind::create_state(&self.graph, &self.edges, id, &planned.kernel, on, params)
    }

    /// Every transfer of a frame, in graph order of tensors (not a constant's upload, made
    /// once before the run).
    pub fn transfers(&self) -> impl Iterator<Item = (&PlannedEdge, Transfer)> + '_ {
        self.edges
            .iter()
            .filter(|e| e.lifetime != Lifetime::Run)
            .filter_map(|e| e.mirror.map(|m| (e, m.transfer)))
    }

    /// Total bytes of every pool.
    pub fn pool_bytes(&self) -> u64 {
        self.pools
            .iter()
            .map(PoolSpec::total_bytes)
            .fold(0, u64::saturating_add)
    }
}

/// Bytes in binary units for plans and reports.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

//! Planning: a graph and a placement become a [`Plan`], with every stage bound to a loaded
//! kernel and a device, every tensor bound to memory (and, where it crosses the bus, to a
//! mirror and a transfer: [`memory`]), and every pool sized.
//!
//! Planning is where invalid combinations are caught, before anything runs: a stage with no
//! placement, a placement naming an unknown stage, a GPU placement where no GPU is usable, a
//! device kind no loaded library offers the kernel for, a kernel taking a different number of
//! tensors or declaring memory its device cannot use, or a kernel refusing the stage's
//! parameters or shapes (each stage's kernel is created once here to ask it), or a tile that
//! does not fit its stage ([`tiles`]: a GPU stage launches in larger tiles than the graph's). `kplace plan`
//! prints the result with [`Plan`]'s `Display` ([`display`]); it may describe a GPU placement
//! on a machine without a GPU ([`PlanMode::Describe`]), which `kplace run` refuses.
//!
//! Long (744 lines of code, 22 of tests): the planner and its errors; display, memory and tiles
//! are already their own modules, and opening devices is still done here.

// Plan errors are made once, before anything runs, and carry the names and places a user needs
// to fix their files; their size on the stack does not matter.
#![allow(clippy::result_large_err)]

mod display;
pub mod memory;
pub mod tiles;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kplace_abi::{MemorySpace, TensorDesc};

use crate::cuda::{Gpu, GpuError, GpuProvider};
use crate::model::graph::{Graph, StageId, TensorId, TensorSpec};
use crate::model::placement::{Device, Placement, RuntimeSettings};
use crate::plugin::{CreateConfig, KernelHandle, KernelLibrary, KernelState, PluginError};

pub use memory::{
    BufferSpace, Demand, Direction, GpuWork, MemoryAvailable, MemoryNeed, Mirror, PlannedEdge,
    Transfer,
};
pub use tiles::TileOrigin;

/// Environment variable naming a directory to search first for the default libraries.
pub const LIB_DIR_ENV: &str = "KPLACE_LIB_DIR";

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
    /// Where it runs.
    pub device: Device,
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
    /// Stream priority on a GPU.
    pub priority: i32,
    /// For a GPU stage: what it enqueues around its launches. `None` on the CPU.
    pub gpu: Option<GpuWork>,
}

/// What a pool's blocks hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolPurpose {
    /// One buffer of this tensor per slot, where its writer writes it.
    Tensor(TensorId),
    /// One mirror of this tensor per slot, on the other side of the bus.
    Mirror(TensorId),
    /// Workspaces of this stage: one per launch of a frame, per slot.
    Workspace(StageId),
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
        "the plan needs {} of {space} ({split}), but {} is available ({measured}); its largest pools: {largest}; use a smaller CPI (--cpi) or fewer slots (--slots)",
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
        "{what} overflows 64 bits of bytes; use a smaller CPI (--cpi) or fewer slots (--slots)"
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

/// Loads each library file once.
#[derive(Default)]
struct Libraries {
    loaded: BTreeMap<PathBuf, Arc<KernelLibrary>>,
}

impl Libraries {
    fn get(&mut self, path: &Path) -> Result<Arc<KernelLibrary>, PluginError> {
        let key = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        if let Some(lib) = self.loaded.get(&key) {
            return Ok(Arc::clone(lib));
        }
        let lib = KernelLibrary::load(path)?;
        self.loaded.insert(key, Arc::clone(&lib));
        Ok(lib)
    }
}

/// The file name of the default library for a device kind.
pub fn default_library_file(device: Device) -> &'static str {
    match device {
        Device::Cpu => "libkplace_cpu.so",
        Device::Gpu(_) => "libkplace_gpu.so",
    }
}

/// Directories searched for default libraries: `$KPLACE_LIB_DIR` (when set and not empty),
/// the running executable's directory, and its parent (test and example binaries live one level
/// below the libraries).
pub fn library_search_dirs() -> Vec<PathBuf> {
    search_dirs(
        std::env::var_os(LIB_DIR_ENV),
        std::env::current_exe().ok().as_deref(),
    )
}

/// [`library_search_dirs`] for a given `$KPLACE_LIB_DIR` and executable. An empty variable is
/// unset: as a directory it would be the current one, and a bare `libkplace_cpu.so` found
/// there is looked up by the loader on the system path, not here.
fn search_dirs(lib_dir: Option<std::ffi::OsString>, exe: Option<&Path>) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(dir) = lib_dir.filter(|d| !d.is_empty()) {
        dirs.push(PathBuf::from(dir));
    }
    if let Some(exe) = exe
        && let Some(dir) = exe.parent()
    {
        dirs.push(dir.to_path_buf());
        if let Some(parent) = dir.parent() {
            dirs.push(parent.to_path_buf());
        }
    }
    dirs
}

fn find_default_library(device: Device) -> Result<PathBuf, PlanError> {
    let file = default_library_file(device);
    let dirs = library_search_dirs();
    dirs.iter()
        .map(|d| d.join(file))
        .find(|p| p.is_file())
        .ok_or_else(|| PlanError::LibraryNotFound {
            kind: match device {
                Device::Cpu => "cpu",
                Device::Gpu(_) => "gpu",
            },
            file,
            searched: dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        })
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

    /// Plans `graph` on `placement` with GPUs from `gpus`, loading the libraries it needs and,
    /// for every stage whose device is usable, creating its kernel once to validate it.
    pub fn with_gpus(
        graph: Graph,
        placement: Placement,
        gpus: &dyn GpuProvider,
        mode: PlanMode,
    ) -> Result<Plan, PlanError> {
        let entries = placed_entries(&graph, &placement)?;
        let (graph, tile_origins) = tiles::place_tiles(graph, &entries, &placement.path)?;
        let devices: Vec<Device> = entries.iter().map(|e| e.device).collect();

        // Open every GPU a stage names before anything else, so a GPU placement on a machine
        // without one fails first, naming the stage.
        let mut opened: BTreeMap<u32, Arc<dyn Gpu>> = BTreeMap::new();
        let mut gpu_unusable = None;
        for (stage, entry) in graph.stages.iter().zip(&entries) {
            let Device::Gpu(n) = entry.device else {
                continue;
            };
            if opened.contains_key(&n) {
                continue;
            }
            match gpus.open(n) {
                Ok(gpu) => {
                    opened.insert(n, gpu);
                }
                Err(cause) if mode == PlanMode::Describe => {
                    gpu_unusable.get_or_insert(cause);
                }
                Err(cause) => {
                    return Err(PlanError::NoGpu {
                        stage: stage.name.clone(),
                        device: entry.device,
                        placement: placement.path.clone(),
                        line: entry.line,
                        cause,
                    });
                }
            }
        }

        let (edges, mut gpu_work) = memory::lay_out(&graph, &devices)?;
        let slots = placement.runtime.slots;
        let mut pools = tensor_pools(&graph, &edges, slots);
        // The tensors' memory must fit before any kernel is created: a kernel may allocate as
        // much as its tensors while it plans.
        let mut available = MemoryAvailable::probe();
        for (&n, gpu) in &opened {
            if let Some(bytes) = gpu.total_memory() {
                available = available.with_gpu(n, bytes);
            }
        }
        check_pools(&pools, &available)?;

        let mut libraries = Libraries::default();
        let mut stages = Vec::with_capacity(graph.stages.len());
        for (index, (stage, entry)) in graph.stages.iter().zip(&entries).enumerate() {
            let plugin = |source| PlanError::Plugin {
                stage: stage.name.clone(),
                cause: source,
            };
            let library_path = match placement.library_for(entry) {
                Some(path) => path.to_path_buf(),
                None => find_default_library(entry.device)?,
            };
            let library = libraries.get(&library_path).map_err(plugin)?;
            let kind = entry.device.kind();
            let kernel = library
                .find(&stage.kernel, kind)
                .ok_or_else(|| PlanError::NoKernel {
                    stage: stage.name.clone(),
                    device: entry.device,
                    placement: placement.path.clone(),
                    line: entry.line,
                    library: format!("{} ({})", library.name(), library.path().display()),
                    kind: kind.name().unwrap_or("?"),
                    kernel: stage.kernel.clone(),
                    offers: offered(&library),
                })?;
            let info = kernel.info();
            if info.n_inputs as usize != stage.inputs.len()
                || info.n_outputs as usize != stage.outputs.len()
            {
                return Err(PlanError::Ports {
                    stage: stage.name.clone(),
                    kernel: stage.kernel.clone(),
                    want_in: info.n_inputs,
                    want_out: info.n_outputs,
                    got_in: stage.inputs.len(),
                    got_out: stage.outputs.len(),
                });
            }
            let memory_fits = match entry.device {
                Device::Cpu => info.memory == MemorySpace::HOST,
                Device::Gpu(_) => info.memory == MemorySpace::DEVICE,
            };
            if !memory_fits {
                return Err(PlanError::Memory {
                    stage: stage.name.clone(),
                    kernel: stage.kernel.clone(),
                    device: entry.device,
                    memory: info.memory.name().unwrap_or("unknown"),
                });
            }
            let launches = stage
                .split
                .map_or(1, |s| graph.tensor(stage.inputs[0]).shape[s.axis] / s.tile);
            let gpu = match entry.device {
                Device::Cpu => None,
                Device::Gpu(n) => opened.get(&n),
            };
            let usable = entry.device == Device::Cpu || gpu.is_some();
            let workspace_bytes = if usable {
                let probe =
                    create_state(&graph, &edges, StageId(index), &kernel, entry.device, gpu)
                        .map_err(plugin)?;
                Some(probe.workspace_bytes())
            } else {
                None
            };
            let workspace_space = match entry.device {
                Device::Cpu => BufferSpace::Host,
                Device::Gpu(n) => BufferSpace::Device(n),
            };
            pools.push(PoolSpec {
                name: format!("workspace.{}", stage.name),
                purpose: PoolPurpose::Workspace(StageId(index)),
                space: workspace_space,
                block_bytes: workspace_bytes.unwrap_or(0),
                blocks: slots * launches as usize,
            });
            stages.push(PlannedStage {
                stage: StageId(index),
                device: entry.device,
                kernel,
                launches,
                tile_origin: tile_origins[index],
                workspace_bytes,
                priority: entry.priority,
                gpu: gpu_work[index].take(),
            });
        }
        // And with the workspaces the kernels asked for.
        check_pools(&pools, &available)?;
        let runtime = placement.runtime.clone();
        Ok(Plan {
            graph,
            placement,
            stages,
            edges,
            pools,
            runtime,
            gpus: opened,
            gpu_unusable,
        })
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
        match self.stages[id.0].device {
            Device::Cpu => None,
            Device::Gpu(n) => self.gpus.get(&n),
        }
    }

    /// The pool holding `purpose`'s blocks.
    pub fn pool_of(&self, purpose: PoolPurpose) -> Option<usize> {
        self.pools.iter().position(|p| p.purpose == purpose)
    }

    /// Creates the kernel state of stage `id` (one per frame slot), with the stage's GPU
    /// context current on the calling thread.
    pub fn create_state(&self, id: StageId) -> Result<KernelState, PluginError> {
        let planned = &self.stages[id.0];
        create_state(
            &self.graph,
            &self.edges,
            id,
            &planned.kernel,
            planned.device,
            self.gpu_of(id),
        )
    }

    /// Every transfer of a frame, in graph order of tensors.
    pub fn transfers(&self) -> impl Iterator<Item = (&PlannedEdge, Transfer)> + '_ {
        self.edges
            .iter()
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

/// The placement entry of every graph stage, in graph order; an error for a stage without one
/// or an entry naming no stage.
fn placed_entries<'p>(
    graph: &Graph,
    placement: &'p Placement,
) -> Result<Vec<&'p crate::model::placement::StagePlacement>, PlanError> {
    for (name, entry) in &placement.stages {
        if graph.stage_by_name(name).is_none() {
            return Err(PlanError::UnknownStage {
                placement: placement.path.clone(),
                line: entry.line,
                graph: graph.path.clone(),
                stage: name.clone(),
                known: graph
                    .stages
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
    }
    graph
        .stages
        .iter()
        .map(|stage| {
            placement
                .stages
                .get(&stage.name)
                .ok_or_else(|| PlanError::Unplaced {
                    placement: placement.path.clone(),
                    graph: graph.path.clone(),
                    stage: stage.name.clone(),
                    line: stage.line,
                })
        })
        .collect::<Result<Vec<_>, _>>()
}

/// One pool per tensor where its writer writes it, and one per mirror, `slots` blocks each.
fn tensor_pools(graph: &Graph, edges: &[PlannedEdge], slots: usize) -> Vec<PoolSpec> {
    let mut pools = Vec::new();
    for (edge, t) in edges.iter().zip(&graph.tensors) {
        pools.push(PoolSpec {
            name: t.name.clone(),
            purpose: PoolPurpose::Tensor(edge.tensor),
            space: edge.space,
            block_bytes: t.bytes,
            blocks: slots,
        });
        if let Some(mirror) = edge.mirror {
            pools.push(PoolSpec {
                name: format!("{}.mirror", t.name),
                purpose: PoolPurpose::Mirror(edge.tensor),
                space: mirror.space,
                block_bytes: t.bytes,
                blocks: slots,
            });
        }
    }

    pools
}

/// Refuses pools that need more memory than `available` has (see [`memory::check_fits`]).
fn check_pools(pools: &[PoolSpec], available: &MemoryAvailable) -> Result<MemoryNeed, PlanError> {
    let demands: Vec<Demand> = pools.iter().map(Demand::of_pool).collect();
    memory::check_fits(&demands, available)
}

/// The pools `graph`'s tensors and mirrors need on `placement`, without the kernels'
/// workspaces (known only once the kernels are created): what a caller can check against
/// memory, with what else it holds, before preparing anything CPI-sized.
pub fn tensor_pools_for(graph: &Graph, placement: &Placement) -> Result<Vec<PoolSpec>, PlanError> {
    let entries = placed_entries(graph, placement)?;
    let devices: Vec<Device> = entries.iter().map(|e| e.device).collect();
    let (edges, _) = memory::lay_out(graph, &devices)?;
    Ok(tensor_pools(graph, &edges, placement.runtime.slots))
}

fn offered(library: &KernelLibrary) -> String {
    if library.kernels().is_empty() {
        return "no kernels at all".into();
    }
    library
        .kernels()
        .iter()
        .map(|k| format!("{} ({})", k.name, k.device.name().unwrap_or("?")))
        .collect::<Vec<_>>()
        .join(", ")
}

fn create_state(
    graph: &Graph,
    edges: &[PlannedEdge],
    id: StageId,
    kernel: &KernelHandle,
    device: Device,
    gpu: Option<&Arc<dyn Gpu>>,
) -> Result<KernelState, PluginError> {
    let stage = graph.stage(id);
    let descs = |ids: &[TensorId]| -> Vec<TensorDesc> {
        ids.iter()
            .map(|&t| tensor_desc(graph.tensor(t), edges[t.0].space_for(device)))
            .collect()
    };
    let inputs = descs(&stage.inputs);
    let outputs = descs(&stage.outputs);
    if let Some(gpu) = gpu {
        // The ABI promises CUDA kernels the device's primary context on the calling thread.
        gpu.bind_thread().map_err(PluginError::Device)?;
    }
    kernel.create(&CreateConfig {
        params: &stage.params,
        inputs: &inputs,
        outputs: &outputs,
        split: stage.split.map(|s| (s.axis, s.tile)),
        device_ordinal: match device {
            Device::Cpu => 0,
            Device::Gpu(n) => n,
        },
    })
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

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::search_dirs;

    #[test]
    fn an_empty_lib_dir_is_unset() {
        let exe = Path::new("/opt/kplace/bin/kplace");
        let install = [
            PathBuf::from("/opt/kplace/bin"),
            PathBuf::from("/opt/kplace"),
        ];
        assert_eq!(search_dirs(Some("".into()), Some(exe)), install);
        assert_eq!(search_dirs(None, Some(exe)), install);
        assert_eq!(
            search_dirs(Some("/libs".into()), Some(exe))[0],
            PathBuf::from("/libs")
        );
    }
}

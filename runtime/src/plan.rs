//! Planning: a graph and a placement become a [`Plan`], with every stage bound to a loaded
//! kernel, every tensor bound to a memory space and a pool, and every pool sized.
//!
//! Planning is where invalid combinations are caught, before anything runs: a stage with no
//! placement, a placement naming an unknown stage, a device kind no loaded library offers the
//! kernel for, a kernel taking a different number of tensors, or a kernel refusing the stage's
//! parameters or shapes (each stage's kernel is created once here to ask it). `kplace plan`
//! prints the result with [`Plan`]'s `Display`.

// Plan errors are made once, before anything runs, and carry the names and places a user needs
// to fix their files; their size on the stack does not matter.
#![allow(clippy::result_large_err)]

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kplace_abi::{DeviceKind, MemorySpace, TensorDesc};

use crate::graph::{Graph, Producer, StageId, TensorId, TensorSpec};
use crate::placement::{Device, Placement, RuntimeSettings};
use crate::plugin::{CreateConfig, KernelHandle, KernelLibrary, KernelState, PluginError};

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
    /// Workspace bytes each launch needs.
    pub workspace_bytes: u64,
    /// Stream priority on a GPU.
    pub priority: i32,
}

/// Where a tensor's per-slot buffers live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BufferSpace {
    /// Pageable host memory.
    Host,
}

impl BufferSpace {
    /// The ABI memory space kernels see.
    pub fn memory(self) -> MemorySpace {
        match self {
            BufferSpace::Host => MemorySpace::HOST,
        }
    }
}

impl fmt::Display for BufferSpace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BufferSpace::Host => f.write_str("host"),
        }
    }
}

/// A tensor bound to a memory space.
#[derive(Clone, Debug)]
pub struct PlannedEdge {
    /// The graph tensor.
    pub tensor: TensorId,
    /// Where its buffers live.
    pub space: BufferSpace,
    /// The pool its buffers come from (index into [`Plan::pools`]).
    pub pool: usize,
}

/// What a pool's blocks hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolPurpose {
    /// One buffer of this tensor per slot.
    Tensor(TensorId),
    /// Workspaces of this stage: one per launch of a frame, per slot.
    Workspace(StageId),
}

/// A fixed-block pool the executor allocates at start.
#[derive(Clone, Debug)]
pub struct PoolSpec {
    /// A name for reports: the tensor's name, or `workspace.<stage>`.
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
    /// Bytes the pool occupies.
    pub fn total_bytes(&self) -> u64 {
        self.block_bytes * self.blocks as u64
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

/// Directories searched for default libraries: `$KPLACE_LIB_DIR`, the running executable's
/// directory, and its parent (test and example binaries live one level below the libraries).
pub fn library_search_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(dir) = std::env::var_os(LIB_DIR_ENV) {
        dirs.push(PathBuf::from(dir));
    }
    if let Ok(exe) = std::env::current_exe()
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
    /// Plans `graph` on `placement`, loading the libraries it needs and creating each stage's
    /// kernel once to validate it.
    pub fn new(graph: Graph, placement: Placement) -> Result<Plan, PlanError> {
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
        // Every tensor lives in host memory while every kernel runs on the CPU; a stage whose
        // kernel wants device memory is refused below.
        let edges: Vec<PlannedEdge> = (0..graph.tensors.len())
            .map(|i| PlannedEdge {
                tensor: TensorId(i),
                space: BufferSpace::Host,
                pool: i,
            })
            .collect();
        let slots = placement.runtime.slots;
        let mut pools: Vec<PoolSpec> = graph
            .tensors
            .iter()
            .enumerate()
            .map(|(i, t)| PoolSpec {
                name: t.name.clone(),
                purpose: PoolPurpose::Tensor(TensorId(i)),
                space: BufferSpace::Host,
                block_bytes: t.bytes,
                blocks: slots,
            })
            .collect();

        let mut libraries = Libraries::default();
        let mut stages = Vec::with_capacity(graph.stages.len());
        for (index, stage) in graph.stages.iter().enumerate() {
            let entry = placement
                .stages
                .get(&stage.name)
                .ok_or_else(|| PlanError::Unplaced {
                    placement: placement.path.clone(),
                    graph: graph.path.clone(),
                    stage: stage.name.clone(),
                    line: stage.line,
                })?;
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
            if kind != DeviceKind::CPU || info.memory != MemorySpace::HOST {
                return Err(PlanError::Memory {
                    stage: stage.name.clone(),
                    kernel: stage.kernel.clone(),
                    device: entry.device,
                    memory: info.memory.name().unwrap_or("unknown"),
                });
            }
            let probe = create_state(&graph, &edges, StageId(index), &kernel, entry.device)
                .map_err(plugin)?;
            let launches = stage
                .split
                .map_or(1, |s| graph.tensor(stage.inputs[0]).shape[s.axis] / s.tile);
            let workspace_bytes = probe.workspace_bytes();
            pools.push(PoolSpec {
                name: format!("workspace.{}", stage.name),
                purpose: PoolPurpose::Workspace(StageId(index)),
                space: BufferSpace::Host,
                block_bytes: workspace_bytes,
                blocks: slots * launches as usize,
            });
            stages.push(PlannedStage {
                stage: StageId(index),
                device: entry.device,
                kernel,
                launches,
                workspace_bytes,
                priority: entry.priority,
            });
        }
        let runtime = placement.runtime.clone();
        Ok(Plan {
            graph,
            placement,
            stages,
            edges,
            pools,
            runtime,
        })
    }

    /// Creates the kernel state of stage `id` (one per frame slot).
    pub fn create_state(&self, id: StageId) -> Result<KernelState, PluginError> {
        let planned = &self.stages[id.0];
        create_state(
            &self.graph,
            &self.edges,
            id,
            &planned.kernel,
            planned.device,
        )
    }

    /// Total bytes of every pool.
    pub fn pool_bytes(&self) -> u64 {
        self.pools.iter().map(PoolSpec::total_bytes).sum()
    }
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
) -> Result<KernelState, PluginError> {
    let stage = graph.stage(id);
    let descs = |ids: &[TensorId]| -> Vec<TensorDesc> {
        ids.iter()
            .map(|&t| tensor_desc(graph.tensor(t), edges[t.0].space))
            .collect()
    };
    let inputs = descs(&stage.inputs);
    let outputs = descs(&stage.outputs);
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
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
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

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let g = &self.graph;
        writeln!(f, "graph      {} ({})", g.name, g.path.display())?;
        writeln!(
            f,
            "placement  {} ({})",
            self.placement.name,
            self.placement.path.display()
        )?;
        let dims: Vec<String> = g.dims.iter().map(|(k, v)| format!("{k}={v}")).collect();
        writeln!(f, "dims       {}", dims.join(" "))?;
        writeln!(f, "\nstages")?;
        for p in &self.stages {
            let s = g.stage(p.stage);
            let lib = p.kernel.library();
            let split = match s.split {
                Some(split) => format!(
                    "{} tiles of {} along axis {}",
                    p.launches, split.tile, split.axis
                ),
                None => "whole frame".into(),
            };
            writeln!(
                f,
                "  {:<12} {:<18} {:<6} {} ({})",
                s.name,
                s.kernel,
                p.device.to_string(),
                lib.name(),
                lib.path().display()
            )?;
            writeln!(
                f,
                "  {:<12} {split}, workspace {} per launch",
                "",
                human_bytes(p.workspace_bytes)
            )?;
        }
        writeln!(f, "\nedges")?;
        for e in &self.edges {
            let t = g.tensor(e.tensor);
            let from = match t.producer {
                Producer::Source => "source".to_string(),
                Producer::Stage(s) => g.stage(s).name.clone(),
            };
            let mut to: Vec<String> = g
                .consumers(e.tensor)
                .map(|s| g.stage(s).name.clone())
                .collect();
            if g.sinks.contains(&e.tensor) {
                to.push("sink".into());
            }
            writeln!(
                f,
                "  {:<12} {:<22} {:>10}  {} -> {}  [{}]",
                t.name,
                format!("{}{:?}", t.dtype.name().unwrap_or("?"), t.shape),
                human_bytes(t.bytes),
                from,
                to.join(", "),
                e.space
            )?;
        }
        writeln!(
            f,
            "\ntransfers  none: every stage runs on the CPU, every buffer is in host memory"
        )?;
        writeln!(
            f,
            "\npools ({} slots in flight, allocated at start)",
            self.runtime.slots
        )?;
        for p in &self.pools {
            writeln!(
                f,
                "  {:<22} {:<5} {:>3} x {:>10} = {:>10}",
                p.name,
                p.space,
                p.blocks,
                human_bytes(p.block_bytes),
                human_bytes(p.total_bytes())
            )?;
        }
        writeln!(
            f,
            "  {:<22} {:>37}",
            "total",
            human_bytes(self.pool_bytes())
        )?;
        let pinning = if self.runtime.pin_cores.is_empty() {
            "not pinned".to_string()
        } else {
            format!("pinned to cores {:?}", self.runtime.pin_cores)
        };
        writeln!(
            f,
            "\nexecutor   {} slots, {} CPU worker{}, {pinning}",
            self.runtime.slots,
            self.runtime.workers,
            if self.runtime.workers == 1 { "" } else { "s" }
        )
    }
}

//! Binding a layout to this machine: the half of planning that touches devices and libraries.
//!
//! [`open_gpus`] opens every GPU a stage names (or, when only describing, notes why one is not
//! usable); [`bind`] loads each kernel library once, finds every stage's kernel in it, checks
//! its ports and memory, creates it once to learn its workspace, and checks that every pool
//! fits in memory, first the tensors' (a kernel may allocate as much while it plans) and then
//! with the workspaces. The result is the [`Plan`] the executor runs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kplace_abi::{KernelFlags, MemorySpace, TensorDesc};

use super::layout::Layout;
use super::memory::{self, BufferSpace, Demand, MemoryAvailable, MemoryNeed, PlannedEdge};
use super::{
    Plan, PlanError, PlanMode, PlannedCarry, PlannedStage, PoolPurpose, PoolSpec, StageOn,
    tensor_desc,
};
use crate::cuda::{Gpu, GpuError, GpuProvider};
use crate::model::graph::{Graph, StageId, TensorId};
use crate::model::placement::{Device, Placement, StagePlacement, library_search_dirs};
use crate::plugin::{
    CreateConfig, KernelHandle, KernelInfo, KernelLibrary, KernelState, PluginError,
};

/// The GPUs a layout's stages name, opened.
#[derive(Debug)]
pub struct OpenGpus {
    /// By ordinal.
    pub gpus: BTreeMap<u32, Arc<dyn Gpu>>,
    /// Why a GPU could not be opened, when planning only to describe ([`PlanMode::Describe`]).
    pub unusable: Option<GpuError>,
}

/// Opens every GPU a stage of `layout` names, once each. In [`PlanMode::Run`] a GPU that
/// cannot be opened is an error naming the first stage placed on it; in
/// [`PlanMode::Describe`] it is noted and its stages are planned without a device.
pub fn open_gpus(
    layout: &Layout,
    provider: &dyn GpuProvider,
    mode: PlanMode,
) -> Result<OpenGpus, PlanError> {
    let mut gpus: BTreeMap<u32, Arc<dyn Gpu>> = BTreeMap::new();
    let mut unusable = None;
    for (stage, entry) in layout.graph.stages.iter().zip(&layout.entries) {
        let Device::Gpu(n) = entry.device else {
            continue;
        };
        if gpus.contains_key(&n) {
            continue;
        }
        match provider.open(n) {
            Ok(gpu) => {
                tracing::debug!("opened gpu:{n} ({}) for stage {}", gpu.name(), stage.name);
                gpus.insert(n, gpu);
            }
            Err(cause) if mode == PlanMode::Describe => {
                unusable.get_or_insert(cause);
            }
            Err(cause) => {
                return Err(PlanError::NoGpu {
                    stage: stage.name.clone(),
                    device: entry.device,
                    placement: layout.placement.path.clone(),
                    line: entry.line,
                    cause,
                });
            }
        }
    }
    Ok(OpenGpus { gpus, unusable })
}

/// Refuses `placement` when a stage of it is on a GPU that cannot be opened, naming the first
/// such stage: what [`open_gpus`] would say when planning, said before a run prepares
/// anything (scene frames, a recording, a socket).
pub fn check_gpus(placement: &Placement, provider: &dyn GpuProvider) -> Result<(), PlanError> {
    let mut entries: Vec<(&String, &StagePlacement)> = placement.stages.iter().collect();
    entries.sort_by_key(|(_, e)| e.line);
    let mut opened = Vec::new();
    for (stage, entry) in entries {
        let Device::Gpu(n) = entry.device else {
            continue;
        };
        if opened.contains(&n) {
            continue;
        }
        provider.open(n).map_err(|cause| PlanError::NoGpu {
            stage: stage.clone(),
            device: entry.device,
            placement: placement.path.clone(),
            line: entry.line,
            cause,
        })?;
        opened.push(n);
    }
    Ok(())
}

/// Binds every stage of `layout` to its kernel on the opened devices, and sizes the
/// workspaces: the [`Plan`].
pub fn bind(layout: Layout, opened: OpenGpus) -> Result<Plan, PlanError> {
    let Layout {
        graph,
        placement,
        entries,
        tile_origins,
        edges,
        mut gpu_work,
        tensor_pools: mut pools,
    } = layout;
    let slots = placement.runtime.slots;
    let workers = placement.runtime.workers;
    // The tensors' memory must fit before any kernel is created: a kernel may allocate as
    // much as its tensors while it plans.
    let mut available = MemoryAvailable::probe();
    for (&n, gpu) in &opened.gpus {
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
        check_kernel(&graph, StageId(index), entry, info)?;
        let launches = graph.launches(StageId(index));
        let gpu = match entry.device {
            Device::Cpu => None,
            Device::Gpu(n) => opened.gpus.get(&n),
        };
        let usable = entry.device == Device::Cpu || gpu.is_some();
        let probe =
            if usable {
                let params = &stage.params;
                let on = (entry.device, gpu);
                let probe = create_state(&graph, &edges, StageId(index), &kernel, on, params)
                    .map_err(|e| match e {
                        CreateError::Kernel(cause) => plugin(cause),
                        CreateError::Device(cause) => PlanError::Device {
                            stage: stage.name.clone(),
                            cause,
                        },
                    })?;
                Some(probe)
            } else {
                None
            };
        let workspace_bytes = probe.as_ref().map(KernelState::workspace_bytes);
        // A stateful kernel that carries nothing for this configuration runs as any other.
        let carry = probe
            .as_ref()
            .filter(|probe| info.is_stateful() && probe.carry_bytes() > 0)
            .map(|probe| PlannedCarry {
                bytes: probe.carry_bytes(),
                reset_on_gap: info.flags.contains(KernelFlags::RESET_ON_GAP),
            });
        if let Some(carry) = carry {
            pools.extend(carry_pools(
                &stage.name,
                StageId(index),
                entry.device,
                carry.bytes,
            ));
        }
        let workspace_space = match entry.device {
            Device::Cpu => BufferSpace::Host,
            Device::Gpu(n) => BufferSpace::Device(n),
        };
        pools.push(PoolSpec {
            name: format!("workspace.{}", stage.name),
            purpose: PoolPurpose::Workspace(StageId(index)),
            space: workspace_space,
            block_bytes: workspace_bytes.unwrap_or(0),
            blocks: match entry.device {
                Device::Cpu => workers,
                Device::Gpu(_) => slots * launches as usize,
            },
        });
        tracing::debug!(
            "stage {} bound to {} on {} from {} (workspace {}, {launches} launches)",
            stage.name,
            stage.kernel,
            entry.device,
            library.path().display(),
            workspace_bytes.map_or("unknown".into(), super::human_bytes)
        );
        stages.push(PlannedStage {
            stage: StageId(index),
            on: match entry.device {
                Device::Cpu => StageOn::Cpu,
                Device::Gpu(ordinal) => StageOn::Gpu {
                    ordinal,
                    priority: entry.priority,
                    // The layout gives every GPU stage its work (empty when it has none).
                    work: gpu_work[index].take().unwrap_or_default(),
                },
            },
            kernel,
            launches,
            tile_origin: tile_origins[index],
            workspace_bytes,
            carry,
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
        gpus: opened.gpus,
        gpu_unusable: opened.unusable,
    })
}

/// Checks that `info`, the kernel bound to stage `id`, fits the stage: its ports' counts, the
/// memory its device uses, and, for a stateful kernel, a stage that is not split.
fn check_kernel(
    graph: &Graph,
    id: StageId,
    entry: &StagePlacement,
    info: &KernelInfo,
) -> Result<(), PlanError> {
    let stage = graph.stage(id);
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
    if info.is_stateful() && stage.split.is_some() {
        return Err(PlanError::StatefulSplit {
            stage: stage.name.clone(),
            kernel: stage.kernel.clone(),
            graph: graph.path.clone(),
            line: stage.line,
        });
    }
    Ok(())
}

/// The pools of a stateful stage's carry: one block in its kernel's memory and, on a GPU,
/// one of pinned zeros to clear it with on the stage's stream and one of pinned memory it
/// passes through when a run moves it between placements.
fn carry_pools(stage: &str, id: StageId, device: Device, bytes: u64) -> Vec<PoolSpec> {
    let carry = |purpose, name: String, space| PoolSpec {
        name,
        purpose,
        space,
        block_bytes: bytes,
        blocks: 1,
    };
    match device {
        Device::Cpu => vec![carry(
            PoolPurpose::Carry(id),
            format!("carry.{stage}"),
            BufferSpace::Host,
        )],
        Device::Gpu(n) => vec![
            carry(
                PoolPurpose::Carry(id),
                format!("carry.{stage}"),
                BufferSpace::Device(n),
            ),
            carry(
                PoolPurpose::CarryZeros(id),
                format!("carry.{stage}.zeros"),
                BufferSpace::PinnedHost(n),
            ),
            carry(
                PoolPurpose::CarryStaging(id),
                format!("carry.{stage}.staging"),
                BufferSpace::PinnedHost(n),
            ),
        ],
    }
}

/// Refuses pools that need more memory than `available` has (see [`memory::check_fits`]).
fn check_pools(pools: &[PoolSpec], available: &MemoryAvailable) -> Result<MemoryNeed, PlanError> {
    let demands: Vec<Demand> = pools.iter().map(Demand::of_pool).collect();
    memory::check_fits(&demands, available)
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

/// The default kernel library for `device` (`libkplace_cpu.so`, `libkplace_gpu.so`), from
/// where kplace's own libraries are.
pub fn find_default_library(device: Device) -> Result<PathBuf, PlanError> {
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

/// Why a stage's kernel state could not be created.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    /// The kernel refused its configuration, or failed.
    #[error(transparent)]
    Kernel(#[from] PluginError),
    /// The stage's GPU could not be made current on the calling thread.
    #[error(transparent)]
    Device(#[from] GpuError),
}

/// Creates stage `id`'s kernel state for `device` with `params` (the stage's own, or new
/// values while a run goes on), with its GPU's context current first.
pub(super) fn create_state(
    graph: &Graph,
    edges: &[PlannedEdge],
    id: StageId,
    kernel: &KernelHandle,
    (device, gpu): (Device, Option<&Arc<dyn Gpu>>),
    params: &[(String, String)],
) -> Result<KernelState, CreateError> {
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
        gpu.bind_thread()?;
    }
    Ok(kernel.create(&CreateConfig {
        params,
        inputs: &inputs,
        outputs: &outputs,
        split: stage.split.map(|s| (s.axis, s.tile)),
        device_ordinal: match device {
            Device::Cpu => 0,
            Device::Gpu(n) => n,
        },
    })?)
}

//! Where every tensor lives, and what crosses between devices.
//!
//! Given each stage's device, [`lay_out`] binds every tensor to the memory its writer writes
//! (its *home*) and, where a reader runs on the other side of the PCIe bus, to a *mirror* on
//! that side with the transfer that fills it:
//!
//! | writer      | readers                    | home          | mirror and transfer                         |
//! |-------------|----------------------------|---------------|---------------------------------------------|
//! | CPU, source | CPU only                   | host          | none                                        |
//! | CPU, source | a GPU stage                | pinned host   | device; H2D on the GPU reader's stream      |
//! | GPU         | GPU only (same device)     | device        | none; readers wait on the writer's event    |
//! | GPU         | a CPU stage, or the sink   | device        | pinned host; D2H on the writer's stream     |
//!
//! So only the bytes that must cross do: with the first stage on a GPU the int16 samples are
//! uploaded as they arrive (tile by tile when that stage is split along the packet axis),
//! and with CFAR on a GPU only the detection list comes back, never a map.
//!
//! Pinned buffers are never write-combined: the receiver reads packet headers in place and
//! CPU stages read downloads, and write-combined memory is very slow to read.
//!
//! What this runtime does not do yet, refused here with a clear error rather than run wrongly:
//! edges between two different GPUs, a host tensor read by more than one GPU stage (each would
//! need its own upload), and GPU stages split along an axis other than their input's first.

use std::fmt;

use kplace_abi::MemorySpace;

use super::PlanError;
use crate::graph::{Graph, Producer, StageId, TensorId};
use crate::placement::Device;

/// Where a buffer lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BufferSpace {
    /// Pageable host memory, for tensors no GPU touches.
    Host,
    /// Page-locked host memory registered with this GPU, source or target of its copies.
    PinnedHost(u32),
    /// Memory on this GPU.
    Device(u32),
}

impl BufferSpace {
    /// The ABI memory space kernels see (pinned memory is host memory to a kernel).
    pub fn memory(self) -> MemorySpace {
        match self {
            BufferSpace::Host | BufferSpace::PinnedHost(_) => MemorySpace::HOST,
            BufferSpace::Device(_) => MemorySpace::DEVICE,
        }
    }

    /// Whether the CPU can read and write it.
    pub fn is_host(self) -> bool {
        !matches!(self, BufferSpace::Device(_))
    }

    /// The GPU whose driver allocates it, if any.
    pub fn gpu(self) -> Option<u32> {
        match self {
            BufferSpace::Host => None,
            BufferSpace::PinnedHost(n) | BufferSpace::Device(n) => Some(n),
        }
    }
}

impl fmt::Display for BufferSpace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BufferSpace::Host => f.write_str("host"),
            BufferSpace::PinnedHost(n) => write!(f, "pinned(gpu:{n})"),
            BufferSpace::Device(n) => write!(f, "device(gpu:{n})"),
        }
    }
}

/// Which way a transfer goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Pinned host to device, enqueued on the reading GPU stage's stream before its launch.
    HostToDevice,
    /// Device to pinned host, enqueued on the writing GPU stage's stream after its launches,
    /// before the event that fences it.
    DeviceToHost,
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Direction::HostToDevice => "H2D",
            Direction::DeviceToHost => "D2H",
        })
    }
}

/// A copy between a tensor's home and its mirror, once per frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transfer {
    /// Which way.
    pub direction: Direction,
    /// The GPU stage on whose stream the copy is enqueued.
    pub stage: StageId,
    /// Copies per frame: the stage's tiles when it uploads its split input tile by tile as
    /// the packets arrive, else 1.
    pub pieces: u64,
    /// Bytes per frame (all pieces).
    pub bytes: u64,
}

/// A tensor's second buffer, on the other side of the bus from its writer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mirror {
    /// Where it lives.
    pub space: BufferSpace,
    /// The copy that fills it.
    pub transfer: Transfer,
}

/// A tensor bound to memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlannedEdge {
    /// The graph tensor.
    pub tensor: TensorId,
    /// Where its writer writes it.
    pub space: BufferSpace,
    /// The copy on the other side, when a reader runs there.
    pub mirror: Option<Mirror>,
}

impl PlannedEdge {
    /// The space a stage on `device` reads or writes this tensor in: its home, or its mirror
    /// when the home is on the other side of the bus.
    pub fn space_for(&self, device: Device) -> BufferSpace {
        let wants_device = matches!(device, Device::Gpu(_));
        match self.mirror {
            Some(m) if (self.space.memory() == MemorySpace::DEVICE) != wants_device => m.space,
            _ => self.space,
        }
    }

    /// The space the host reads it in (the sink, a CPU reader): home or mirror.
    pub fn host_space(&self) -> BufferSpace {
        self.space_for(Device::Cpu)
    }
}

/// What a GPU stage enqueues around its kernel launches, per frame.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GpuWork {
    /// Inputs written by another GPU stage: the stream waits on that stage's event first.
    pub waits: Vec<TensorId>,
    /// Inputs copied in from pinned host before the launches (tile by tile when streamed).
    pub uploads: Vec<TensorId>,
    /// Outputs copied out to pinned host after the last launch, before the stage's event.
    pub downloads: Vec<TensorId>,
}

/// The memory layout of a graph whose stages run on `devices`: one edge per tensor and, per
/// stage, what a GPU stage enqueues besides its kernel (`None` for CPU stages).
pub fn lay_out(
    graph: &Graph,
    devices: &[Device],
) -> Result<(Vec<PlannedEdge>, Vec<Option<GpuWork>>), PlanError> {
    let device_of = |s: StageId| devices[s.0];
    let mut work: Vec<Option<GpuWork>> = devices
        .iter()
        .map(|d| matches!(d, Device::Gpu(_)).then(GpuWork::default))
        .collect();
    let mut edges = Vec::with_capacity(graph.tensors.len());
    for (index, tensor) in graph.tensors.iter().enumerate() {
        let id = TensorId(index);
        let writer = match tensor.producer {
            Producer::Source => None,
            Producer::Stage(s) => Some(s),
        };
        let writer_device = writer.map_or(Device::Cpu, device_of);
        let readers: Vec<StageId> = graph.consumers(id).collect();
        let gpu_readers: Vec<StageId> = readers
            .iter()
            .copied()
            .filter(|&r| matches!(device_of(r), Device::Gpu(_)))
            .collect();
        let host_read =
            graph.sinks.contains(&id) || readers.iter().any(|&r| device_of(r) == Device::Cpu);
        let unsupported = |why: String| PlanError::Unsupported {
            tensor: tensor.name.clone(),
            why,
        };
        let edge = match writer_device {
            Device::Cpu => match gpu_readers.as_slice() {
                [] => PlannedEdge {
                    tensor: id,
                    space: BufferSpace::Host,
                    mirror: None,
                },
                &[reader] => {
                    let Device::Gpu(n) = device_of(reader) else {
                        unreachable!("gpu_readers holds GPU stages only")
                    };
                    let stage = graph.stage(reader);
                    // A stage split along axis 0 of this input uploads it tile by tile (GPU
                    // stages split along another axis are refused below).
                    let pieces = match stage.split {
                        Some(split) if stage.inputs.first() == Some(&id) && split.axis == 0 => {
                            tensor.shape[0] / split.tile
                        }
                        _ => 1,
                    };
                    if let Some(w) = work[reader.0].as_mut() {
                        w.uploads.push(id);
                    }
                    PlannedEdge {
                        tensor: id,
                        space: BufferSpace::PinnedHost(n),
                        mirror: Some(Mirror {
                            space: BufferSpace::Device(n),
                            transfer: Transfer {
                                direction: Direction::HostToDevice,
                                stage: reader,
                                pieces,
                                bytes: tensor.bytes,
                            },
                        }),
                    }
                }
                many => {
                    return Err(unsupported(format!(
                        "it is written on the host and read by {} GPU stages ({}); one GPU reader per host tensor is supported",
                        many.len(),
                        many.iter()
                            .map(|&s| graph.stage(s).name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )));
                }
            },
            Device::Gpu(n) => {
                let writer = writer.expect("a GPU-written tensor has a writing stage");
                if let Some(&other) = gpu_readers
                    .iter()
                    .find(|&&r| device_of(r) != Device::Gpu(n))
                {
                    return Err(unsupported(format!(
                        "it is written on gpu:{n} by {} and read on {} by {}; copies between GPUs are not supported",
                        graph.stage(writer).name,
                        device_of(other),
                        graph.stage(other).name
                    )));
                }
                for &r in &gpu_readers {
                    if let Some(w) = work[r.0].as_mut() {
                        w.waits.push(id);
                    }
                }
                let mirror = host_read.then(|| {
                    if let Some(w) = work[writer.0].as_mut() {
                        w.downloads.push(id);
                    }
                    Mirror {
                        space: BufferSpace::PinnedHost(n),
                        transfer: Transfer {
                            direction: Direction::DeviceToHost,
                            stage: writer,
                            pieces: 1,
                            bytes: tensor.bytes,
                        },
                    }
                });
                PlannedEdge {
                    tensor: id,
                    space: BufferSpace::Device(n),
                    mirror,
                }
            }
        };
        edges.push(edge);
    }
    for (index, stage) in graph.stages.iter().enumerate() {
        if let (Device::Gpu(_), Some(split)) = (devices[index], stage.split)
            && split.axis != 0
        {
            return Err(PlanError::Unsupported {
                tensor: graph.tensor(stage.inputs[0]).name.clone(),
                why: format!(
                    "GPU stage {} is split along axis {}; GPU stages split only along their first input's axis 0",
                    stage.name, split.axis
                ),
            });
        }
    }
    Ok((edges, work))
}

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
//! A tensor that only CPU stages write and read, and that no sink reads, holds a frame's data
//! only while the frame's stages run ([`Lifetime::Stages`]): its buffers are not a slot's but
//! shared by the frames in flight, so that a frame waiting in a slot costs only its source
//! buffer and one worker reuses the same warm buffers frame after frame. Everything else lives
//! as long as the frame's slot ([`Lifetime::Slot`]).
//!
//! A constant tensor ([`Producer::Constant`]) has one buffer for the run ([`Lifetime::Run`]),
//! filled from the graph before the first frame: in host memory, pinned when GPU stages read
//! it, with a device mirror on their GPU uploaded once, not per frame.
//!
//! Pinned buffers are never write-combined: the receiver reads packet headers in place and
//! CPU stages read downloads, and write-combined memory is very slow to read.
//!
//! Before anything is allocated, [`check_fits`] adds up what the pools need in each kind of
//! memory, with checked arithmetic, and refuses a plan that needs more than the machine has
//! ([`MemoryAvailable::probe`]: host memory from `/proc/meminfo`, which pinned memory counts
//! against too, and each GPU's memory where its driver reports it).
//!
//! What this runtime does not do yet, refused here with a clear error rather than run wrongly:
//! edges between two different GPUs, a host tensor read by more than one GPU stage (each would
//! need its own upload), and GPU stages split along an axis other than their input's first.

use std::collections::BTreeMap;
use std::fmt;

use kplace_abi::MemorySpace;

use super::{PlanError, PoolSpec, human_bytes};
use crate::model::graph::{Graph, Producer, StageId, TensorId};
use crate::model::placement::Device;

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

impl Mirror {
    /// A mirror in GPU `n`'s memory, filled from pinned host memory by `pieces` copies of
    /// `bytes` in all on `stage`'s stream.
    fn upload(n: u32, stage: StageId, pieces: u64, bytes: u64) -> Mirror {
        Mirror {
            space: BufferSpace::Device(n),
            transfer: Transfer {
                direction: Direction::HostToDevice,
                stage,
                pieces,
                bytes,
            },
        }
    }
}

/// How long a tensor's buffers hold one frame's data, which decides who owns them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lifetime {
    /// From the frame's first packet until the sink has read it, or until the GPU work queued
    /// on the slot's streams has run: the source tensor, the sinks, and every tensor a GPU
    /// stage writes or reads. Each slot has its own buffer (and mirror).
    Slot,
    /// Only while the frame's stages run: written and read by CPU stages alone, in host
    /// memory, and read by no sink. The frames in flight share these buffers: the executor
    /// binds a set of them to a frame at its first launch and takes it back once the frame's
    /// stages have ended, most recently returned first.
    Stages,
    /// For the whole run: a constant tensor, filled before the first frame and never written
    /// again. One buffer (and mirror) per pipeline, read by every frame.
    Run,
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
    /// How long its buffers hold a frame's data.
    pub lifetime: Lifetime,
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
            Producer::Constant => {
                edges.push(constant_edge(graph, id, devices)?);
                continue;
            }
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
                    lifetime: if writer.is_some() && !graph.sinks.contains(&id) {
                        Lifetime::Stages
                    } else {
                        Lifetime::Slot
                    },
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
                        mirror: Some(Mirror::upload(n, reader, pieces, tensor.bytes)),
                        lifetime: Lifetime::Slot,
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
                    lifetime: Lifetime::Slot,
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

/// The edge of constant tensor `id`: host memory, pinned with a device mirror when stages on a
/// GPU read it (all on one GPU), uploaded once before the run by the first of them.
fn constant_edge(
    graph: &Graph,
    id: TensorId,
    devices: &[Device],
) -> Result<PlannedEdge, PlanError> {
    let mut gpu_readers = graph.consumers(id).filter_map(|s| match devices[s.0] {
        Device::Gpu(n) => Some((s, n)),
        Device::Cpu => None,
    });
    let Some((first, n)) = gpu_readers.next() else {
        return Ok(PlannedEdge {
            tensor: id,
            space: BufferSpace::Host,
            mirror: None,
            lifetime: Lifetime::Run,
        });
    };
    if let Some((other, m)) = gpu_readers.find(|&(_, m)| m != n) {
        return Err(PlanError::Unsupported {
            tensor: graph.tensor(id).name.clone(),
            why: format!(
                "the constant is read on gpu:{n} by {} and on gpu:{m} by {}; a constant is uploaded to one GPU",
                graph.stage(first).name,
                graph.stage(other).name
            ),
        });
    }
    Ok(PlannedEdge {
        tensor: id,
        space: BufferSpace::PinnedHost(n),
        mirror: Some(Mirror::upload(n, first, 1, graph.tensor(id).bytes)),
        lifetime: Lifetime::Run,
    })
}

/// Memory a buffer set takes: `blocks` blocks of `block_bytes` in `space`, under `name`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Demand {
    /// A name for messages: a pool's name, or what else the run holds (its scene frames).
    pub name: String,
    /// Where it lives.
    pub space: BufferSpace,
    /// Size of each block.
    pub block_bytes: u64,
    /// Number of blocks.
    pub blocks: u64,
}

impl Demand {
    /// What `pool` takes.
    pub fn of_pool(pool: &PoolSpec) -> Demand {
        Demand {
            name: pool.name.clone(),
            space: pool.space,
            block_bytes: pool.block_bytes,
            blocks: pool.blocks as u64,
        }
    }

    /// Its bytes, or an error naming it when they overflow 64 bits.
    pub fn bytes(&self) -> Result<u64, PlanError> {
        self.block_bytes
            .checked_mul(self.blocks)
            .ok_or_else(|| PlanError::MemoryOverflow {
                what: format!(
                    "pool {} ({} blocks of {} bytes)",
                    self.name, self.blocks, self.block_bytes
                ),
            })
    }
}

/// Bytes needed in each kind of memory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemoryNeed {
    /// Pageable host memory.
    pub host: u64,
    /// Page-locked host memory, all GPUs together (it is host memory too).
    pub pinned: u64,
    /// Memory on each GPU.
    pub device: BTreeMap<u32, u64>,
}

impl MemoryNeed {
    /// All host memory, pageable and pinned.
    pub fn host_total(&self) -> u64 {
        self.host.saturating_add(self.pinned)
    }
}

/// Host memory, with where the figure came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostMemory {
    /// Bytes.
    pub bytes: u64,
    /// Where the figure came from, for messages: `MemAvailable in /proc/meminfo`.
    pub measured: String,
}

/// What the machine has for a plan's pools.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemoryAvailable {
    /// Host memory; `None` when it cannot be read (the host check is skipped).
    pub host: Option<HostMemory>,
    /// Each GPU's memory, where known (a GPU not listed is not checked).
    pub device: BTreeMap<u32, u64>,
}

impl MemoryAvailable {
    /// This machine's host memory: `MemAvailable` from `/proc/meminfo`, else `MemTotal`, else
    /// the physical pages `sysconf` reports. No GPU is listed: see [`Self::with_gpu`].
    pub fn probe() -> MemoryAvailable {
        let meminfo = std::path::Path::new("/proc/meminfo");
        let from_meminfo = crate::os::files::read_text_bounded(
            meminfo,
            crate::os::files::MAX_PROC_BYTES,
            "memory information",
        )
        .ok()
        .and_then(|text| host_from_meminfo(&text));
        let host = from_meminfo.or_else(|| {
            use nix::unistd::{SysconfVar, sysconf};
            let value = |var| sysconf(var).ok().flatten().unwrap_or(0);
            let (pages, page) = (value(SysconfVar::_PHYS_PAGES), value(SysconfVar::PAGE_SIZE));
            (pages > 0 && page > 0).then(|| HostMemory {
                bytes: (pages as u64).saturating_mul(page as u64),
                measured: "physical memory (sysconf)".into(),
            })
        });
        MemoryAvailable {
            host,
            device: BTreeMap::new(),
        }
    }

    /// Also checks GPU `ordinal`, which has `bytes` of memory.
    pub fn with_gpu(mut self, ordinal: u32, bytes: u64) -> MemoryAvailable {
        self.device.insert(ordinal, bytes);
        self
    }
}

/// Host memory from `/proc/meminfo`'s text: `MemAvailable` (what can be allocated without
/// swapping), else `MemTotal` (kernels before 3.14).
pub fn host_from_meminfo(text: &str) -> Option<HostMemory> {
    let field = |name: &str| {
        text.lines().find_map(|line| {
            let rest = line.strip_prefix(name)?.strip_prefix(':')?;
            let kib: u64 = rest.trim().strip_suffix("kB")?.trim().parse().ok()?;
            Some(kib.saturating_mul(1024))
        })
    };
    let (bytes, name) = match field("MemAvailable") {
        Some(b) => (b, "MemAvailable"),
        None => (field("MemTotal")?, "MemTotal"),
    };
    Some(HostMemory {
        bytes,
        measured: format!("{name} in /proc/meminfo"),
    })
}

/// Adds up `demands` per kind of memory, with checked arithmetic, and refuses when a kind needs
/// more than `available` has: host memory (pageable and pinned together) against
/// [`MemoryAvailable::host`], each GPU's against [`MemoryAvailable::device`]. The error names
/// the need, what is available and where that figure came from, and the largest demands.
pub fn check_fits(
    demands: &[Demand],
    available: &MemoryAvailable,
) -> Result<MemoryNeed, PlanError> {
    let mut need = MemoryNeed::default();
    let overflow = |what: &str| PlanError::MemoryOverflow { what: what.into() };
    for d in demands {
        let bytes = d.bytes()?;
        let sum = match d.space {
            BufferSpace::Host => &mut need.host,
            BufferSpace::PinnedHost(_) => &mut need.pinned,
            BufferSpace::Device(n) => need.device.entry(n).or_default(),
        };
        *sum = sum
            .checked_add(bytes)
            .ok_or_else(|| overflow(&format!("the total of the {} pools", d.space)))?;
    }
    let host_total = need
        .host
        .checked_add(need.pinned)
        .ok_or_else(|| overflow("the total of the host and pinned pools"))?;
    if let Some(host) = &available.host
        && host_total > host.bytes
    {
        return Err(PlanError::OutOfMemory {
            space: "host memory".into(),
            need: host_total,
            split: format!(
                "pageable {}, pinned {}",
                human_bytes(need.host),
                human_bytes(need.pinned)
            ),
            available: host.bytes,
            measured: host.measured.clone(),
            largest: largest(demands, |s| s.is_host()),
        });
    }
    for (&n, &bytes) in &need.device {
        if let Some(&has) = available.device.get(&n)
            && bytes > has
        {
            return Err(PlanError::OutOfMemory {
                space: format!("memory on gpu:{n}"),
                need: bytes,
                split: "device pools".into(),
                available: has,
                measured: "the device's total memory".into(),
                largest: largest(demands, |s| s == BufferSpace::Device(n)),
            });
        }
    }
    Ok(need)
}

/// The three largest demands in the spaces `keep` accepts, for an error message.
fn largest(demands: &[Demand], keep: impl Fn(BufferSpace) -> bool) -> String {
    let mut kept: Vec<&Demand> = demands.iter().filter(|d| keep(d.space)).collect();
    kept.sort_by_key(|d| std::cmp::Reverse(d.block_bytes.saturating_mul(d.blocks)));
    kept.iter()
        .take(3)
        .map(|d| {
            format!(
                "{} {} ({} x {} in {})",
                d.name,
                human_bytes(d.block_bytes.saturating_mul(d.blocks)),
                d.blocks,
                human_bytes(d.block_bytes),
                d.space
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn demand(name: &str, space: BufferSpace, block_bytes: u64, blocks: u64) -> Demand {
        Demand {
            name: name.into(),
            space,
            block_bytes,
            blocks,
        }
    }

    fn host(bytes: u64) -> MemoryAvailable {
        MemoryAvailable {
            host: Some(HostMemory {
                bytes,
                measured: "a test figure".into(),
            }),
            device: BTreeMap::new(),
        }
    }

    #[test]
    fn the_need_is_added_up_per_space() {
        let demands = [
            demand("a", BufferSpace::Host, 100, 4),
            demand("b", BufferSpace::PinnedHost(0), 10, 4),
            demand("c", BufferSpace::Device(0), 1000, 2),
            demand("d", BufferSpace::Device(1), 1, 1),
        ];
        let need = check_fits(&demands, &host(440)).unwrap();
        assert_eq!((need.host, need.pinned, need.host_total()), (400, 40, 440));
        assert_eq!(need.device, BTreeMap::from([(0, 2000), (1, 1)]));
    }

    #[test]
    fn pinned_memory_counts_against_the_host() {
        let demands = [
            demand("frame", BufferSpace::Host, 300, 1),
            demand("map.mirror", BufferSpace::PinnedHost(0), 200, 2),
        ];
        let err = check_fits(&demands, &host(600)).unwrap_err();
        assert!(matches!(
            err,
            PlanError::OutOfMemory {
                need: 700,
                available: 600,
                ..
            }
        ));
        let text = err.to_string();
        for want in [
            "needs 700 B of host memory",
            "pageable 300 B, pinned 400 B",
            "600 B is available (a test figure)",
            "map.mirror 400 B (2 x 200 B in pinned(gpu:0))",
            "--shape",
            "--slots",
        ] {
            assert!(text.contains(want), "{want:?} not in: {text}");
        }
    }

    #[test]
    fn absurd_shapes_are_an_error_not_an_overflow() {
        let huge = demand("map", BufferSpace::Host, u64::MAX / 2, 4);
        let err = check_fits(&[huge], &MemoryAvailable::default()).unwrap_err();
        assert!(matches!(err, PlanError::MemoryOverflow { .. }), "{err:?}");
        assert!(err.to_string().contains("pool map"), "{err}");
        let two = [
            demand("a", BufferSpace::Host, u64::MAX / 2, 1),
            demand("b", BufferSpace::Host, u64::MAX / 2 + 2, 1),
        ];
        let err = check_fits(&two, &MemoryAvailable::default()).unwrap_err();
        assert!(matches!(err, PlanError::MemoryOverflow { .. }), "{err:?}");
    }

    #[test]
    fn a_gpu_is_checked_when_its_memory_is_known() {
        let demands = [demand("map", BufferSpace::Device(0), 1 << 30, 4)];
        assert!(
            check_fits(&demands, &host(0)).is_ok(),
            "gpu:0's memory is not known"
        );
        let err = check_fits(&demands, &host(0).with_gpu(0, 1 << 31)).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("needs 4.0 GiB of memory on gpu:0")
                && text.contains("2.0 GiB is available"),
            "{text}"
        );
    }

    #[test]
    fn meminfo_gives_available_else_total() {
        let text = "MemTotal:       16303296 kB\nMemFree:  100 kB\nMemAvailable:   12000000 kB\n";
        let host = host_from_meminfo(text).unwrap();
        assert_eq!(host.bytes, 12_000_000 * 1024);
        assert_eq!(host.measured, "MemAvailable in /proc/meminfo");
        let old = host_from_meminfo("MemTotal: 2048 kB\n").unwrap();
        assert_eq!(
            (old.bytes, old.measured.as_str()),
            (2048 * 1024, "MemTotal in /proc/meminfo")
        );
        assert_eq!(host_from_meminfo("nothing here"), None);
    }
}

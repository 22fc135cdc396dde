//! GPU telemetry while a run goes: utilisation, memory, clocks and power of each GPU the run
//! uses, and every process seen on those GPUs, read from NVML by one background thread and
//! summarised for the run report.
//!
//! # Use
//! [`Sampler::start`] with the CUDA ordinals the run places stages on, run, then
//! [`Sampler::stop`] for the [`Telemetry`] summary (`Serialize` for the JSON report, `Display`
//! for the printed one).
//!
//! # What it guarantees
//! - Nothing here panics, and the caller is never blocked beyond [`Sampler::start`]'s NVML
//!   initialisation and [`Sampler::stop`] joining the sampling thread, which notices the stop at
//!   once between samples (one sampling pass over the devices, a few NVML calls each, is the
//!   most it can be in the middle of).
//! - Without NVML (no NVIDIA driver, as on a build machine) `start` spawns no thread and `stop`
//!   returns [`Telemetry::available`] `false` with [`Telemetry::reason`] saying why
//!   (`NVML not available: ...`).
//! - CUDA ordinals are mapped to NVML devices by UUID, then PCI bus id (NVML's indices need not
//!   follow CUDA's ordinals, e.g. under `CUDA_VISIBLE_DEVICES`), and only then by index, with
//!   a warning in [`Telemetry::warnings`]; [`DeviceTelemetry::matched_by`] says which.
//! - A reading NVML cannot give (power on some boards, utilisation with MIG) leaves its figure
//!   `None` and its error in [`DeviceTelemetry::errors`]; the other figures are still kept.
//! - Each process on a device is reported once, with its role: this process (`self`), one it
//!   started directly or indirectly (`child`), or a co-tenant the user did not start
//!   (`other`).
//!
//! The summarising (means, extremes, distinct processes) is plain code fed with samples, apart
//! from the NVML calls, and tested without a GPU.
//!
//! Long (953 lines of code, 326 of tests): the summary types, the pure summarising and the NVML
//! sampler are separate sections below and the next to split.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use nvml_wrapper::enum_wrappers::device::Clock;
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::struct_wrappers::device::ProcessInfo;
use nvml_wrapper::{Device, Nvml};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::cuda::probe;

/// The sampling interval to use when the caller has no reason to choose another: 100 ms.
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(100);

/// The shortest interval [`Sampler::start`] honours; shorter ones are raised to it, so that
/// the sampler never spins.
pub const MIN_INTERVAL: Duration = Duration::from_millis(10);

/// Distinct errors kept per device.
const MAX_ERRORS: usize = 8;

/// Linux's largest possible pid (`PID_MAX_LIMIT`, 2^22); a larger one in a process list means
/// NVML and this library disagree on the list's layout.
const PID_MAX_LIMIT: u32 = 1 << 22;

/// How far up the parent chain a process is followed to find whether this process started it.
const MAX_ANCESTRY: usize = 64;

// ---------------------------------------------------------------------------------------------
// The summary
// ---------------------------------------------------------------------------------------------

/// What the sampler saw over a run. Plain data: `Serialize` is the run report's `gpu_telemetry`
/// object, `Display` a few lines per device for the printed report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Telemetry {
    /// Whether NVML could be used. When `false`, `reason` says why and `devices` is empty.
    pub available: bool,
    /// Why there is no telemetry (e.g. `NVML not available: ...`); `None` when `available`.
    pub reason: Option<String>,
    /// The sampling interval, in milliseconds.
    pub interval_ms: f64,
    /// Seconds from the start of sampling to its stop (0 when not `available`).
    pub duration_s: f64,
    /// One entry per distinct ordinal given to [`Sampler::start`], in that order.
    pub devices: Vec<DeviceTelemetry>,
    /// Problems that did not stop sampling, e.g. a device found only by its NVML index.
    pub warnings: Vec<String>,
}

/// How a CUDA ordinal was matched to an NVML device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MatchedBy {
    /// By the device's UUID, as CUDA reports it: always the right device.
    Uuid,
    /// By the device's PCI bus id: the right physical GPU (for a MIG instance, its parent).
    PciBusId,
    /// By NVML index = CUDA ordinal: right only when CUDA shows all devices in NVML's order.
    Index,
}

impl fmt::Display for MatchedBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MatchedBy::Uuid => "uuid",
            MatchedBy::PciBusId => "pci bus id",
            MatchedBy::Index => "index",
        })
    }
}

/// One GPU's figures over the run. Means are over the samples in which NVML gave that
/// reading; a figure NVML never gave is `None` (its error is in `errors`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeviceTelemetry {
    /// The CUDA ordinal (`gpu:N`).
    pub ordinal: u32,
    /// How the ordinal was matched to an NVML device; `None` when no device was found (the
    /// reason is in `errors`, and there are no samples).
    pub matched_by: Option<MatchedBy>,
    /// NVML's index of the device.
    pub nvml_index: Option<u32>,
    /// The device's name, e.g. `NVIDIA H200`.
    pub name: Option<String>,
    /// The device's UUID as NVML reports it (`GPU-...`).
    pub uuid: Option<String>,
    /// Sampling passes over this device.
    pub samples: u64,
    /// GPU utilisation (% of time a kernel ran), mean.
    pub gpu_util_mean_pct: Option<f64>,
    /// GPU utilisation, largest reading.
    pub gpu_util_max_pct: Option<u32>,
    /// Memory-controller utilisation (% of time device memory was read or written), mean.
    pub mem_util_mean_pct: Option<f64>,
    /// Memory-controller utilisation, largest reading.
    pub mem_util_max_pct: Option<u32>,
    /// Device memory in use by all processes, smallest reading.
    pub memory_used_min_bytes: Option<u64>,
    /// Device memory in use by all processes, largest reading.
    pub memory_used_max_bytes: Option<u64>,
    /// The device's memory.
    pub memory_total_bytes: Option<u64>,
    /// SM clock, lowest reading, MHz.
    pub sm_clock_min_mhz: Option<u32>,
    /// SM clock, highest reading, MHz.
    pub sm_clock_max_mhz: Option<u32>,
    /// Memory clock, lowest reading, MHz.
    pub mem_clock_min_mhz: Option<u32>,
    /// Memory clock, highest reading, MHz.
    pub mem_clock_max_mhz: Option<u32>,
    /// Power draw, mean, watts.
    pub power_mean_w: Option<f64>,
    /// Power draw, largest reading, watts.
    pub power_max_w: Option<f64>,
    /// Every distinct process seen on the device: this one first, then its children, then
    /// the others, each by pid.
    pub processes: Vec<GpuProcess>,
    /// Distinct errors from NVML while sampling (at most 8), e.g.
    /// `power_usage: the requested operation is not available on the target device`.
    pub errors: Vec<String>,
}

/// Whose a process on the GPU is.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub enum ProcessRole {
    /// This process (`std::process::id()`).
    #[serde(rename = "self")]
    Ours,
    /// A process this one started, directly or further down.
    #[serde(rename = "child")]
    Child,
    /// Any other process: a co-tenant the user did not start with this run.
    #[serde(rename = "other")]
    Other,
}

impl fmt::Display for ProcessRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ProcessRole::Ours => "self",
            ProcessRole::Child => "child",
            ProcessRole::Other => "other",
        })
    }
}

/// One process seen on a GPU during the run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GpuProcess {
    /// Its pid, as NVML reports it. In a container with its own pid namespace NVML may
    /// report host pids, which this process cannot see: such a process has no `name` and the
    /// role `other`.
    pub pid: u32,
    /// Its name (`/proc/<pid>/comm`), when it could be read when first seen.
    pub name: Option<String>,
    /// Whose it is, decided when first seen.
    pub role: ProcessRole,
    /// Whether it had a compute context (CUDA) on the device.
    pub compute: bool,
    /// Whether it had a graphics context on the device.
    pub graphics: bool,
    /// The most device memory NVML reported for it; `None` when NVML never could.
    pub max_used_memory_bytes: Option<u64>,
    /// In how many samples it appeared.
    pub samples: u64,
}

impl Telemetry {
    /// A summary with no telemetry, saying why; for callers that never start a [`Sampler`]
    /// (a run with no GPU stage) as well as for [`Sampler::stop`].
    pub fn unavailable(reason: impl Into<String>) -> Telemetry {
        Telemetry {
            available: false,
            reason: Some(reason.into()),
            interval_ms: 0.0,
            duration_s: 0.0,
            devices: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// Processes on the sampled GPUs that this run did not start (role `other`), with their
    /// device's ordinal.
    pub fn co_tenants(&self) -> impl Iterator<Item = (u32, &GpuProcess)> {
        self.devices.iter().flat_map(|d| {
            d.processes
                .iter()
                .filter(|p| p.role == ProcessRole::Other)
                .map(move |p| (d.ordinal, p))
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Display
// ---------------------------------------------------------------------------------------------

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / f64::from(1u32 << 30))
}

fn opt<T>(v: Option<T>, f: impl FnOnce(T) -> String) -> String {
    v.map_or_else(|| "n/a".to_string(), f)
}

fn range_mhz(min: Option<u32>, max: Option<u32>) -> String {
    match (min, max) {
        (Some(lo), Some(hi)) if lo != hi => format!("{lo}-{hi} MHz"),
        (Some(v), _) | (None, Some(v)) => format!("{v} MHz"),
        (None, None) => "n/a".into(),
    }
}

fn mean_max(mean: Option<f64>, max: Option<u32>) -> String {
    match (mean, max) {
        (Some(mean), Some(max)) => format!("mean {mean:.0}% max {max}%"),
        _ => "n/a".into(),
    }
}

/// Processes listed per device in the printed report; the rest are counted.
const LISTED_PROCESSES: usize = 6;

impl fmt::Display for DeviceTelemetry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "gpu:{}", self.ordinal)?;
        if let Some(name) = &self.name {
            write!(f, " {name}")?;
        }
        match (self.matched_by, self.nvml_index) {
            (Some(by), Some(i)) => write!(f, " (NVML {i}, by {by})")?,
            (Some(by), None) => write!(f, " (by {by})")?,
            (None, _) => {
                writeln!(f, ": no NVML device")?;
                for e in &self.errors {
                    writeln!(f, "  {e}")?;
                }
                return Ok(());
            }
        }
        writeln!(f, ": {} samples", self.samples)?;
        let power = match (self.power_mean_w, self.power_max_w) {
            (Some(mean), Some(max)) => format!("mean {mean:.0} W max {max:.0} W"),
            _ => "n/a".into(),
        };
        writeln!(
            f,
            "  utilisation {}, memory controller {}, power {}",
            mean_max(self.gpu_util_mean_pct, self.gpu_util_max_pct),
            mean_max(self.mem_util_mean_pct, self.mem_util_max_pct),
            power
        )?;
        writeln!(
            f,
            "  memory used max {} of {}, SM clock {}, memory clock {}",
            opt(self.memory_used_max_bytes, gib),
            opt(self.memory_total_bytes, gib),
            range_mhz(self.sm_clock_min_mhz, self.sm_clock_max_mhz),
            range_mhz(self.mem_clock_min_mhz, self.mem_clock_max_mhz)
        )?;
        if !self.processes.is_empty() {
            write!(f, "  processes:")?;
            for (i, p) in self.processes.iter().take(LISTED_PROCESSES).enumerate() {
                let sep = if i == 0 { " " } else { "; " };
                write!(
                    f,
                    "{sep}{} {} {}",
                    p.role,
                    p.pid,
                    p.name.as_deref().unwrap_or("?")
                )?;
                if let Some(m) = p.max_used_memory_bytes {
                    write!(f, " {}", gib(m))?;
                }
            }
            if self.processes.len() > LISTED_PROCESSES {
                write!(f, "; {} more", self.processes.len() - LISTED_PROCESSES)?;
            }
            writeln!(f)?;
        }
        let others = self
            .processes
            .iter()
            .filter(|p| p.role == ProcessRole::Other)
            .count();
        if others > 0 {
            let plural = if others == 1 { "" } else { "es" };
            writeln!(
                f,
                "  warning: {others} process{plural} not started by this run shared the GPU"
            )?;
        }
        Ok(())
    }
}

impl fmt::Display for Telemetry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.available {
            let reason = self.reason.as_deref().unwrap_or("unknown reason");
            return writeln!(f, "GPU telemetry: none ({reason})");
        }
        writeln!(
            f,
            "GPU telemetry: every {:.0} ms over {:.1} s",
            self.interval_ms, self.duration_s
        )?;
        for d in &self.devices {
            write!(f, "{d}")?;
        }
        for w in &self.warnings {
            writeln!(f, "warning: {w}")?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Samples and their summary (no NVML here)
// ---------------------------------------------------------------------------------------------

/// One sampling pass over one device: each reading NVML gave, and the errors of those it did
/// not.
#[derive(Clone, Debug, Default, PartialEq)]
struct Sample {
    gpu_util: Option<u32>,
    mem_util: Option<u32>,
    mem_used: Option<u64>,
    mem_total: Option<u64>,
    sm_clock: Option<u32>,
    mem_clock: Option<u32>,
    power_mw: Option<u32>,
    processes: Vec<ProcessSample>,
    errors: Vec<String>,
}

/// One process in one sample, its name and role already resolved.
#[derive(Clone, Debug, PartialEq)]
struct ProcessSample {
    pid: u32,
    name: Option<String>,
    role: ProcessRole,
    compute: bool,
    graphics: bool,
    used_memory: Option<u64>,
}

/// Count, sum and extremes of one reading.
#[derive(Clone, Copy, Debug, Default)]
struct Stat {
    n: u64,
    sum: f64,
    min: Option<u64>,
    max: Option<u64>,
}

impl Stat {
    fn add(&mut self, v: Option<u64>) {
        let Some(v) = v else { return };
        self.n += 1;
        self.sum += v as f64;
        self.min = Some(self.min.map_or(v, |m| m.min(v)));
        self.max = Some(self.max.map_or(v, |m| m.max(v)));
    }

    fn mean(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum / self.n as f64)
    }

    fn min_u32(&self) -> Option<u32> {
        self.min.map(|v| u32::try_from(v).unwrap_or(u32::MAX))
    }

    fn max_u32(&self) -> Option<u32> {
        self.max.map(|v| u32::try_from(v).unwrap_or(u32::MAX))
    }
}

/// Accumulates one device's samples.
#[derive(Debug, Default)]
struct Summary {
    samples: u64,
    gpu_util: Stat,
    mem_util: Stat,
    mem_used: Stat,
    mem_total: Option<u64>,
    sm_clock: Stat,
    mem_clock: Stat,
    power_mw: Stat,
    processes: BTreeMap<u32, GpuProcess>,
    errors: Vec<String>,
}

impl Summary {
    fn add(&mut self, s: &Sample) {
        self.samples += 1;
        self.gpu_util.add(s.gpu_util.map(u64::from));
        self.mem_util.add(s.mem_util.map(u64::from));
        self.mem_used.add(s.mem_used);
        if s.mem_total.is_some() {
            self.mem_total = s.mem_total;
        }
        self.sm_clock.add(s.sm_clock.map(u64::from));
        self.mem_clock.add(s.mem_clock.map(u64::from));
        self.power_mw.add(s.power_mw.map(u64::from));
        let mut counted: Vec<u32> = Vec::with_capacity(s.processes.len());
        for p in &s.processes {
            let entry = self.processes.entry(p.pid).or_insert_with(|| GpuProcess {
                pid: p.pid,
                name: p.name.clone(),
                role: p.role,
                compute: false,
                graphics: false,
                max_used_memory_bytes: None,
                samples: 0,
            });
            if entry.name.is_none() {
                entry.name.clone_from(&p.name);
            }
            entry.compute |= p.compute;
            entry.graphics |= p.graphics;
            if let Some(m) = p.used_memory {
                entry.max_used_memory_bytes =
                    Some(entry.max_used_memory_bytes.map_or(m, |x| x.max(m)));
            }
            if !counted.contains(&p.pid) {
                counted.push(p.pid);
                entry.samples += 1;
            }
        }
        for e in &s.errors {
            self.note_error(e);
        }
    }

    /// Keeps `e` unless it is already kept or [`MAX_ERRORS`] are.
    fn note_error(&mut self, e: &str) {
        if self.errors.len() < MAX_ERRORS && !self.errors.iter().any(|k| k == e) {
            self.errors.push(e.to_string());
        }
    }

    fn finish(self, id: DeviceId) -> DeviceTelemetry {
        let mut processes: Vec<GpuProcess> = self.processes.into_values().collect();
        processes.sort_by_key(|p| (p.role, p.pid));
        let watts = |mw: u64| mw as f64 / 1000.0;
        DeviceTelemetry {
            ordinal: id.ordinal,
            matched_by: id.matched_by,
            nvml_index: id.nvml_index,
            name: id.name,
            uuid: id.uuid,
            samples: self.samples,
            gpu_util_mean_pct: self.gpu_util.mean(),
            gpu_util_max_pct: self.gpu_util.max_u32(),
            mem_util_mean_pct: self.mem_util.mean(),
            mem_util_max_pct: self.mem_util.max_u32(),
            memory_used_min_bytes: self.mem_used.min,
            memory_used_max_bytes: self.mem_used.max,
            memory_total_bytes: self.mem_total,
            sm_clock_min_mhz: self.sm_clock.min_u32(),
            sm_clock_max_mhz: self.sm_clock.max_u32(),
            mem_clock_min_mhz: self.mem_clock.min_u32(),
            mem_clock_max_mhz: self.mem_clock.max_u32(),
            power_mean_w: self.power_mw.mean().map(|mw| mw / 1000.0),
            power_max_w: self.power_mw.max.map(watts),
            processes,
            errors: self.errors,
        }
    }
}

/// Which NVML device a CUDA ordinal is, as far as it was found.
#[derive(Clone, Debug, Default, PartialEq)]
struct DeviceId {
    ordinal: u32,
    matched_by: Option<MatchedBy>,
    nvml_index: Option<u32>,
    name: Option<String>,
    uuid: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Processes: names and roles
// ---------------------------------------------------------------------------------------------

/// `pid`'s role relative to `own`, following parents through `parent_of` (`None`: unknown or
/// gone) at most [`MAX_ANCESTRY`] steps; stops at a loop or the root.
fn classify(pid: u32, own: u32, parent_of: impl Fn(u32) -> Option<u32>) -> ProcessRole {
    if pid == own {
        return ProcessRole::Ours;
    }
    let mut p = pid;
    for _ in 0..MAX_ANCESTRY {
        match parent_of(p) {
            Some(parent) if parent == own => return ProcessRole::Child,
            Some(parent) if parent != 0 && parent != p => p = parent,
            _ => break,
        }
    }
    ProcessRole::Other
}

/// The parent of `pid` from `/proc/<pid>/stat`; `None` when it cannot be read (gone, another
/// pid namespace, not Linux).
fn proc_parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat_parent(&stat)
}

/// The parent pid in a `/proc/<pid>/stat` line: `pid (comm) state ppid ...`, where comm may
/// itself hold spaces and parentheses, so the fields after the last `)` are read.
fn parse_stat_parent(stat: &str) -> Option<u32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// `pid`'s name from `/proc/<pid>/comm`.
fn proc_name(pid: u32) -> Option<String> {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    let name = comm.trim_end_matches('\n');
    (!name.is_empty()).then(|| name.to_string())
}

/// Names and roles of the pids seen so far, each looked up once.
struct ProcessBook {
    own: u32,
    known: HashMap<u32, (Option<String>, ProcessRole)>,
}

impl ProcessBook {
    fn new() -> Self {
        ProcessBook {
            own: std::process::id(),
            known: HashMap::new(),
        }
    }

    fn resolve(&mut self, pid: u32) -> (Option<String>, ProcessRole) {
        let own = self.own;
        self.known
            .entry(pid)
            .or_insert_with(|| (proc_name(pid), classify(pid, own, proc_parent)))
            .clone()
    }
}

// ---------------------------------------------------------------------------------------------
// NVML
// ---------------------------------------------------------------------------------------------

/// Finds CUDA device `ordinal` among NVML's devices (see the module's guarantees).
fn find_device<'n>(
    nvml: &'n Nvml,
    ordinal: u32,
    warnings: &mut Vec<String>,
) -> (DeviceId, Option<Device<'n>>, Option<String>) {
    let mut id = DeviceId {
        ordinal,
        ..DeviceId::default()
    };
    let why_index = match probe::nvml_identity(ordinal) {
        Ok((uuid, pci)) => {
            if let Some(d) = uuid
                .as_ref()
                .and_then(|u| nvml.device_by_uuid(u.as_str()).ok())
            {
                id.matched_by = Some(MatchedBy::Uuid);
                return describe_device(id, d);
            }
            if let Some(d) = pci
                .as_ref()
                .and_then(|b| nvml.device_by_pci_bus_id(b.as_str()).ok())
            {
                id.matched_by = Some(MatchedBy::PciBusId);
                return describe_device(id, d);
            }
            format!(
                "no NVML device has its UUID ({}) or PCI bus id ({})",
                uuid.as_deref().unwrap_or("unknown"),
                pci.as_deref().unwrap_or("unknown")
            )
        }
        Err(e) => format!("CUDA could not identify it ({e})"),
    };
    match nvml.device_by_index(ordinal) {
        Ok(d) => {
            warnings.push(format!(
                "gpu:{ordinal}: {why_index}; assuming NVML device {ordinal}, which is right \
                 only when CUDA shows every device in NVML's order (no CUDA_VISIBLE_DEVICES)"
            ));
            id.matched_by = Some(MatchedBy::Index);
            describe_device(id, d)
        }
        Err(e) => {
            let error =
                format!("gpu:{ordinal}: {why_index}, and NVML has no device {ordinal} ({e})");
            (id, None, Some(error))
        }
    }
}

fn describe_device(
    mut id: DeviceId,
    d: Device<'_>,
) -> (DeviceId, Option<Device<'_>>, Option<String>) {
    id.nvml_index = d.index().ok();
    id.name = d.name().ok();
    id.uuid = d.uuid().ok();
    (id, Some(d), None)
}

fn not_supported(e: &NvmlError) -> bool {
    matches!(e, NvmlError::NotSupported)
}

/// Adds NVML's process list to `out`, merging a pid already there.
fn add_processes(
    out: &mut Vec<ProcessSample>,
    list: Vec<ProcessInfo>,
    graphics: bool,
    book: &mut ProcessBook,
) {
    for info in list {
        let used = match info.used_gpu_memory {
            UsedGpuMemory::Used(b) => Some(b),
            UsedGpuMemory::Unavailable => None,
        };
        if let Some(p) = out.iter_mut().find(|p| p.pid == info.pid) {
            p.compute |= !graphics;
            p.graphics |= graphics;
            p.used_memory = match (p.used_memory, used) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
            continue;
        }
        let (name, role) = book.resolve(info.pid);
        out.push(ProcessSample {
            pid: info.pid,
            name,
            role,
            compute: !graphics,
            graphics,
            used_memory: used,
        });
    }
}

/// Whether a process list can be trusted: a pid beyond Linux's limit or a process using more
/// memory than the device has means NVML wrote a layout this library does not expect.
fn plausible(processes: &[ProcessSample], total: Option<u64>) -> bool {
    processes.iter().all(|p| {
        p.pid != 0
            && p.pid <= PID_MAX_LIMIT
            && match (p.used_memory, total) {
                (Some(used), Some(total)) => used <= total,
                _ => true,
            }
    })
}

/// One sampling pass over one device.
fn read_sample(d: &Device<'_>, book: &mut ProcessBook) -> Sample {
    let mut s = Sample::default();
    match d.utilization_rates() {
        Ok(u) => {
            s.gpu_util = Some(u.gpu);
            s.mem_util = Some(u.memory);
        }
        Err(e) => s.errors.push(format!("utilization_rates: {e}")),
    }
    match d.memory_info() {
        Ok(m) => {
            s.mem_used = Some(m.used);
            s.mem_total = Some(m.total);
        }
        Err(e) => s.errors.push(format!("memory_info: {e}")),
    }
    match d.clock_info(Clock::SM) {
        Ok(c) => s.sm_clock = Some(c),
        Err(e) => s.errors.push(format!("clock_info(SM): {e}")),
    }
    match d.clock_info(Clock::Memory) {
        Ok(c) => s.mem_clock = Some(c),
        Err(e) => s.errors.push(format!("clock_info(Memory): {e}")),
    }
    match d.power_usage() {
        Ok(mw) => s.power_mw = Some(mw),
        Err(e) => s.errors.push(format!("power_usage: {e}")),
    }
    let mut processes = Vec::new();
    match d.running_compute_processes() {
        Ok(list) => add_processes(&mut processes, list, false, book),
        Err(e) => s.errors.push(format!("running_compute_processes: {e}")),
    }
    // MPS clients hide behind the MPS server in the list above; NVML lists them here.
    match d.mps_running_compute_processes() {
        Ok(list) => add_processes(&mut processes, list, false, book),
        Err(e) if not_supported(&e) => {}
        Err(e) => s.errors.push(format!("mps_running_compute_processes: {e}")),
    }
    match d.running_graphics_processes() {
        Ok(list) => add_processes(&mut processes, list, true, book),
        Err(e) if not_supported(&e) => {}
        Err(e) => s.errors.push(format!("running_graphics_processes: {e}")),
    }
    if plausible(&processes, s.mem_total) {
        s.processes = processes;
    } else {
        s.errors.push(
            "process lists discarded: implausible pid or memory (NVML's layout differs from \
             nvml-wrapper's)"
                .into(),
        );
    }
    s
}

/// NVML, opened from the libnvidia-ml that `kplace_cuda_libs` found (the driver's, wherever
/// the machine keeps it). Never panics: without the library the error says every place looked
/// at; a panic in nvml-wrapper's initialisation becomes an error too.
pub(crate) fn init_nvml() -> Result<Nvml, String> {
    let found = kplace_cuda_libs::find(kplace_cuda_libs::Library::Nvml);
    let Some(path) = found.path() else {
        return Err(found.not_found_message());
    };
    match catch_unwind(|| Nvml::builder().lib_path(path.as_os_str()).init()) {
        Ok(Ok(nvml)) => Ok(nvml),
        Ok(Err(e)) => Err(format!("{} ({})", e, path.display())),
        Err(panic) => Err(format!(
            "its initialisation panicked: {}",
            panic_text(&*panic)
        )),
    }
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".into()
    }
}

/// The sampling thread: finds the devices, samples them every `interval` until `stop` is
/// disconnected, and summarises.
fn sample_until_stopped(
    nvml: Nvml,
    ordinals: Vec<u32>,
    interval: Duration,
    stop: Receiver<()>,
) -> Telemetry {
    let started = Instant::now();
    let mut warnings = Vec::new();
    let mut targets = Vec::with_capacity(ordinals.len());
    for &ordinal in &ordinals {
        let found = catch_unwind(AssertUnwindSafe(|| {
            find_device(&nvml, ordinal, &mut warnings)
        }));
        let (id, device, error) = found.unwrap_or_else(|panic| {
            let id = DeviceId {
                ordinal,
                ..DeviceId::default()
            };
            let error = format!(
                "gpu:{ordinal}: looking it up panicked: {}",
                panic_text(&*panic)
            );
            (id, None, Some(error))
        });
        let mut summary = Summary::default();
        if let Some(e) = error {
            summary.note_error(&e);
        }
        targets.push((id, device, summary));
    }
    let mut book = ProcessBook::new();
    let mut next = Instant::now();
    loop {
        for (_, device, summary) in targets.iter_mut() {
            let Some(device) = device else { continue };
            match catch_unwind(AssertUnwindSafe(|| read_sample(device, &mut book))) {
                Ok(sample) => summary.add(&sample),
                Err(panic) => {
                    summary.note_error(&format!("sampling panicked: {}", panic_text(&*panic)))
                }
            }
        }
        // Fixed-rate ticks; after a pass longer than the interval, start afresh from now.
        let now = Instant::now();
        next += interval;
        if next < now {
            next = now;
        }
        match stop.recv_timeout(next.saturating_duration_since(now)) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    let duration_s = started.elapsed().as_secs_f64();
    let devices = targets
        .into_iter()
        .map(|(id, _, summary)| summary.finish(id))
        .collect();
    // The devices borrow `nvml`; they are gone, so it is shut down here, on this thread.
    drop(nvml);
    Telemetry {
        available: true,
        reason: None,
        interval_ms: interval.as_secs_f64() * 1e3,
        duration_s,
        devices,
        warnings,
    }
}

// ---------------------------------------------------------------------------------------------
// Sampler
// ---------------------------------------------------------------------------------------------

/// A background sampler of GPU telemetry; see the [module](self) for its guarantees. Dropping
/// it without [`stop`](Self::stop) ends its thread at its next wake-up, unjoined.
#[derive(Debug)]
pub struct Sampler {
    state: State,
}

#[derive(Debug)]
enum State {
    /// No thread: the answer is known.
    Done(Telemetry),
    Running {
        /// Dropped to stop the thread.
        stop: Sender<()>,
        thread: JoinHandle<Telemetry>,
        interval: Duration,
    },
}

impl Sampler {
    /// Starts sampling the CUDA devices `ordinals` (duplicates ignored) every `interval`
    /// (at least [`MIN_INTERVAL`]; [`DEFAULT_INTERVAL`] is the usual choice), the first sample
    /// at once, on one background thread. Never panics and never fails: without NVML, with no
    /// ordinals, or if the thread cannot be spawned, the sampler holds no thread and
    /// [`stop`](Self::stop) says why. Blocks only for NVML's initialisation; mapping ordinals
    /// to devices (which may initialise the CUDA driver) happens on the thread.
    pub fn start(ordinals: &[u32], interval: Duration) -> Sampler {
        let interval = interval.max(MIN_INTERVAL);
        let mut distinct: Vec<u32> = Vec::with_capacity(ordinals.len());
        for &o in ordinals {
            if !distinct.contains(&o) {
                distinct.push(o);
            }
        }
        let done = |reason: String| Sampler {
            state: State::Done(Telemetry {
                interval_ms: interval.as_secs_f64() * 1e3,
                ..Telemetry::unavailable(reason)
            }),
        };
        if distinct.is_empty() {
            return done("no GPU to sample".into());
        }
        let nvml = match init_nvml() {
            Ok(nvml) => nvml,
            Err(e) => return done(format!("NVML not available: {e}")),
        };
        let (stop, stopped) = mpsc::channel();
        let spawned = thread::Builder::new()
            .name("kplace-telemetry".into())
            .spawn(move || sample_until_stopped(nvml, distinct, interval, stopped));
        match spawned {
            Ok(thread) => Sampler {
                state: State::Running {
                    stop,
                    thread,
                    interval,
                },
            },
            Err(e) => done(format!("telemetry thread not started: {e}")),
        }
    }

    /// Stops sampling and returns the summary. Returns as soon as the thread ends its current
    /// pass (it does not wait out the interval); called very soon after `start`, it also waits
    /// for the thread's one-off device lookup (which may initialise the CUDA driver) and first
    /// pass, so every started sampler has at least one sample per device found. Never panics:
    /// a panic on the thread becomes `available: false` with the panic's message.
    pub fn stop(self) -> Telemetry {
        match self.state {
            State::Done(telemetry) => telemetry,
            State::Running {
                stop,
                thread,
                interval,
            } => {
                drop(stop);
                thread.join().unwrap_or_else(|panic| Telemetry {
                    interval_ms: interval.as_secs_f64() * 1e3,
                    ..Telemetry::unavailable(format!(
                        "telemetry thread panicked: {}",
                        panic_text(&*panic)
                    ))
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc(pid: u32, role: ProcessRole, mem: Option<u64>) -> ProcessSample {
        ProcessSample {
            pid,
            name: Some(format!("p{pid}")),
            role,
            compute: true,
            graphics: false,
            used_memory: mem,
        }
    }

    fn sample(util: u32, mem_util: u32, used: u64, sm: u32, power_mw: Option<u32>) -> Sample {
        Sample {
            gpu_util: Some(util),
            mem_util: Some(mem_util),
            mem_used: Some(used),
            mem_total: Some(1000),
            sm_clock: Some(sm),
            mem_clock: Some(2619),
            power_mw,
            processes: Vec::new(),
            errors: Vec::new(),
        }
    }

    fn id(ordinal: u32) -> DeviceId {
        DeviceId {
            ordinal,
            matched_by: Some(MatchedBy::Uuid),
            nvml_index: Some(3),
            name: Some("NVIDIA H200".into()),
            uuid: Some("GPU-00112233-4455-6677-8899-aabbccddeeff".into()),
        }
    }

    #[test]
    fn means_and_extremes_cover_the_readings_given() {
        let mut s = Summary::default();
        s.add(&sample(10, 5, 100, 1400, Some(300_000)));
        s.add(&sample(90, 15, 300, 1980, None));
        let mut gap = sample(0, 0, 0, 0, None);
        gap.gpu_util = None;
        gap.mem_util = None;
        gap.mem_used = None;
        gap.sm_clock = None;
        gap.errors.push("utilization_rates: no data".into());
        s.add(&gap);
        let d = s.finish(id(0));
        assert_eq!(d.samples, 3);
        assert_eq!(d.gpu_util_mean_pct, Some(50.0));
        assert_eq!(d.gpu_util_max_pct, Some(90));
        assert_eq!(d.mem_util_mean_pct, Some(10.0));
        assert_eq!(d.mem_util_max_pct, Some(15));
        assert_eq!(d.memory_used_min_bytes, Some(100));
        assert_eq!(d.memory_used_max_bytes, Some(300));
        assert_eq!(d.memory_total_bytes, Some(1000));
        assert_eq!(
            (d.sm_clock_min_mhz, d.sm_clock_max_mhz),
            (Some(1400), Some(1980))
        );
        assert_eq!(
            (d.mem_clock_min_mhz, d.mem_clock_max_mhz),
            (Some(2619), Some(2619))
        );
        assert_eq!(d.power_mean_w, Some(300.0));
        assert_eq!(d.power_max_w, Some(300.0));
        assert_eq!(d.errors, vec!["utilization_rates: no data".to_string()]);
        assert_eq!(d.ordinal, 0);
        assert_eq!(d.nvml_index, Some(3));
    }

    #[test]
    fn no_readings_leave_every_figure_none() {
        let d = Summary::default().finish(DeviceId::default());
        assert_eq!(d.samples, 0);
        assert_eq!(d.gpu_util_mean_pct, None);
        assert_eq!(d.power_mean_w, None);
        assert_eq!(d.sm_clock_min_mhz, None);
        assert!(d.processes.is_empty());
    }

    #[test]
    fn each_pid_is_reported_once_with_its_largest_memory() {
        let mut s = Summary::default();
        let mut a = sample(1, 1, 1, 1, None);
        let mut g = proc(42, ProcessRole::Other, Some(50));
        g.compute = false;
        g.graphics = true;
        a.processes = vec![
            proc(42, ProcessRole::Other, Some(100)),
            g,
            proc(7, ProcessRole::Ours, None),
        ];
        let mut b = sample(1, 1, 1, 1, None);
        b.processes = vec![
            proc(42, ProcessRole::Other, Some(70)),
            proc(7, ProcessRole::Ours, Some(10)),
            proc(9, ProcessRole::Child, Some(5)),
        ];
        s.add(&a);
        s.add(&b);
        let d = s.finish(id(0));
        let pids: Vec<(u32, ProcessRole)> = d.processes.iter().map(|p| (p.pid, p.role)).collect();
        assert_eq!(
            pids,
            vec![
                (7, ProcessRole::Ours),
                (9, ProcessRole::Child),
                (42, ProcessRole::Other)
            ]
        );
        let other = &d.processes[2];
        assert_eq!(other.max_used_memory_bytes, Some(100));
        assert_eq!(
            other.samples, 2,
            "two samples, though listed twice in the first"
        );
        assert!(other.compute && other.graphics);
        assert_eq!(d.processes[0].max_used_memory_bytes, Some(10));
        assert_eq!(d.processes[1].samples, 1);
    }

    #[test]
    fn errors_are_distinct_and_bounded() {
        let mut s = Summary::default();
        for i in 0..20 {
            s.note_error(&format!("e{}", i % 10));
            s.note_error("e0");
        }
        assert_eq!(s.errors.len(), MAX_ERRORS);
        assert_eq!(s.errors[0], "e0");
        assert_eq!(s.errors[1], "e1");
    }

    #[test]
    fn roles_follow_the_parent_chain() {
        // 100 is us; 101 our child; 102 its child; 200 unrelated, under 1; 300 unreadable.
        let parents: HashMap<u32, u32> = [(100, 1), (101, 100), (102, 101), (200, 1), (1, 0)]
            .into_iter()
            .collect();
        let parent_of = |p: u32| parents.get(&p).copied();
        assert_eq!(classify(100, 100, parent_of), ProcessRole::Ours);
        assert_eq!(classify(101, 100, parent_of), ProcessRole::Child);
        assert_eq!(classify(102, 100, parent_of), ProcessRole::Child);
        assert_eq!(classify(200, 100, parent_of), ProcessRole::Other);
        assert_eq!(classify(300, 100, parent_of), ProcessRole::Other);
        assert_eq!(classify(1, 100, parent_of), ProcessRole::Other);
        // As pid 1 of a container, everything else in it is ours.
        assert_eq!(classify(200, 1, parent_of), ProcessRole::Child);
        // A loop in the (racy) parent data ends.
        let looped = |p: u32| Some(if p == 5 { 6 } else { 5 });
        assert_eq!(classify(5, 100, looped), ProcessRole::Other);
    }

    #[test]
    fn stat_lines_with_odd_names_parse() {
        assert_eq!(parse_stat_parent("123 (kplace) S 45 123 123 0"), Some(45));
        assert_eq!(parse_stat_parent("123 (a b) c) (d) R 7 1 1"), Some(7));
        assert_eq!(parse_stat_parent("garbage"), None);
        assert_eq!(parse_stat_parent("1 (x) S"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn real_processes_get_their_roles_and_names() {
        let own = std::process::id();
        let mut book = ProcessBook::new();
        assert_eq!(book.resolve(own).1, ProcessRole::Ours);
        assert!(book.resolve(own).0.is_some());
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("spawn sleep");
        // The kernel names the process after it closes the spawn's close-on-exec pipe, so
        // `spawn` may return before /proc shows the new name: wait for it (bounded).
        let comm = format!("/proc/{}/comm", child.id());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while std::fs::read_to_string(&comm).is_ok_and(|c| c.trim() != "sleep")
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let (name, role) = book.resolve(child.id());
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(role, ProcessRole::Child);
        assert_eq!(name.as_deref(), Some("sleep"));
        if own != 1 {
            assert_eq!(book.resolve(1).1, ProcessRole::Other);
        }
        // Resolved once: the answer stays after the child is gone.
        assert_eq!(book.resolve(child.id()).1, ProcessRole::Child);
    }

    #[test]
    fn implausible_process_lists_are_caught() {
        let ok = [proc(42, ProcessRole::Other, Some(100))];
        assert!(plausible(&ok, Some(1000)));
        assert!(plausible(&ok, None));
        assert!(!plausible(
            &[proc(42, ProcessRole::Other, Some(2000))],
            Some(1000)
        ));
        assert!(!plausible(
            &[proc(PID_MAX_LIMIT + 1, ProcessRole::Other, None)],
            None
        ));
        assert!(!plausible(&[proc(0, ProcessRole::Other, None)], None));
    }

    fn available_telemetry() -> Telemetry {
        let mut s = Summary::default();
        let mut a = sample(40, 10, 3 << 30, 1980, Some(350_000));
        a.processes = vec![
            proc(7, ProcessRole::Ours, Some(2 << 30)),
            proc(42, ProcessRole::Other, Some(1 << 30)),
        ];
        s.add(&a);
        Telemetry {
            available: true,
            reason: None,
            interval_ms: 100.0,
            duration_s: 1.5,
            devices: vec![s.finish(id(0))],
            warnings: vec!["gpu:1: assumed".into()],
        }
    }

    #[test]
    fn json_shape() {
        let v = serde_json::to_value(available_telemetry()).unwrap();
        assert_eq!(v["available"], true);
        assert!(v["reason"].is_null());
        let d = &v["devices"][0];
        assert_eq!(d["ordinal"], 0);
        assert_eq!(d["matched_by"], "uuid");
        assert_eq!(d["gpu_util_max_pct"], 40);
        assert_eq!(d["power_max_w"], 350.0);
        assert_eq!(d["processes"][0]["role"], "self");
        assert_eq!(d["processes"][1]["role"], "other");
        assert_eq!(d["processes"][1]["name"], "p42");
        let t = serde_json::to_value(Telemetry::unavailable("NVML not available: x")).unwrap();
        assert_eq!(t["available"], false);
        assert_eq!(t["reason"], "NVML not available: x");
        assert_eq!(t["devices"], serde_json::json!([]));
    }

    #[test]
    fn display_is_a_few_lines_per_device() {
        let t = available_telemetry();
        let text = t.to_string();
        assert!(
            text.contains("gpu:0 NVIDIA H200 (NVML 3, by uuid): 1 samples"),
            "{text}"
        );
        assert!(text.contains("utilisation mean 40% max 40%"), "{text}");
        assert!(text.contains("power mean 350 W max 350 W"), "{text}");
        assert!(text.contains("memory used max 3.0 GiB"), "{text}");
        assert!(
            text.contains("self 7 p7 2.0 GiB; other 42 p42 1.0 GiB"),
            "{text}"
        );
        assert!(text.contains("1 process not started by this run"), "{text}");
        assert!(text.contains("warning: gpu:1: assumed"), "{text}");
        assert_eq!(
            t.co_tenants().map(|(o, p)| (o, p.pid)).collect::<Vec<_>>(),
            vec![(0, 42)]
        );
        let none = Telemetry::unavailable("NVML not available: no driver").to_string();
        assert_eq!(
            none,
            "GPU telemetry: none (NVML not available: no driver)\n"
        );
    }

    fn nvml_missing() -> Option<String> {
        init_nvml().err()
    }

    #[test]
    fn without_nvml_the_sampler_says_why_at_once() {
        let t = Sampler::start(&[0], DEFAULT_INTERVAL).stop();
        if nvml_missing().is_some() {
            assert!(!t.available);
            let reason = t.reason.expect("a reason");
            assert!(reason.contains("NVML"), "{reason}");
            assert!(t.devices.is_empty());
        } else {
            assert!(t.available);
            assert_eq!(t.devices.len(), 1);
        }
        let empty = Sampler::start(&[], DEFAULT_INTERVAL).stop();
        assert!(!empty.available);
    }

    #[test]
    fn cuda_identity_never_panics() {
        // Here (no driver) an error naming libcuda; on a GPU machine gpu:0's UUID.
        match probe::nvml_identity(0) {
            Ok((uuid, _)) => assert!(uuid.is_some_and(|u| u.starts_with("GPU-"))),
            Err(e) => assert!(!e.is_empty()),
        }
        assert!(probe::nvml_identity(u32::MAX).is_err());
    }

    /// Needs a GPU with NVML; prints `skipped: <reason>` elsewhere.
    #[test]
    fn samples_a_real_gpu() {
        if let Some(reason) = nvml_missing() {
            println!("skipped: {reason}");
            return;
        }
        let sampler = Sampler::start(&[0, 0], DEFAULT_INTERVAL);
        thread::sleep(Duration::from_millis(500));
        let t = sampler.stop();
        println!("{t}");
        assert!(t.available, "{t:?}");
        assert_eq!(t.devices.len(), 1, "duplicates ignored");
        let d = &t.devices[0];
        assert!(d.matched_by.is_some(), "{d:?}");
        assert!(d.samples >= 1, "{d:?}");
        assert!(d.memory_total_bytes.unwrap_or(0) > 0, "{d:?}");
        // With a long interval, stop still returns after the first sample (the thread wakes
        // on it rather than sleeping the interval out; bench/gpu-check.sh shows the time).
        let sampler = Sampler::start(&[0], Duration::from_secs(30));
        thread::sleep(Duration::from_millis(200));
        let t = sampler.stop();
        assert_eq!(t.devices[0].samples, 1);
    }
}

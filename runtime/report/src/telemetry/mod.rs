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
//! # Layout
//! This module holds the summary's types and how they print; `summary` the pure summarising
//! of samples (means, extremes, distinct processes), tested without a GPU; `processes` the
//! names and roles of the processes seen, from `/proc`; `nvml` the device lookup, one sample
//! and the sampling loop; `sampler` the background thread around them ([`Sampler`]).

mod nvml;
mod processes;
mod sampler;
mod summary;

use std::fmt;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use sampler::Sampler;

pub use kplace_core::measure::progress::GpuNow;

/// The sampling interval to use when the caller has no reason to choose another: 100 ms.
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(100);

/// The shortest interval [`Sampler::start`] honours; shorter ones are raised to it, so that
/// the sampler never spins.
pub const MIN_INTERVAL: Duration = Duration::from_millis(10);

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

#[cfg(test)]
mod tests;

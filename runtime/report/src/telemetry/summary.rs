//! Samples and their summary: plain code fed with samples, no NVML, tested without a GPU.

use std::collections::BTreeMap;

use super::{DeviceTelemetry, GpuProcess, MatchedBy, ProcessRole};

/// Distinct errors kept per device.
pub(super) const MAX_ERRORS: usize = 8;

/// One sampling pass over one device: each reading NVML gave, and the errors of those it did
/// not.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Sample {
    pub(super) gpu_util: Option<u32>,
    pub(super) mem_util: Option<u32>,
    pub(super) mem_used: Option<u64>,
    pub(super) mem_total: Option<u64>,
    pub(super) sm_clock: Option<u32>,
    pub(super) mem_clock: Option<u32>,
    pub(super) power_mw: Option<u32>,
    pub(super) processes: Vec<ProcessSample>,
    pub(super) errors: Vec<String>,
}

/// One process in one sample, its name and role already resolved.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct ProcessSample {
    pub(super) pid: u32,
    pub(super) name: Option<String>,
    pub(super) role: ProcessRole,
    pub(super) compute: bool,
    pub(super) graphics: bool,
    pub(super) used_memory: Option<u64>,
}

/// Count, sum and extremes of one reading.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Stat {
    pub(super) n: u64,
    pub(super) sum: f64,
    pub(super) min: Option<u64>,
    pub(super) max: Option<u64>,
}

impl Stat {
    pub(super) fn add(&mut self, v: Option<u64>) {
        let Some(v) = v else { return };
        self.n += 1;
        self.sum += v as f64;
        self.min = Some(self.min.map_or(v, |m| m.min(v)));
        self.max = Some(self.max.map_or(v, |m| m.max(v)));
    }

    pub(super) fn mean(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum / self.n as f64)
    }

    pub(super) fn min_u32(&self) -> Option<u32> {
        self.min.map(|v| u32::try_from(v).unwrap_or(u32::MAX))
    }

    pub(super) fn max_u32(&self) -> Option<u32> {
        self.max.map(|v| u32::try_from(v).unwrap_or(u32::MAX))
    }
}

/// Accumulates one device's samples.
#[derive(Debug, Default)]
pub(super) struct Summary {
    pub(super) samples: u64,
    pub(super) gpu_util: Stat,
    pub(super) mem_util: Stat,
    pub(super) mem_used: Stat,
    pub(super) mem_total: Option<u64>,
    pub(super) sm_clock: Stat,
    pub(super) mem_clock: Stat,
    pub(super) power_mw: Stat,
    pub(super) processes: BTreeMap<u32, GpuProcess>,
    pub(super) errors: Vec<String>,
}

impl Summary {
    pub(super) fn add(&mut self, s: &Sample) {
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
    pub(super) fn note_error(&mut self, e: &str) {
        if self.errors.len() < MAX_ERRORS && !self.errors.iter().any(|k| k == e) {
            self.errors.push(e.to_string());
        }
    }

    pub(super) fn finish(self, id: DeviceId) -> DeviceTelemetry {
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
pub(super) struct DeviceId {
    pub(super) ordinal: u32,
    pub(super) matched_by: Option<MatchedBy>,
    pub(super) nvml_index: Option<u32>,
    pub(super) name: Option<String>,
    pub(super) uuid: Option<String>,
}

//! NVML: finding the device a CUDA ordinal is, reading one sample of it, and the sampling loop.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use nvml_wrapper::enum_wrappers::device::Clock;
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::struct_wrappers::device::ProcessInfo;
use nvml_wrapper::{Device, Nvml};

use super::processes::ProcessBook;
use super::summary::{DeviceId, ProcessSample, Sample, Summary};
use super::{GpuNow, MatchedBy, Telemetry};
use kplace_core::cuda::probe::{self, panic_text};

/// Linux's largest possible pid (`PID_MAX_LIMIT`, 2^22); a larger one in a process list means
/// NVML and this library disagree on the list's layout.
pub(super) const PID_MAX_LIMIT: u32 = 1 << 22;

/// Finds CUDA device `ordinal` among NVML's devices (see the module's guarantees).
pub(super) fn find_device<'n>(
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

pub(super) fn describe_device(
    mut id: DeviceId,
    d: Device<'_>,
) -> (DeviceId, Option<Device<'_>>, Option<String>) {
    id.nvml_index = d.index().ok();
    id.name = d.name().ok();
    id.uuid = d.uuid().ok();
    (id, Some(d), None)
}

pub(super) fn not_supported(e: &NvmlError) -> bool {
    matches!(e, NvmlError::NotSupported)
}

/// Adds NVML's process list to `out`, merging a pid already there.
pub(super) fn add_processes(
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
pub(super) fn plausible(processes: &[ProcessSample], total: Option<u64>) -> bool {
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
pub(super) fn read_sample(d: &Device<'_>, book: &mut ProcessBook) -> Sample {
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

/// The sampling thread: finds the devices, samples them every `interval` until `stop` is
/// disconnected, and summarises.
pub(super) fn sample_until_stopped(
    nvml: Nvml,
    ordinals: Vec<u32>,
    interval: Duration,
    stop: Receiver<()>,
    latest: &Mutex<Vec<GpuNow>>,
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
        let mut now_read = Vec::with_capacity(targets.len());
        for (id, device, summary) in targets.iter_mut() {
            let Some(device) = device else { continue };
            match catch_unwind(AssertUnwindSafe(|| read_sample(device, &mut book))) {
                Ok(sample) => {
                    summary.add(&sample);
                    now_read.push(GpuNow {
                        ordinal: id.ordinal,
                        gpu_util_pct: sample.gpu_util,
                        memory_used_bytes: sample.mem_used,
                    });
                }
                Err(panic) => {
                    summary.note_error(&format!("sampling panicked: {}", panic_text(&*panic)))
                }
            }
        }
        *latest.lock().unwrap_or_else(|e| e.into_inner()) = now_read;
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

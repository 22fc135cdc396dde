//! The machine's CUDA as `kplace devices` reports it: the driver's answer
//! (`kplace_core::cuda::probe`) with what only NVML says added (the NVIDIA driver's version,
//! each device's memory in use by every process); and NVML opened for the telemetry sampler.
//! Never panics: NVML missing, or panicking, is a warning in the probe or an error string.

use std::panic::catch_unwind;

use kplace_core::cuda::probe::{DeviceInfo, DriverStatus, Probe, panic_text, probe_cuda};
use nvml_wrapper::Nvml;

/// Looks for the CUDA driver, its devices and the CUDA libraries
/// ([`kplace_core::cuda::probe::probe_cuda`]), then asks NVML what the driver API does not
/// say: the NVIDIA driver's version and memory in use by all processes. Its absence beside a
/// working driver is a warning only. Never panics and never fails.
pub fn probe() -> Probe {
    let mut probe = probe_cuda();
    if let DriverStatus::Ready { devices, .. } = &mut probe.driver {
        match nvml_facts(devices) {
            Ok(version) => probe.nvidia_driver_version = Some(version),
            Err(e) => probe.warnings.push(format!("NVML unavailable: {e}")),
        }
    }
    probe
}

/// Why NVML cannot be asked.
#[derive(Debug, thiserror::Error)]
pub enum NvmlError {
    /// No libnvidia-ml was found: every place looked at, and why each gave nothing.
    #[error("{0}")]
    NotFound(String),
    /// NVML did not initialise from the library found.
    #[error("{error} ({})", .path.display())]
    Init {
        /// The library.
        path: std::path::PathBuf,
        /// NVML's error.
        error: nvml_wrapper::error::NvmlError,
    },
    /// nvml-wrapper panicked as it initialised.
    #[error("its initialisation panicked: {0}")]
    Panicked(String),
    /// A query failed.
    #[error("{0}")]
    Query(nvml_wrapper::error::NvmlError),
}

/// NVML, opened from the libnvidia-ml that `kplace_cuda_libs` found (the driver's, wherever
/// the machine keeps it). Never panics: without the library the error says every place looked
/// at; a panic in nvml-wrapper's initialisation becomes an error too.
pub(crate) fn init_nvml() -> Result<Nvml, NvmlError> {
    let found = kplace_cuda_libs::find(kplace_cuda_libs::Library::Nvml);
    let Some(path) = found.path() else {
        return Err(NvmlError::NotFound(found.not_found_message()));
    };
    match catch_unwind(|| Nvml::builder().lib_path(path.as_os_str()).init()) {
        Ok(Ok(nvml)) => Ok(nvml),
        Ok(Err(error)) => Err(NvmlError::Init {
            path: path.to_path_buf(),
            error,
        }),
        Err(panic) => Err(NvmlError::Panicked(panic_text(&*panic))),
    }
}

/// Fills each device's memory in use from NVML, matched by UUID (NVML's indices need not
/// follow CUDA's ordinals), falling back to the PCI bus id; returns the NVIDIA driver version.
fn nvml_facts(devices: &mut [DeviceInfo]) -> Result<String, NvmlError> {
    let nvml = init_nvml()?;
    let version = nvml.sys_driver_version().map_err(NvmlError::Query)?;
    for d in devices.iter_mut() {
        let by_uuid = d
            .uuid
            .as_ref()
            .and_then(|u| nvml.device_by_uuid(u.as_str()).ok());
        let device = by_uuid.or_else(|| {
            d.pci_bus_id
                .as_ref()
                .and_then(|bus| nvml.device_by_pci_bus_id(bus.as_str()).ok())
        });
        if let Some(device) = device {
            d.used_memory_bytes = device.memory_info().ok().map(|m| m.used);
        }
    }
    Ok(version)
}

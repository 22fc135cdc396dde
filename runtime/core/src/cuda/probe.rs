//! What this machine offers for CUDA, found without ever panicking: [`probe_cuda`] loads libcuda
//! (through `kplace_cuda_libs`, before cudarc loads it by name), asks the driver for its version
//! and every device (name, memory, compute capability, stream priorities) and its identity as
//! NVML names it, and says which CUDA libraries the GPU backend would load. What only NVML
//! says (the NVIDIA driver's version, memory in use) `kplace_report::devices::probe` adds;
//! `kplace devices` prints the whole; `Serialize` gives the same for machines.
//!
//! # What it guarantees
//! - [`probe_cuda`] never panics: it checks that libcuda can be loaded before the first driver call
//!   (cudarc panics otherwise), and a `catch_unwind` backstop turns any panic left in cudarc
//!   (a symbol missing from an unexpectedly old driver) into an answer.
//! - [`Probe::libraries`] says what was loaded from where, or every place looked at.
//! - A device that cannot be read is a warning naming it, not a failed probe.

use std::ffi::{CStr, c_char, c_int};
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr;

use cudarc::driver::result::{self, DriverError};
use cudarc::driver::sys;
use kplace_cuda_libs::{Library, LibraryReport};
use serde::Serialize;

use super::GpuError;

/// What this machine offers for CUDA: the driver, its devices and the CUDA libraries the GPU
/// backend loads. Plain data, gathered once by [`probe_cuda`]; `Display` is a report for people,
/// `Serialize` the same for machines (`kplace devices --json`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Probe {
    /// The CUDA driver and its devices, or why there are none.
    pub driver: DriverStatus,
    /// The NVIDIA driver's version (e.g. `580.65.06`), from NVML; `None` when NVML could not be
    /// used.
    pub nvidia_driver_version: Option<String>,
    /// Whether libcufft can be loaded (the GPU backend's FFTs).
    pub cufft: bool,
    /// Whether libnvrtc can be loaded (the GPU backend compiles its kernels with it at load).
    pub nvrtc: bool,
    /// Each CUDA library (libcuda, NVML, cuFFT, NVRTC and its builtins, cuBLASLt, cuBLAS): the
    /// file loaded and its version, or every place looked at.
    pub libraries: Vec<LibraryReport>,
    /// Problems that did not stop the probe: a device whose context could not be retained, NVML
    /// unavailable beside a working driver, and the like; each names its device when it has one.
    pub warnings: Vec<String>,
}

/// The state of the CUDA driver, as [`probe_cuda`] found it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum DriverStatus {
    /// libcuda cannot be loaded: no NVIDIA driver on this machine, or none where kplace looks.
    NotFound {
        /// Why, e.g. `libcuda not found (KPLACE_CUDA_LIB_DIR: not set; loader path: ...)`.
        reason: String,
    },
    /// libcuda loaded but cannot be used: `cuInit` or the device count failed (no device, the
    /// kernel module not loaded, a driver older than the library, ...).
    Failed {
        /// The CUDA version the driver supports, when even that could be asked.
        cuda_version: Option<CudaVersion>,
        /// The failing call and the driver's error.
        reason: String,
    },
    /// The driver is initialised; `devices` lists every device it shows this process (after
    /// `CUDA_VISIBLE_DEVICES`), by ordinal. Devices whose properties could not be read are
    /// left out and named in [`Probe::warnings`].
    Ready {
        /// The newest CUDA version the driver supports (e.g. 13.0).
        cuda_version: CudaVersion,
        /// How many devices the driver reports.
        device_count: u32,
        /// Each device's properties.
        devices: Vec<DeviceInfo>,
    },
}

/// A CUDA version as the driver reports it (`cuDriverGetVersion`: 1000 * major + 10 * minor).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct CudaVersion {
    /// Major version, e.g. 13.
    pub major: u32,
    /// Minor version, e.g. 0.
    pub minor: u32,
}

impl CudaVersion {
    /// Decodes the driver's integer encoding (13000 -> 13.0, 12080 -> 12.8); `None` for a
    /// negative value, which no driver reports.
    pub fn from_driver(encoded: i32) -> Option<Self> {
        let v = u32::try_from(encoded).ok()?;
        Some(CudaVersion {
            major: v / 1000,
            minor: (v % 1000) / 10,
        })
    }
}

impl fmt::Display for CudaVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// A device's compute capability, e.g. 9.0 for Hopper.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct ComputeCapability {
    /// Major, e.g. 9.
    pub major: u32,
    /// Minor, e.g. 0.
    pub minor: u32,
}

impl fmt::Display for ComputeCapability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// The stream priorities a device accepts. CUDA's convention: numerically lower is more
/// urgent, so `greatest <= least`; both are 0 on a device without priorities.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PriorityRange {
    /// The most urgent priority, e.g. -5.
    pub greatest: i32,
    /// The least urgent (and default) priority, usually 0.
    pub least: i32,
}

impl PriorityRange {
    /// `priority` moved into the range, as [`Gpu::create_stream`](super::Gpu::create_stream) promises. Never panics, even
    /// on a range reported in the wrong order.
    pub fn clamp(self, priority: i32) -> i32 {
        let (lo, hi) = (self.greatest.min(self.least), self.greatest.max(self.least));
        priority.clamp(lo, hi)
    }
}

/// One CUDA device's properties, as [`probe_cuda`] read them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DeviceInfo {
    /// The CUDA ordinal (`gpu:N` in placements).
    pub ordinal: u32,
    /// The device's name, e.g. `NVIDIA H200`.
    pub name: String,
    /// The UUID in NVML's form (`GPU-xxxxxxxx-...`), when the driver gave one.
    pub uuid: Option<String>,
    /// The PCI bus id (`domain:bus:device.function`), when the driver gave one.
    pub pci_bus_id: Option<String>,
    /// The compute capability.
    pub compute_capability: ComputeCapability,
    /// Total device memory in bytes.
    pub total_memory_bytes: u64,
    /// Device memory in use by every process, from NVML; `None` without NVML.
    pub used_memory_bytes: Option<u64>,
    /// Streaming multiprocessors.
    pub multiprocessors: u32,
    /// The stream priority range; `None` when the primary context could not be retained (the
    /// reason is in [`Probe::warnings`]), in which case this process cannot use the device.
    pub stream_priorities: Option<PriorityRange>,
}

impl Probe {
    /// The devices found: empty unless the driver is [`DriverStatus::Ready`].
    pub fn devices(&self) -> &[DeviceInfo] {
        match &self.driver {
            DriverStatus::Ready { devices, .. } => devices,
            _ => &[],
        }
    }

    /// libcuda's library report, when the probe has one.
    pub fn libcuda(&self) -> Option<&LibraryReport> {
        self.libraries
            .iter()
            .find(|l| l.name == Library::Cuda.name())
    }

    /// Why no device is usable (no driver, driver unusable, no device), or `None` when at
    /// least one device was found.
    pub fn unavailable_reason(&self) -> Option<String> {
        match &self.driver {
            DriverStatus::NotFound { reason } => Some(format!("no CUDA driver found ({reason})")),
            DriverStatus::Failed { reason, .. } => Some(format!("CUDA driver unusable: {reason}")),
            DriverStatus::Ready { devices, .. } if devices.is_empty() => {
                Some("the CUDA driver reports no usable device".into())
            }
            DriverStatus::Ready { .. } => None,
        }
    }
}

fn found(yes: bool) -> &'static str {
    if yes { "found" } else { "not found" }
}

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / f64::from(1u32 << 30))
}

impl fmt::Display for Probe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.driver {
            // The places looked at are listed with the libraries below.
            DriverStatus::NotFound { .. } if self.libcuda().is_some_and(|l| !l.is_loaded()) => {
                writeln!(f, "no CUDA driver found (libcuda not found: see below)")?
            }
            DriverStatus::NotFound { reason } => writeln!(f, "no CUDA driver found ({reason})")?,
            DriverStatus::Failed {
                cuda_version,
                reason,
            } => match cuda_version {
                Some(v) => writeln!(f, "CUDA driver (CUDA {v}) found but unusable: {reason}")?,
                None => writeln!(f, "CUDA driver found but unusable: {reason}")?,
            },
            DriverStatus::Ready {
                cuda_version,
                device_count,
                devices,
            } => {
                match &self.nvidia_driver_version {
                    Some(v) => writeln!(f, "NVIDIA driver {v}, CUDA {cuda_version}")?,
                    None => writeln!(f, "CUDA driver: CUDA {cuda_version}")?,
                }
                let plural = if *device_count == 1 { "" } else { "s" };
                writeln!(f, "{device_count} device{plural}")?;
                for d in devices {
                    writeln!(f, "  gpu:{}  {}", d.ordinal, d.name)?;
                    write!(
                        f,
                        "    compute capability {}, {} SMs, {} memory",
                        d.compute_capability,
                        d.multiprocessors,
                        gib(d.total_memory_bytes)
                    )?;
                    if let Some(used) = d.used_memory_bytes {
                        write!(f, " ({} in use)", gib(used))?;
                    }
                    writeln!(f)?;
                    if let Some(bus) = &d.pci_bus_id {
                        write!(f, "    PCI {bus}")?;
                        if let Some(p) = d.stream_priorities {
                            write!(f, ", ")?;
                            write_priorities(f, p)?;
                        }
                        writeln!(f)?;
                    } else if let Some(p) = d.stream_priorities {
                        write!(f, "    ")?;
                        write_priorities(f, p)?;
                        writeln!(f)?;
                    }
                }
            }
        }
        writeln!(
            f,
            "libraries: cuFFT {}, NVRTC {}",
            found(self.cufft),
            found(self.nvrtc)
        )?;
        for library in &self.libraries {
            for line in library.to_string().lines() {
                writeln!(f, "  {line}")?;
            }
        }
        for w in &self.warnings {
            writeln!(f, "warning: {w}")?;
        }
        Ok(())
    }
}

fn write_priorities(f: &mut fmt::Formatter<'_>, p: PriorityRange) -> fmt::Result {
    write!(
        f,
        "stream priorities {} (most urgent) to {}",
        p.greatest, p.least
    )
}

/// Why no CUDA driver can be used, or `None` when libcuda loads: finds libcuda (once per
/// process, see `kplace_cuda_libs`) so that cudarc's own dlopen by name resolves to it, then
/// checks that cudarc can load it, since cudarc panics on the first driver call otherwise.
pub fn libcuda_missing() -> Option<String> {
    let found = kplace_cuda_libs::find(Library::Cuda);
    // SAFETY: only tries to load the library (dlopen, then dlclose).
    if unsafe { sys::is_culib_present() } {
        return None;
    }
    Some(match found.path() {
        None => found.not_found_message(),
        Some(path) => format!(
            "libcuda loaded from {} but cudarc cannot load it by name ({})",
            path.display(),
            found.warnings.join("; ")
        ),
    })
}

/// The driver's error as `NAME: text`, e.g. `CUDA_ERROR_OUT_OF_MEMORY: out of memory`, with a
/// hint for the one error a caller of this module most often causes.
pub(super) fn describe(e: DriverError) -> String {
    // The enum's Debug is the error's name; no driver call needed.
    let name = format!("{:?}", e.0);
    let mut text = match e.error_string() {
        Ok(s) => format!("{name}: {}", s.to_string_lossy()),
        Err(_) => name,
    };
    if e.0 == sys::CUresult::CUDA_ERROR_INVALID_CONTEXT {
        text.push_str(" (no context current on this thread: call bind_thread first)");
    }
    text
}

/// Looks for the CUDA driver, its devices and the CUDA libraries, through the driver alone:
/// NVML's facts (the NVIDIA driver's version, memory in use) are left `None`, for
/// `kplace_report::devices::probe` to add. Never panics and never fails: the absence of a
/// driver or device is part of the answer. Each device's primary
/// context is retained briefly (to read its stream priority range), which initialises it if
/// no one else has: expect a fraction of a second per device on a GPU machine. The calling
/// thread's current context is restored afterwards.
pub fn probe_cuda() -> Probe {
    let libraries: Vec<LibraryReport> = kplace_cuda_libs::find_all().into_iter().cloned().collect();
    // SAFETY: these only try to load the libraries (dlopen, then dlclose); found above, they
    // resolve to the files the reports name.
    let (cufft, nvrtc) = unsafe {
        (
            cudarc::cufft::sys::is_culib_present(),
            cudarc::nvrtc::sys::is_culib_present(),
        )
    };
    let mut probe = Probe {
        driver: DriverStatus::NotFound {
            reason: String::new(),
        },
        nvidia_driver_version: None,
        cufft,
        nvrtc,
        libraries,
        warnings: Vec::new(),
    };
    // Checked first because cudarc panics on the first driver call when libcuda cannot be
    // loaded.
    if let Some(reason) = libcuda_missing() {
        probe.driver = DriverStatus::NotFound { reason };
        return probe;
    }
    let mut warnings = Vec::new();
    probe.driver = match catch_unwind(AssertUnwindSafe(|| probe_driver(&mut warnings))) {
        Ok(status) => status,
        Err(panic) => DriverStatus::Failed {
            cuda_version: None,
            reason: format!("cudarc panicked: {}", panic_text(&*panic)),
        },
    };
    probe.warnings = warnings;
    probe
}

/// The message of a caught panic (of cudarc or NVML, which panic where a library is missing a
/// symbol), for the error that reports it.
pub fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".into()
    }
}

/// The driver part of [`probe_cuda`]; libcuda is known to load.
fn probe_driver(warnings: &mut Vec<String>) -> DriverStatus {
    let mut encoded: c_int = 0;
    // SAFETY: a valid out-pointer; cuDriverGetVersion may be called before cuInit.
    let cuda_version = unsafe { sys::cuDriverGetVersion(&mut encoded) }
        .result()
        .ok()
        .and_then(|()| CudaVersion::from_driver(encoded));
    if let Err(e) = result::init() {
        return DriverStatus::Failed {
            cuda_version,
            reason: format!("cuInit failed: {}", describe(e)),
        };
    }
    let Some(cuda_version) = cuda_version else {
        return DriverStatus::Failed {
            cuda_version: None,
            reason: "cuDriverGetVersion failed".into(),
        };
    };
    let count = match result::device::get_count() {
        Ok(n) => u32::try_from(n).unwrap_or(0),
        Err(e) => {
            return DriverStatus::Failed {
                cuda_version: Some(cuda_version),
                reason: format!("cuDeviceGetCount failed: {}", describe(e)),
            };
        }
    };
    let mut devices = Vec::new();
    for ordinal in 0..count {
        match probe_device(ordinal, warnings) {
            Ok(d) => devices.push(d),
            Err(e) => warnings.push(e.to_string()),
        }
    }
    DriverStatus::Ready {
        cuda_version,
        device_count: count,
        devices,
    }
}

/// One device's properties; an error for those without which the device cannot be described.
fn probe_device(ordinal: u32, warnings: &mut Vec<String>) -> Result<DeviceInfo, GpuError> {
    let label = format!("gpu:{ordinal}");
    let err = |call: &str| {
        let label = label.clone();
        let call = call.to_string();
        move |e: DriverError| GpuError::new(label, call, describe(e))
    };
    let dev = device_handle(ordinal).map_err(err("cuDeviceGet"))?;
    let name = device_name(dev).map_err(err("cuDeviceGetName"))?;
    // SAFETY: `dev` came from cuDeviceGet.
    let total = unsafe { result::device::total_mem(dev) }.map_err(err("cuDeviceTotalMem"))?;
    let attr = |a: sys::CUdevice_attribute, call: &str| {
        // SAFETY: `dev` came from cuDeviceGet.
        unsafe { result::device::get_attribute(dev, a) }
            .map(|v| u32::try_from(v).unwrap_or(0))
            .map_err(err(call))
    };
    use sys::CUdevice_attribute::*;
    let major = attr(
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
        "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)",
    )?;
    let minor = attr(
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
        "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR)",
    )?;
    let multiprocessors = attr(
        CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
        "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)",
    )?;
    let uuid = result::device::get_uuid(dev).ok().map(|u| nvml_uuid(&u));
    let pci_bus_id = pci_bus_id(dev).ok();
    // SAFETY: `dev` came from cuDeviceGet.
    let stream_priorities = match unsafe { retained_priority_range(dev) } {
        Ok(range) => Some(range),
        Err((call, e)) => {
            warnings.push(GpuError::new(label.clone(), call, describe(e)).to_string());
            None
        }
    };
    Ok(DeviceInfo {
        ordinal,
        name,
        uuid,
        pci_bus_id,
        compute_capability: ComputeCapability { major, minor },
        total_memory_bytes: total as u64,
        used_memory_bytes: None,
        multiprocessors,
        stream_priorities,
    })
}

/// Retains `dev`'s primary context just long enough to read its stream priority range.
///
/// # Safety
/// `dev` came from cuDeviceGet.
unsafe fn retained_priority_range(
    dev: sys::CUdevice,
) -> Result<PriorityRange, (&'static str, DriverError)> {
    // SAFETY: per the caller.
    let ctx =
        unsafe { result::primary_ctx::retain(dev) }.map_err(|e| ("cuDevicePrimaryCtxRetain", e))?;
    // SAFETY: `ctx` is retained until the release below.
    let range = unsafe { with_current(ctx, priority_range) }
        .map_err(|e| ("cuCtxGetStreamPriorityRange", e));
    // SAFETY: balances the retain above. A failed release only leaks the context's reference.
    let _ = unsafe { result::primary_ctx::release(dev) };
    range
}

/// Runs `f` with `ctx` current on this thread, then makes the thread's previous context (or
/// none) current again, so that callers' threads are left as they were.
///
/// # Safety
/// `ctx` is a live context.
pub(super) unsafe fn with_current<T>(
    ctx: sys::CUcontext,
    f: impl FnOnce() -> Result<T, DriverError>,
) -> Result<T, DriverError> {
    let previous = result::ctx::get_current()?;
    // SAFETY: per the caller.
    unsafe { result::ctx::set_current(ctx) }?;
    let out = f();
    // SAFETY: `previous` was current on this thread a moment ago (or null: none).
    let restored = unsafe { result::ctx::set_current(previous.unwrap_or(ptr::null_mut())) };
    let out = out?;
    restored?;
    Ok(out)
}

/// The current context's stream priority range.
pub(super) fn priority_range() -> Result<PriorityRange, DriverError> {
    let (least, greatest) = result::stream::get_priority_range()?;
    Ok(PriorityRange { greatest, least })
}

pub(super) fn device_handle(ordinal: u32) -> Result<sys::CUdevice, DriverError> {
    // Ordinals beyond c_int's range exist on no machine; the driver rejects the clamped value.
    result::device::get(c_int::try_from(ordinal).unwrap_or(c_int::MAX))
}

/// Reads a NUL-terminated string the driver wrote into `buf`, tolerating a missing NUL.
fn c_buffer_text(buf: &[u8]) -> String {
    let bytes = match CStr::from_bytes_until_nul(buf) {
        Ok(s) => s.to_bytes(),
        Err(_) => buf,
    };
    String::from_utf8_lossy(bytes).into_owned()
}

/// The device's name. cudarc's `device::get_name` would panic on a name without a NUL; this
/// reads the same call without that path.
pub(super) fn device_name(dev: sys::CUdevice) -> Result<String, DriverError> {
    let mut buf = [0u8; 256];
    // SAFETY: the driver writes at most `len` bytes, NUL included.
    unsafe { sys::cuDeviceGetName(buf.as_mut_ptr().cast::<c_char>(), buf.len() as c_int, dev) }
        .result()?;
    Ok(c_buffer_text(&buf))
}

fn pci_bus_id(dev: sys::CUdevice) -> Result<String, DriverError> {
    // The driver writes e.g. "0000:3b:00.0" (13 bytes with its NUL, the documented minimum);
    // room to spare for a wider domain.
    let mut buf = [0u8; 32];
    // SAFETY: the driver writes at most `len` bytes, NUL included.
    unsafe { sys::cuDeviceGetPCIBusId(buf.as_mut_ptr().cast::<c_char>(), buf.len() as c_int, dev) }
        .result()?;
    Ok(c_buffer_text(&buf))
}

/// Formats a CUDA UUID as NVML names devices: `GPU-` and 8-4-4-4-12 hex digits.
fn nvml_uuid(uuid: &sys::CUuuid) -> String {
    let hex: Vec<String> = uuid
        .bytes
        .iter()
        .map(|&b| format!("{:02x}", b as u8))
        .collect();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        hex[0..4].concat(),
        hex[4..6].concat(),
        hex[6..8].concat(),
        hex[8..10].concat(),
        hex[10..16].concat()
    )
}

/// Why CUDA could not say which device NVML should look for ([`nvml_identity`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    /// libcuda cannot be loaded: where it was looked for, and why each place gave nothing.
    #[error("{searched}")]
    NoDriver {
        /// What the search says.
        searched: String,
    },
    /// The driver did not initialise.
    #[error("cuInit failed: {0}")]
    Init(String),
    /// The driver has no device of that ordinal.
    #[error("cuDeviceGet({ordinal}) failed: {why}")]
    Device {
        /// The ordinal asked for.
        ordinal: u32,
        /// The driver's error.
        why: String,
    },
    /// cudarc panicked in a driver call.
    #[error("cudarc panicked: {0}")]
    Panicked(String),
}

/// How NVML can find CUDA device `ordinal` (whose indices need not follow CUDA's ordinals, e.g.
/// under `CUDA_VISIBLE_DEVICES`): its UUID in NVML's form and its PCI bus id, each when the
/// driver gave it. Initialises the driver (`cuInit`) if no one has, but creates no context.
/// Never panics: without a usable driver or device the error says why.
pub fn nvml_identity(ordinal: u32) -> Result<(Option<String>, Option<String>), IdentityError> {
    // Checked first because cudarc panics on the first driver call when libcuda cannot be
    // loaded.
    if let Some(searched) = libcuda_missing() {
        return Err(IdentityError::NoDriver { searched });
    }
    let ask = || -> Result<(Option<String>, Option<String>), IdentityError> {
        result::init().map_err(|e| IdentityError::Init(describe(e)))?;
        let dev = device_handle(ordinal).map_err(|e| IdentityError::Device {
            ordinal,
            why: describe(e),
        })?;
        let uuid = result::device::get_uuid(dev).ok().map(|u| nvml_uuid(&u));
        Ok((uuid, pci_bus_id(dev).ok()))
    };
    catch_unwind(AssertUnwindSafe(ask))
        .unwrap_or_else(|panic| Err(IdentityError::Panicked(panic_text(&*panic))))
}

#[cfg(test)]
mod tests;

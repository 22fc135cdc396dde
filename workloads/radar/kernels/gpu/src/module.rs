//! The compiled kernels of a device, loaded once per device and process.
//!
//! The first state created on a device compiles every source with NVRTC for that device
//! ([`crate::nvrtc`]), loads each into a module with `cuModuleLoadData` and looks up every
//! function. Later states (every stage and frame slot) reuse the same handles: compiling takes
//! a good fraction of a second per source, far too long to repeat per slot.
//!
//! Modules are never unloaded: they belong to the device's primary context, which the cache
//! keeps a reference on, and they live until the process ends.

use std::ffi::c_void;
use std::sync::{Arc, Mutex};

use cudarc::driver::result;
use cudarc::driver::sys::{CUfunction, CUmodule};
use kplace_abi::export::KernelError;

use crate::driver::{Check, Device};
use crate::nvrtc;
use crate::source::{Function, Source};

/// Every function of every source, loaded in one device's primary context.
#[derive(Debug)]
pub(crate) struct Functions {
    /// Keeps the primary context (and with it the modules) alive.
    _device: Arc<Device>,
    handles: [CUfunction; Function::ALL.len()],
}

// SAFETY: function handles are immutable identifiers valid in their context from any thread;
// cuLaunchKernel may be called concurrently with the same handle.
unsafe impl Send for Functions {}
// SAFETY: as above.
unsafe impl Sync for Functions {}

impl Functions {
    /// The handle of `function`.
    pub(crate) fn get(&self, function: Function) -> CUfunction {
        self.handles[function.index()]
    }
}

/// Loaded functions per primary context (by address), never freed.
static CACHE: Mutex<Vec<(usize, &'static Functions)>> = Mutex::new(Vec::new());

/// The functions for `device`, compiled and loaded on first use. The caller has bound the
/// device's primary context.
pub(crate) fn functions(device: &Arc<Device>) -> Result<&'static Functions, KernelError> {
    // A poisoned lock only means another thread panicked while compiling; the list itself is
    // only ever pushed to complete entries, so it is still consistent.
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    let key = device.context() as usize;
    if let Some((_, functions)) = cache.iter().find(|(k, _)| *k == key) {
        return Ok(functions);
    }
    let functions: &'static Functions = Box::leak(Box::new(load(device)?));
    cache.push((key, functions));
    Ok(functions)
}

/// Modules loaded so far; unloaded on drop unless [`Loaded::keep`] hands them over (so a
/// failure part-way through loading leaks nothing).
struct Loaded(Vec<CUmodule>);

impl Loaded {
    fn keep(mut self) {
        self.0.clear();
    }
}

impl Drop for Loaded {
    fn drop(&mut self) {
        for module in self.0.drain(..) {
            // SAFETY: loaded by `load`, unloaded once; no function of it was handed out.
            let _ = unsafe { result::module::unload(module) };
        }
    }
}

fn load(device: &Arc<Device>) -> Result<Functions, KernelError> {
    let arch = device.arch()?;
    let target = nvrtc::target_for(arch)?;
    let mut modules = Loaded(Vec::with_capacity(Source::ALL.len()));
    for source in Source::ALL {
        let compiled = nvrtc::compile(source, target)?;
        let image: *const c_void = match &compiled.cubin {
            Some(cubin) => cubin.as_ptr().cast(),
            None => compiled.ptx.as_ptr().cast(),
        };
        // SAFETY: a complete CUBIN or NUL-terminated PTX image, alive for the call; the
        // caller bound the device's context.
        let module = unsafe { result::module::load_data(image) }.map_err(|e| {
            let mut error = crate::driver::driver_error("cuModuleLoadData", e);
            error.message = format!(
                "{} ({} for device {}, compute capability {}.{})",
                error.message,
                source.file_name().to_string_lossy(),
                device.ordinal(),
                arch.major,
                arch.minor
            );
            error
        })?;
        modules.0.push(module);
    }
    let mut handles: [CUfunction; Function::ALL.len()] =
        [std::ptr::null_mut(); Function::ALL.len()];
    for function in Function::ALL {
        let module = modules.0[function.source().index()];
        // SAFETY: a module loaded above, never unloaded.
        handles[function.index()] =
            unsafe { result::module::get_function(module, function.name().to_owned()) }
                .check("cuModuleGetFunction")
                .map_err(|mut e| {
                    e.message = format!("{} ({:?})", e.message, function.name());
                    e
                })?;
    }
    // From here on the modules live as long as the process.
    modules.keep();
    Ok(Functions {
        _device: Arc::clone(device),
        handles,
    })
}

//! A library's functions on a device, compiled and loaded once per device and process.
//!
//! A kernel library names its kernels with a type implementing [`Function`] (usually an enum),
//! which lists every function and the [`Source`](crate::source::Source) that defines it. The
//! first state created on a device compiles every source with NVRTC for that device
//! ([`crate::nvrtc`]), loads each into a module with `cuModuleLoadData` and looks up every
//! function; later states (every stage and frame slot) reuse the same handles
//! ([`functions`]): compiling takes a good fraction of a second per source, far too long to
//! repeat per slot.
//!
//! Modules are never unloaded: they belong to the device's primary context, which the loaded
//! [`Functions`] keep a reference on, and they live until the process ends.

use std::any::{Any, TypeId};
use std::ffi::c_void;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

use cudarc::driver::result;
use cudarc::driver::sys::{CUfunction, CUmodule};
use kplace_abi::export::KernelError;

use crate::driver::{Check, Device, driver_error};
use crate::nvrtc;
use crate::source::Function;

/// Every function of a library, loaded in one device's primary context.
#[derive(Debug)]
pub struct Functions<F> {
    /// Keeps the primary context (and with it the modules) alive.
    _device: Arc<Device>,
    handles: Vec<CUfunction>,
    library: PhantomData<F>,
}

// SAFETY: function handles are immutable identifiers valid in their context from any thread;
// cuLaunchKernel may be called concurrently with the same handle.
unsafe impl<F> Send for Functions<F> {}
// SAFETY: as above.
unsafe impl<F> Sync for Functions<F> {}

impl<F: Function> Functions<F> {
    /// The handle of `function`.
    pub fn get(&self, function: F) -> CUfunction {
        self.handles[function.index()]
    }
}

/// A loaded library's functions, by primary context and library type.
type Entry = (usize, TypeId, &'static (dyn Any + Send + Sync));

/// Loaded functions, never freed.
static CACHE: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

/// The functions of library `F` on `device`, compiled and loaded on first use. The caller has
/// bound the device's primary context.
pub fn functions<F: Function>(device: &Arc<Device>) -> Result<&'static Functions<F>, KernelError> {
    // A poisoned lock only means another thread panicked while compiling; the list itself is
    // only ever pushed complete entries, so it is still consistent.
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    let key = (device.context() as usize, TypeId::of::<F>());
    let cached = cache
        .iter()
        .find(|(context, library, _)| (*context, *library) == key)
        .and_then(|(_, _, functions)| functions.downcast_ref::<Functions<F>>());
    if let Some(functions) = cached {
        return Ok(functions);
    }
    let functions: &'static Functions<F> = Box::leak(Box::new(load::<F>(device)?));
    cache.push((key.0, key.1, functions));
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

fn load<F: Function>(device: &Arc<Device>) -> Result<Functions<F>, KernelError> {
    let arch = device.arch()?;
    let target = nvrtc::target_for(arch)?;
    let mut modules = Loaded(Vec::with_capacity(F::SOURCES.len()));
    for &source in F::SOURCES {
        let compiled = nvrtc::compile(source, target)?;
        let image: *const c_void = match &compiled.cubin {
            Some(cubin) => cubin.as_ptr().cast(),
            None => compiled.ptx.as_ptr().cast(),
        };
        // SAFETY: a complete CUBIN or NUL-terminated PTX image, alive for the call; the
        // caller bound the device's context.
        let module = unsafe { result::module::load_data(image) }.map_err(|e| {
            let mut error = driver_error("cuModuleLoadData", e);
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
    let mut handles = Vec::with_capacity(F::ALL.len());
    for (index, &function) in F::ALL.iter().enumerate() {
        debug_assert_eq!(function.index(), index, "Function::ALL out of handle order");
        let module = modules.0[function.source()];
        // SAFETY: a module loaded above, never unloaded.
        let handle = unsafe { result::module::get_function(module, function.name().to_owned()) }
            .check("cuModuleGetFunction")
            .map_err(|mut e| {
                e.message = format!("{} ({:?})", e.message, function.name());
                e
            })?;
        handles.push(handle);
    }
    // From here on the modules live as long as the process.
    modules.keep();
    Ok(Functions {
        _device: Arc::clone(device),
        handles,
        library: PhantomData,
    })
}

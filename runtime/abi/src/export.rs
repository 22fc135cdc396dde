//! Helpers for writing a kernel library in Rust.
//!
//! A kernel is a type implementing [`KernelImpl`]; [`kernel_entry`] turns it into a table
//! entry whose `extern "C"` functions catch every panic, write error text into the caller's
//! buffer, and box the state. [`export_library!`](crate::export_library) emits the entry
//! symbol. What this module guarantees to the runtime: no panic crosses the ABI (a caught panic
//! becomes [`Status::INTERNAL`] with its message), and error text is always NUL-terminated.
//! [`ports`] checks a kernel's port descriptors at `create` and its tensors at `launch`.

mod launch;
pub mod ports;

pub use launch::Launch;

use std::ffi::{CStr, c_char, c_void};
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::{
    DeviceKind, Dtype, Kernel, KernelConfig, KernelFlags, LaunchArgs, MemorySpace, SPLIT_NONE,
    Status, TensorDesc,
};

/// A kernel's failure: a status code and the text the runtime will show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelError {
    /// The status returned across the ABI.
    pub status: Status,
    /// What went wrong, for the user.
    pub message: String,
}

impl KernelError {
    /// A parameter, shape or dtype the kernel cannot take.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self {
            status: Status::INVALID_ARGUMENT,
            message: message.into(),
        }
    }

    /// The underlying library failed.
    pub fn backend(message: impl Into<String>) -> Self {
        Self {
            status: Status::BACKEND,
            message: message.into(),
        }
    }

    /// A kernel bug.
    pub fn internal(message: impl Into<String>) -> Self {
        Self {
            status: Status::INTERNAL,
            message: message.into(),
        }
    }
}

impl fmt::Display for KernelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.status.name())
    }
}

impl std::error::Error for KernelError {}

/// A kernel implemented in Rust. One value is one state: per stage and frame slot.
///
/// `launch` takes `&self` because the runtime may launch disjoint tiles of one state
/// concurrently: all mutable scratch lives in the workspace, and what a stateful kernel keeps
/// from one frame to the next lives in the carry ([`Launch::carry_slice`]).
pub trait KernelImpl: Sized + Send + Sync + 'static {
    /// Logical name, e.g. `c"radar.range_fft"`.
    const NAME: &'static CStr;
    /// Where it runs.
    const DEVICE: DeviceKind;
    /// Where its inputs and outputs live.
    const MEMORY: MemorySpace;
    /// Inputs it takes.
    const N_INPUTS: u32;
    /// Outputs it writes.
    const N_OUTPUTS: u32;
    /// Whether the exported functions start every error message with the kernel's name
    /// (`blocks.fft: ...`), for kernels whose own messages do not say which kernel failed.
    const NAMES_ITS_ERRORS: bool = false;
    /// What the kernel declares: [`KernelFlags::STATEFUL`] (with [`KernelImpl::carry_bytes`])
    /// for a kernel that carries state across frames, and what a lost frame does to it.
    const FLAGS: KernelFlags = KernelFlags::NONE;

    /// Validates the configuration and builds a state.
    fn create(config: &Config<'_>) -> Result<Self, KernelError>;

    /// Workspace bytes one launch needs.
    fn workspace_bytes(&self) -> u64;

    /// Bytes a stateful kernel carries from one frame to the next (0 for a stateless one).
    fn carry_bytes(&self) -> u64 {
        0
    }

    /// Runs one tile.
    fn launch(&self, launch: &Launch<'_>) -> Result<(), KernelError>;
}

/// The table entry for kernel `K`.
pub const fn kernel_entry<K: KernelImpl>() -> Kernel {
    Kernel {
        name: K::NAME.as_ptr(),
        device: K::DEVICE,
        memory: K::MEMORY,
        n_inputs: K::N_INPUTS,
        n_outputs: K::N_OUTPUTS,
        create: Some(create_shim::<K>),
        workspace_bytes: Some(workspace_shim::<K>),
        launch: Some(launch_shim::<K>),
        destroy: Some(destroy_shim::<K>),
        flags: K::FLAGS,
        reserved: 0,
        carry_bytes: Some(carry_shim::<K>),
    }
}

/// Emits `kplace_library_entry`, returning a table of the given kernels.
///
/// ```ignore
/// kplace_abi::export_library!(c"my-kernels", [Scale, Sum]);
/// ```
#[macro_export]
macro_rules! export_library {
    ($name:expr, [$($kernel:ty),* $(,)?]) => {
        static KPLACE_KERNELS: &[$crate::Kernel] = &[$($crate::export::kernel_entry::<$kernel>()),*];
        static KPLACE_LIBRARY: $crate::Library = $crate::Library {
            abi_version: $crate::ABI_VERSION,
            n_kernels: KPLACE_KERNELS.len() as u32,
            name: {
                let name: &'static ::std::ffi::CStr = $name;
                name.as_ptr()
            },
            kernels: KPLACE_KERNELS.as_ptr(),
        };

        /// The kernel library's entry point (see kplace.h).
        #[unsafe(no_mangle)]
        pub extern "C" fn kplace_library_entry() -> *const $crate::Library {
            &KPLACE_LIBRARY
        }
    };
}

/// Writes `message` into a C buffer of `len` bytes, truncated on a character boundary and
/// always NUL-terminated. Does nothing when the buffer is null or empty.
///
/// # Safety
/// `buf` must be null or valid for `len` bytes of writes.
pub unsafe fn write_error(buf: *mut c_char, len: usize, message: &str) {
    if buf.is_null() || len == 0 {
        return;
    }
    let mut n = message.len().min(len - 1);
    while !message.is_char_boundary(n) {
        n -= 1;
    }
    // SAFETY: the caller promises `len` writable bytes; n + 1 <= len.
    unsafe {
        std::ptr::copy_nonoverlapping(message.as_ptr().cast::<c_char>(), buf, n);
        *buf.add(n) = 0;
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    let text = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_string());
    format!("kernel panicked: {text}")
}

/// Runs `body`, turning an error or a panic into a status plus its text in the caller's
/// buffer, the text after `name: ` when a name is given: what each entry point of a kernel
/// library written in Rust does, so that nothing but a status crosses the ABI.
///
/// # Safety
/// `error` must be null or valid for `error_len` bytes of writes.
pub unsafe fn guarded(
    error: *mut c_char,
    error_len: usize,
    name: Option<&CStr>,
    body: impl FnOnce() -> Result<(), KernelError>,
) -> Status {
    let mut failure = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => return Status::OK,
        Ok(Err(e)) => e,
        Err(payload) => KernelError::internal(panic_message(payload.as_ref())),
    };
    if let Some(name) = name {
        failure.message = format!("{}: {}", name.to_string_lossy(), failure.message);
    }
    // SAFETY: forwarded from the caller's contract.
    unsafe { write_error(error, error_len, &failure.message) };
    failure.status
}

/// [`guarded`] for kernel `K`, naming it when it asks to be named.
unsafe fn guarded_kernel<K: KernelImpl>(
    error: *mut c_char,
    error_len: usize,
    body: impl FnOnce() -> Result<(), KernelError>,
) -> Status {
    let name = K::NAMES_ITS_ERRORS.then_some(K::NAME);
    // SAFETY: forwarded from the caller's contract.
    unsafe { guarded(error, error_len, name, body) }
}

unsafe extern "C" fn create_shim<K: KernelImpl>(
    config: *const KernelConfig,
    state: *mut *mut c_void,
    error: *mut c_char,
    error_len: usize,
) -> Status {
    // SAFETY: the runtime passes a valid config, state slot and error buffer (ABI contract).
    unsafe {
        guarded_kernel::<K>(error, error_len, || {
            if config.is_null() || state.is_null() {
                return Err(KernelError::invalid(
                    "create called with a null config or state",
                ));
            }
            let config = Config::from_raw(&*config)?;
            let kernel = K::create(&config)?;
            *state = Box::into_raw(Box::new(kernel)).cast();
            Ok(())
        })
    }
}

unsafe extern "C" fn workspace_shim<K: KernelImpl>(state: *const c_void) -> u64 {
    if state.is_null() {
        return 0;
    }
    // A panic here would cross the ABI, so it is caught and reported as "no workspace", which
    // launch then rejects.
    catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: a non-null state came from create_shim::<K> and is not yet destroyed.
        unsafe { &*state.cast::<K>() }.workspace_bytes()
    }))
    .unwrap_or(0)
}

unsafe extern "C" fn carry_shim<K: KernelImpl>(state: *const c_void) -> u64 {
    if state.is_null() {
        return 0;
    }
    // As for the workspace: a panic is caught, and the missing carry refused at launch.
    catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: a non-null state came from create_shim::<K> and is not yet destroyed.
        unsafe { &*state.cast::<K>() }.carry_bytes()
    }))
    .unwrap_or(0)
}

unsafe extern "C" fn launch_shim<K: KernelImpl>(
    state: *mut c_void,
    args: *const LaunchArgs,
    error: *mut c_char,
    error_len: usize,
) -> Status {
    // SAFETY: the runtime passes a state from create_shim::<K>, valid args and error buffer.
    unsafe {
        guarded_kernel::<K>(error, error_len, || {
            if state.is_null() || args.is_null() {
                return Err(KernelError::invalid(
                    "launch called with a null state or args",
                ));
            }
            let kernel = &*state.cast::<K>();
            let launch = Launch::from_raw(&*args);
            if launch.workspace_bytes() < kernel.workspace_bytes() {
                return Err(KernelError::invalid(format!(
                    "workspace of {} bytes is smaller than the {} the kernel asked for",
                    launch.workspace_bytes(),
                    kernel.workspace_bytes()
                )));
            }
            if launch.carry_bytes() < kernel.carry_bytes() {
                return Err(KernelError::invalid(format!(
                    "carry of {} bytes is smaller than the {} the kernel asked for",
                    launch.carry_bytes(),
                    kernel.carry_bytes()
                )));
            }
            kernel.launch(&launch)
        })
    }
}

unsafe extern "C" fn destroy_shim<K: KernelImpl>(state: *mut c_void) {
    if !state.is_null() {
        // Dropping must not unwind across the ABI; a panicking Drop is caught and the state
        // leaked.
        let _ = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: a non-null state came from create_shim::<K> (a Box) and is destroyed once.
            drop(unsafe { Box::from_raw(state.cast::<K>()) })
        }));
    }
}

/// A safe view of a [`KernelConfig`].
#[derive(Debug)]
pub struct Config<'a> {
    params: Vec<(&'a str, &'a str)>,
    inputs: &'a [TensorDesc],
    outputs: &'a [TensorDesc],
    split: Option<(usize, u64)>,
    device_ordinal: u32,
}

/// # Safety
/// `ptr` must be valid for `len` elements when `len > 0`.
pub(crate) unsafe fn slice_from<'a, T>(ptr: *const T, len: u32) -> &'a [T] {
    if len == 0 || ptr.is_null() {
        &[]
    } else {
        // SAFETY: guaranteed by the caller.
        unsafe { std::slice::from_raw_parts(ptr, len as usize) }
    }
}

impl<'a> Config<'a> {
    /// Reads a raw config.
    ///
    /// # Safety
    /// The config's pointers must be valid for their counts, its strings NUL-terminated.
    pub unsafe fn from_raw(raw: &'a KernelConfig) -> Result<Self, KernelError> {
        // SAFETY: guaranteed by the caller.
        let raw_params = unsafe { slice_from(raw.params, raw.n_params) };
        let mut params = Vec::with_capacity(raw_params.len());
        for p in raw_params {
            if p.name.is_null() || p.value.is_null() {
                return Err(KernelError::invalid("a parameter has a null name or value"));
            }
            // SAFETY: non-null, NUL-terminated per the caller's contract.
            let (name, value) = unsafe { (CStr::from_ptr(p.name), CStr::from_ptr(p.value)) };
            let name = name
                .to_str()
                .map_err(|_| KernelError::invalid("parameter name is not UTF-8"))?;
            let value = value
                .to_str()
                .map_err(|_| KernelError::invalid(format!("parameter {name} is not UTF-8")))?;
            params.push((name, value));
        }
        Ok(Self {
            params,
            // SAFETY: guaranteed by the caller.
            inputs: unsafe { slice_from(raw.inputs, raw.n_inputs) },
            // SAFETY: guaranteed by the caller.
            outputs: unsafe { slice_from(raw.outputs, raw.n_outputs) },
            split: (raw.split_axis != SPLIT_NONE).then_some((raw.split_axis as usize, raw.tile)),
            device_ordinal: raw.device_ordinal,
        })
    }

    /// Input descriptors.
    pub fn inputs(&self) -> &'a [TensorDesc] {
        self.inputs
    }

    /// Output descriptors.
    pub fn outputs(&self) -> &'a [TensorDesc] {
        self.outputs
    }

    /// `(axis, tile)` when launches are tiled.
    pub fn split(&self) -> Option<(usize, u64)> {
        self.split
    }

    /// CUDA device ordinal.
    pub fn device_ordinal(&self) -> u32 {
        self.device_ordinal
    }

    /// Names of every parameter given.
    pub fn param_names(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.params.iter().map(|(n, _)| *n)
    }

    /// The raw text of parameter `name`, if given.
    pub fn param(&self, name: &str) -> Option<&'a str> {
        self.params
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| *v)
    }

    /// Parameter `name` parsed as `T`; `None` when absent, an error naming it when malformed.
    pub fn parse_param<T: std::str::FromStr>(&self, name: &str) -> Result<Option<T>, KernelError>
    where
        T::Err: fmt::Display,
    {
        self.param(name)
            .map(|text| {
                text.trim().parse::<T>().map_err(|e| {
                    KernelError::invalid(format!("parameter {name}: cannot parse {text:?}: {e}"))
                })
            })
            .transpose()
    }

    /// Parameter `name` as a list of `T` (the graph writes `[a, b, c]`, the kernel receives
    /// `a, b, c`); `None` when absent, an error naming it and the item when malformed. An
    /// empty text is an empty list.
    pub fn parse_list<T: std::str::FromStr>(
        &self,
        name: &str,
    ) -> Result<Option<Vec<T>>, KernelError>
    where
        T::Err: fmt::Display,
    {
        self.param(name)
            .map(|text| parse_items(name, text))
            .transpose()
    }

    /// Parameter `name` as a matrix of `T`, row by row (the graph writes `[[a, b], [c, d]]`,
    /// the kernel receives `a, b; c, d`); every row must be as long as the first. `None` when
    /// absent.
    pub fn parse_matrix<T: std::str::FromStr>(
        &self,
        name: &str,
    ) -> Result<Option<Vec<Vec<T>>>, KernelError>
    where
        T::Err: fmt::Display,
    {
        let Some(text) = self.param(name) else {
            return Ok(None);
        };
        let rows: Vec<Vec<T>> = text
            .split(';')
            .map(|row| parse_items(name, row))
            .collect::<Result<_, _>>()?;
        if let Some(bad) = rows.iter().position(|r| r.len() != rows[0].len()) {
            return Err(KernelError::invalid(format!(
                "parameter {name}: row {bad} has {} items, row 0 has {}",
                rows[bad].len(),
                rows[0].len()
            )));
        }
        Ok(Some(rows))
    }

    /// Fails naming the first parameter not in `known`: a typo must not silently fall back to
    /// a default.
    pub fn reject_unknown_params(&self, known: &[&str]) -> Result<(), KernelError> {
        match self.param_names().find(|n| !known.contains(n)) {
            Some(unknown) => Err(KernelError::invalid(format!(
                "unknown parameter {unknown}; this kernel takes {}",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            ))),
            None => Ok(()),
        }
    }

    /// Checks that port `index` of `ports` has `dtype` and, where `dims` is given, those
    /// dimensions; the error names the port (`what`, e.g. "input 0").
    pub fn expect(
        ports: &[TensorDesc],
        index: usize,
        what: &str,
        dtype: Dtype,
        dims: Option<&[u64]>,
    ) -> Result<TensorDesc, KernelError> {
        let desc = ports
            .get(index)
            .ok_or_else(|| KernelError::invalid(format!("{what} is missing")))?;
        if desc.dtype != dtype {
            return Err(KernelError::invalid(format!(
                "{what} must be {}, got {}",
                dtype.name().unwrap_or("?"),
                desc.dtype.name().unwrap_or("an unknown dtype")
            )));
        }
        if let Some(dims) = dims
            && desc.dims() != dims
        {
            return Err(KernelError::invalid(format!(
                "{what} must have shape {dims:?}, got {:?}",
                desc.dims()
            )));
        }
        Ok(*desc)
    }
}

/// The comma-separated items of parameter `name`'s `text`, each parsed as `T`.
fn parse_items<T: std::str::FromStr>(name: &str, text: &str) -> Result<Vec<T>, KernelError>
where
    T::Err: fmt::Display,
{
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    text.split(',')
        .enumerate()
        .map(|(i, item)| {
            item.trim().parse::<T>().map_err(|e| {
                KernelError::invalid(format!(
                    "parameter {name}: item {i}, {:?}, cannot be parsed: {e}",
                    item.trim()
                ))
            })
        })
        .collect()
}

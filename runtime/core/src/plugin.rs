//! Kernel libraries: loading them, checking their tables, and calling their kernels safely.
//!
//! This module is the only place that crosses the C ABI of `kplace.h`. [`KernelLibrary::load`]
//! refuses a path that is not a regular file (before the loader opens it: a FIFO would block),
//! a library built for an ABI version this runtime does not load (it loads versions
//! [`ABI_MIN_VERSION`] to [`ABI_VERSION`], reading a version 1 table with its shorter entries),
//! whose entry symbol is missing, or whose table
//! is malformed (null names, missing functions, a kernel named twice for one device kind), each with a message
//! naming the file. A [`KernelState`] owns one `create`d state and destroys it on drop; it keeps
//! its library loaded for as long as it lives.

use std::ffi::{c_char, c_void};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kplace_abi::{
    ABI_MIN_VERSION, ABI_VERSION, CarryFlags, DeviceKind, ENTRY_SYMBOL, EntryFn, Kernel,
    KernelConfig, KernelFlags, KernelV1, LaunchArgs, Library, MemorySpace, Param, SPLIT_NONE,
    Status, Tensor, TensorDesc, Tile,
};

mod python;
mod table;
mod v1;

pub use python::{HOST_LIBRARY, PYTHON_ENV, PythonError};

pub use table::TableError;
use table::{read_entry, read_str};

use crate::model::placement::is_python_module;

/// Room for a kernel's error text; longer text is truncated by the kernel.
const ERROR_BUFFER: usize = 1024;

/// Why a library could not be loaded or a kernel could not be created.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// The file does not exist.
    #[error("kernel library {} does not exist", path.display())]
    Missing {
        /// The file.
        path: PathBuf,
    },
    /// The path names something other than a regular file (a directory, a FIFO, a device),
    /// refused before the loader opens it: opening a FIFO would block until a writer comes.
    #[error("kernel library {} is not a regular file (it is {kind}); name a shared library file", path.display())]
    NotAFile {
        /// The path.
        path: PathBuf,
        /// What it is instead: `a directory`, `a FIFO`, ...
        kind: &'static str,
    },
    /// The path's metadata cannot be read (permissions, a broken symlink, an I/O error).
    #[error("cannot read kernel library {}: {cause}", path.display())]
    Unreadable {
        /// The path.
        path: PathBuf,
        /// The error from `stat`.
        cause: std::io::Error,
    },
    /// The dynamic loader refused the file.
    #[error("cannot load kernel library {}: {}", path.display(), loader_reason(cause))]
    Load {
        /// The file.
        path: PathBuf,
        /// The loader's error.
        cause: libloading::Error,
    },
    /// The file exports no entry symbol.
    #[error("{} is not a kplace kernel library: it does not export {}", path.display(), entry_name())]
    NoEntry {
        /// The file.
        path: PathBuf,
    },
    /// The library was built against another ABI version.
    #[error(
        "kernel library {} was built for kplace ABI version {found}, but this kplace loads versions {ABI_MIN_VERSION} to {ABI_VERSION}; rebuild it against this kplace.h",
        path.display()
    )]
    AbiVersion {
        /// The file.
        path: PathBuf,
        /// The version in its table.
        found: u32,
    },
    /// The table breaks a rule of the ABI.
    #[error("kernel library {}: {rule}", path.display())]
    BadTable {
        /// The file.
        path: PathBuf,
        /// Which rule.
        rule: TableError,
    },
    /// A Python module could not be loaded as a kernel library: no interpreter, no host
    /// library, or the module's import or declarations failed.
    #[error("kernel library {}: {cause}", path.display())]
    Python {
        /// The module.
        path: PathBuf,
        /// Why (boxed: the loader's other errors are small).
        cause: Box<PythonError>,
    },
    /// A kernel's create failed.
    #[error("{kernel} ({}): create failed: {message} [{}]", library.display(), status.name())]
    Create {
        /// The kernel's name.
        kernel: String,
        /// Its library.
        library: PathBuf,
        /// The status it returned.
        status: Status,
        /// Its error text.
        message: String,
    },
}

/// The loader's error with its reason: libloading's `Display` says only "dlopen failed" and
/// keeps `dlerror`'s text (the file and why) in its source.
fn loader_reason(error: &libloading::Error) -> String {
    match std::error::Error::source(error) {
        Some(reason) => format!("{error}: {reason}"),
        None => error.to_string(),
    }
}

/// What a non-regular file is, for [`PluginError::NotAFile`].
fn file_kind(file_type: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if file_type.is_dir() {
        "a directory"
    } else if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else {
        "not a regular file"
    }
}

fn entry_name() -> &'static str {
    // ENTRY_SYMBOL is a NUL-terminated ASCII literal.
    std::str::from_utf8(&ENTRY_SYMBOL[..ENTRY_SYMBOL.len() - 1]).unwrap_or("kplace_library_entry")
}

/// A kernel's failure at launch.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{kernel}: launch failed: {message} [{}]", status.name())]
pub struct LaunchError {
    /// The kernel's name.
    pub kernel: String,
    /// The status it returned.
    pub status: Status,
    /// Its error text.
    pub message: String,
}

/// One kernel from a library's table.
#[derive(Clone, Debug)]
pub struct KernelInfo {
    /// Logical name.
    pub name: String,
    /// Where it runs.
    pub device: DeviceKind,
    /// Where its tensors live.
    pub memory: MemorySpace,
    /// Inputs it takes.
    pub n_inputs: u32,
    /// Outputs it writes.
    pub n_outputs: u32,
    /// What it declares (stateless for a version 1 library).
    pub flags: KernelFlags,
    /// The ABI version of its library: a version 1 kernel gets tensors of at most 4 dimensions,
    /// in version 1's layout.
    pub abi_version: u32,
    functions: Functions,
}

impl KernelInfo {
    /// Whether it carries state across frames.
    pub fn is_stateful(&self) -> bool {
        self.flags.contains(KernelFlags::STATEFUL)
    }
}

#[derive(Clone, Copy, Debug)]
struct Functions {
    create: kplace_abi::CreateFn,
    workspace_bytes: kplace_abi::WorkspaceBytesFn,
    launch: kplace_abi::LaunchFn,
    destroy: kplace_abi::DestroyFn,
    carry_bytes: Option<kplace_abi::CarryBytesFn>,
}

/// A loaded, checked kernel library.
#[derive(Debug)]
pub struct KernelLibrary {
    path: PathBuf,
    name: String,
    kernels: Vec<KernelInfo>,
    // Declared last so it is dropped last: the function pointers above point into it (for a
    // Python module, the host library that made its table).
    _library: Arc<libloading::Library>,
}

impl KernelLibrary {
    /// Loads and checks the library at `path`: a shared library, or a Python module (`.py`,
    /// whose table `libkplace_python.so` makes).
    pub fn load(path: &Path) -> Result<Arc<KernelLibrary>, PluginError> {
        // Only a regular file (or a link to one) reaches the loader: dlopen on a FIFO blocks
        // until something writes to it, and on a directory or device it fails obscurely.
        let metadata = match std::fs::metadata(path) {
            Ok(metadata) => metadata,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(PluginError::Missing {
                    path: path.to_path_buf(),
                });
            }
            Err(cause) => {
                return Err(PluginError::Unreadable {
                    path: path.to_path_buf(),
                    cause,
                });
            }
        };
        if !metadata.is_file() {
            return Err(PluginError::NotAFile {
                path: path.to_path_buf(),
                kind: file_kind(metadata.file_type()),
            });
        }
        let (library, table) = if is_python_module(path) {
            python::load(path)?
        } else {
            Self::open(path)?
        };
        let bad = |rule: TableError| PluginError::BadTable {
            path: path.to_path_buf(),
            rule,
        };
        if table.is_null() {
            return Err(bad(TableError::NullTable));
        }
        // SAFETY: abi_version is the first field in every ABI version, so it can be read
        // before the rest of the layout is trusted.
        let found = unsafe { *table.cast::<u32>() };
        if !(ABI_MIN_VERSION..=ABI_VERSION).contains(&found) {
            return Err(PluginError::AbiVersion {
                path: path.to_path_buf(),
                found,
            });
        }
        // SAFETY: the library header has this layout in every version this runtime loads, and
        // lives while the library is loaded.
        let table = unsafe { &*table };
        let name = read_str(table.name).ok_or_else(|| bad(TableError::LibraryName))?;
        if table.n_kernels > 0 && table.kernels.is_null() {
            return Err(bad(TableError::NullKernels(table.n_kernels)));
        }
        let raw: Vec<Kernel> = if table.n_kernels == 0 {
            Vec::new()
        } else if found == 1 {
            // SAFETY: non-null and n_kernels long, per the ABI; version 1 entries are
            // `kplace_kernel_v1`s.
            unsafe {
                std::slice::from_raw_parts(
                    table.kernels.cast::<KernelV1>(),
                    table.n_kernels as usize,
                )
            }
            .iter()
            .map(|&k| Kernel::from(k))
            .collect()
        } else {
            // SAFETY: non-null and n_kernels long, per the ABI.
            unsafe { std::slice::from_raw_parts(table.kernels, table.n_kernels as usize) }.to_vec()
        };
        let mut kernels: Vec<KernelInfo> = Vec::with_capacity(raw.len());
        for (i, k) in raw.iter().enumerate() {
            let info = KernelInfo {
                abi_version: found,
                ..read_entry(i, k).map_err(bad)?
            };
            // One kernel per name and device kind: a library may offer both a CPU and a CUDA
            // kernel of one logical name, never two of one kind.
            if kernels
                .iter()
                .any(|other| other.name == info.name && other.device == info.device)
            {
                return Err(bad(TableError::Twice {
                    device: info.device.name().unwrap_or("?"),
                    kernel: info.name,
                }));
            }
            kernels.push(info);
        }
        Ok(Arc::new(KernelLibrary {
            path: path.to_path_buf(),
            name,
            kernels,
            _library: library,
        }))
    }

    /// Opens the shared library at `path` and calls its entry: the library and its table.
    fn open(path: &Path) -> Result<(Arc<libloading::Library>, *const Library), PluginError> {
        // SAFETY: loading runs the library's initialisers; a kernel library is trusted code
        // chosen by the user, as any shared library a program links.
        let library =
            unsafe { libloading::Library::new(path) }.map_err(|source| PluginError::Load {
                path: path.to_path_buf(),
                cause: source,
            })?;
        // SAFETY: the symbol's type is fixed by the ABI.
        let entry: EntryFn = unsafe { library.get::<EntryFn>(ENTRY_SYMBOL) }
            .map(|symbol| *symbol)
            .map_err(|_| PluginError::NoEntry {
                path: path.to_path_buf(),
            })?;
        // SAFETY: the entry takes no arguments and returns a pointer to a static table.
        let table = unsafe { entry() };
        Ok((Arc::new(library), table))
    }

    /// The file it was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The name in its table.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Every kernel it offers.
    pub fn kernels(&self) -> &[KernelInfo] {
        &self.kernels
    }

    /// The kernel `name` for `device`, if offered.
    pub fn find(self: &Arc<Self>, name: &str, device: DeviceKind) -> Option<KernelHandle> {
        self.kernels
            .iter()
            .position(|k| k.name == name && k.device == device)
            .map(|index| KernelHandle {
                library: Arc::clone(self),
                index,
            })
    }
}

/// A kernel of a loaded library; keeps the library loaded.
#[derive(Clone, Debug)]
pub struct KernelHandle {
    library: Arc<KernelLibrary>,
    index: usize,
}

/// What `create` needs besides the kernel: the stage's parameters, tensors and tiling.
#[derive(Clone, Debug)]
pub struct CreateConfig<'a> {
    /// Parameters as text.
    pub params: &'a [(String, String)],
    /// Input descriptors.
    pub inputs: &'a [TensorDesc],
    /// Output descriptors.
    pub outputs: &'a [TensorDesc],
    /// `(axis, tile)` of a split stage.
    pub split: Option<(usize, u64)>,
    /// CUDA device ordinal (0 on the CPU).
    pub device_ordinal: u32,
}

impl KernelHandle {
    /// The kernel's table entry.
    pub fn info(&self) -> &KernelInfo {
        &self.library.kernels[self.index]
    }

    /// The library it comes from.
    pub fn library(&self) -> &Arc<KernelLibrary> {
        &self.library
    }

    /// Creates a state, validating parameters and shapes in the kernel.
    pub fn create(&self, config: &CreateConfig<'_>) -> Result<KernelState, PluginError> {
        let info = self.info();
        let create_error = |status: Status, message: String| PluginError::Create {
            kernel: info.name.clone(),
            library: self.library.path.clone(),
            status,
            message,
        };
        // Keep the C strings alive across the call.
        let texts: Vec<(std::ffi::CString, std::ffi::CString)> = config
            .params
            .iter()
            .map(|(n, v)| {
                Ok((
                    std::ffi::CString::new(n.as_str())?,
                    std::ffi::CString::new(v.as_str())?,
                ))
            })
            .collect::<Result<_, std::ffi::NulError>>()
            .map_err(|_| {
                create_error(
                    Status::INVALID_ARGUMENT,
                    "a parameter contains a NUL byte".into(),
                )
            })?;
        let params: Vec<Param> = texts
            .iter()
            .map(|(n, v)| Param {
                name: n.as_ptr(),
                value: v.as_ptr(),
            })
            .collect();
        let (split_axis, tile) = match config.split {
            Some((axis, tile)) => (axis as u32, tile),
            None => (SPLIT_NONE, 0),
        };
        // A version 1 kernel reads its descriptors in version 1's layout.
        let descs_v1 = (info.abi_version == 1)
            .then(|| v1::Descs::of(config.inputs, config.outputs))
            .transpose()
            .map_err(|why| create_error(Status::INVALID_ARGUMENT, why.to_string()))?;
        let (inputs, outputs) = match &descs_v1 {
            Some(descs) => descs.pointers(),
            None => (config.inputs.as_ptr(), config.outputs.as_ptr()),
        };
        let raw = KernelConfig {
            params: params.as_ptr(),
            inputs,
            outputs,
            n_params: params.len() as u32,
            n_inputs: config.inputs.len() as u32,
            n_outputs: config.outputs.len() as u32,
            split_axis,
            tile,
            device_ordinal: config.device_ordinal,
            reserved: 0,
        };
        let mut state: *mut c_void = std::ptr::null_mut();
        let mut error = [0 as c_char; ERROR_BUFFER];
        // SAFETY: every pointer in `raw` is valid for its count for the duration of the call;
        // the error buffer is ERROR_BUFFER bytes.
        let status =
            unsafe { (info.functions.create)(&raw, &mut state, error.as_mut_ptr(), ERROR_BUFFER) };
        if status != Status::OK {
            return Err(create_error(status, error_text(&error)));
        }
        if state.is_null() {
            return Err(create_error(
                Status::INTERNAL,
                "create returned OK but no state".into(),
            ));
        }
        // SAFETY: a state fresh from create.
        let workspace_bytes = unsafe { (info.functions.workspace_bytes)(state) };
        let carry_bytes = match info.functions.carry_bytes {
            // SAFETY: as above.
            Some(carry_bytes) if info.is_stateful() => unsafe { carry_bytes(state) },
            _ => 0,
        };
        Ok(KernelState {
            handle: self.clone(),
            state,
            workspace_bytes,
            carry_bytes,
        })
    }
}

fn error_text(buffer: &[c_char]) -> String {
    let bytes: Vec<u8> = buffer
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    if text.is_empty() {
        "(the kernel gave no reason)".into()
    } else {
        text
    }
}

/// One kernel state (per stage and frame slot), destroyed on drop.
#[derive(Debug)]
pub struct KernelState {
    handle: KernelHandle,
    state: *mut c_void,
    workspace_bytes: u64,
    carry_bytes: u64,
}

/// What a stateful launch receives besides its tensors: the stage's carry, and where the frame
/// stands in the stream.
#[derive(Clone, Copy, Debug)]
pub struct CarryArgs {
    /// The carry's address, in the kernel's memory.
    pub carry: *mut c_void,
    /// Its size: [`KernelState::carry_bytes`] at least.
    pub bytes: u64,
    /// The frame's number as the source gave it.
    pub frame: u64,
    /// Frames lost since the carry's previous launch.
    pub frames_missing: u64,
    /// Whether the carry was just zeroed.
    pub fresh: bool,
}

// SAFETY: the ABI requires kernels to accept launches on one state from any thread, and
// concurrent launches for disjoint tiles; the state pointer is never dereferenced here.
unsafe impl Send for KernelState {}
// SAFETY: as for Send: concurrent launches on one state are the ABI's rule.
unsafe impl Sync for KernelState {}

impl KernelState {
    /// Workspace bytes each concurrent launch needs.
    pub fn workspace_bytes(&self) -> u64 {
        self.workspace_bytes
    }

    /// Bytes the kernel carries from frame to frame: 0 unless it is stateful.
    pub fn carry_bytes(&self) -> u64 {
        self.carry_bytes
    }

    /// The kernel's table entry.
    pub fn info(&self) -> &KernelInfo {
        self.handle.info()
    }

    /// Runs (CPU) or enqueues (CUDA) one tile of a stateless stage. Allocates nothing unless
    /// the kernel fails.
    ///
    /// # Safety
    /// The tensors' data must be valid for their sizes in their memory spaces, the workspace
    /// valid for `workspace.1` bytes, and no concurrent launch may touch the same tile of the
    /// outputs or the same workspace.
    pub unsafe fn launch(
        &self,
        inputs: &[Tensor],
        outputs: &[Tensor],
        workspace: (*mut c_void, u64),
        stream: *mut c_void,
        tile: Tile,
    ) -> Result<(), LaunchError> {
        // SAFETY: forwarded from the caller's contract.
        unsafe { self.launch_with(inputs, outputs, workspace, stream, tile, None) }
    }

    /// [`KernelState::launch`], given the stage's carry when it is stateful.
    ///
    /// # Safety
    /// As for [`KernelState::launch`]; besides, the carry must be valid for `carry.bytes`
    /// bytes in the kernel's memory, and no other launch may use it meanwhile.
    pub unsafe fn launch_with(
        &self,
        inputs: &[Tensor],
        outputs: &[Tensor],
        workspace: (*mut c_void, u64),
        stream: *mut c_void,
        tile: Tile,
        carry: Option<&CarryArgs>,
    ) -> Result<(), LaunchError> {
        let mut args = LaunchArgs::new(inputs, outputs, workspace, stream, tile);
        // A version 1 kernel reads its tensors in version 1's layout, copied here (no
        // allocation); a version 2 kernel's launch neither builds nor fills the copies.
        let mut tensors_v1 = None;
        if self.info().abi_version == 1 {
            tensors_v1
                .insert(v1::Tensors::EMPTY)
                .fill(inputs, outputs, &mut args)
                .map_err(|misfit| LaunchError {
                    kernel: self.info().name.clone(),
                    status: Status::INVALID_ARGUMENT,
                    message: misfit.to_string(),
                })?;
        }
        if let Some(c) = carry {
            args.carry = c.carry;
            args.carry_bytes = c.bytes;
            args.frame = c.frame;
            args.frames_missing = c.frames_missing;
            args.carry_flags = if c.fresh { CarryFlags::FRESH.0 } else { 0 };
        }
        let mut error = [0 as c_char; ERROR_BUFFER];
        // SAFETY: the state came from this kernel's create; pointers valid per the caller.
        let status = unsafe {
            (self.info().functions.launch)(self.state, &args, error.as_mut_ptr(), ERROR_BUFFER)
        };
        if status == Status::OK {
            Ok(())
        } else {
            Err(LaunchError {
                kernel: self.info().name.clone(),
                status,
                message: error_text(&error),
            })
        }
    }
}

impl Drop for KernelState {
    fn drop(&mut self) {
        // SAFETY: the state came from create and is destroyed exactly once.
        unsafe { (self.info().functions.destroy)(self.state) };
    }
}

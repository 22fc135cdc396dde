//! The rules of a library's table: one entry read and checked ([`read_entry`]), and what each
//! broken rule says ([`TableError`]), for [`super::PluginError::BadTable`] to name the file.

use std::ffi::{CStr, c_char};

use kplace_abi::{ABI_VERSION, Kernel, KernelFlags};

use super::{Functions, KernelInfo};

/// A rule of the ABI that a library's table breaks.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    /// The entry function gave no table.
    #[error("{} returned null", super::entry_name())]
    NullTable,
    /// The library's own name.
    #[error("the library name is null or not UTF-8")]
    LibraryName,
    /// Kernels counted but no array of them.
    #[error("the table has {0} kernels but a null kernel array")]
    NullKernels(u32),
    /// Entry `0`'s name.
    #[error("kernel {0} has a null or non-UTF-8 name")]
    KernelName(usize),
    /// A kernel without one of the functions every kernel has.
    #[error("kernel {0} lacks a create, workspace_bytes, launch or destroy function")]
    Functions(String),
    /// A device kind the ABI does not define.
    #[error("kernel {kernel} has unknown device kind {kind}")]
    DeviceKind {
        /// The kernel.
        kernel: String,
        /// The kind's number.
        kind: u32,
    },
    /// A memory space the ABI does not define.
    #[error("kernel {kernel} has unknown memory space {space}")]
    MemorySpace {
        /// The kernel.
        kernel: String,
        /// The space's number.
        space: u32,
    },
    /// Flags this runtime does not know.
    #[error("kernel {kernel} has flags {flags:#x}, which this kplace does not know")]
    Flags {
        /// The kernel.
        kernel: String,
        /// Its flags.
        flags: u32,
    },
    /// A stateful kernel that cannot say how much it carries.
    #[error("kernel {0} is stateful but has no carry_bytes function")]
    NoCarryBytes(String),
    /// Two kernels of one name for one device kind.
    #[error("the table names {device} kernel {kernel} twice")]
    Twice {
        /// The device kind's name.
        device: &'static str,
        /// The kernel.
        kernel: String,
    },
}

/// Reads table entry `i`, checking what the ABI requires of one entry; the error is the rule
/// it breaks.
pub(super) fn read_entry(i: usize, k: &Kernel) -> Result<KernelInfo, TableError> {
    let kernel_name = read_str(k.name).ok_or(TableError::KernelName(i))?;
    let functions = match (k.create, k.workspace_bytes, k.launch, k.destroy) {
        (Some(create), Some(workspace_bytes), Some(launch), Some(destroy)) => Functions {
            create,
            workspace_bytes,
            launch,
            destroy,
            carry_bytes: k.carry_bytes,
        },
        _ => {
            return Err(TableError::Functions(kernel_name));
        }
    };
    if k.device.name().is_none() {
        return Err(TableError::DeviceKind {
            kernel: kernel_name,
            kind: k.device.0,
        });
    }
    if k.memory.name().is_none() {
        return Err(TableError::MemorySpace {
            kernel: kernel_name,
            space: k.memory.0,
        });
    }
    if !KernelFlags::KNOWN.contains(k.flags) {
        return Err(TableError::Flags {
            kernel: kernel_name,
            flags: k.flags.0,
        });
    }
    if k.flags.contains(KernelFlags::STATEFUL) && k.carry_bytes.is_none() {
        return Err(TableError::NoCarryBytes(kernel_name));
    }
    Ok(KernelInfo {
        name: kernel_name,
        device: k.device,
        memory: k.memory,
        n_inputs: k.n_inputs,
        n_outputs: k.n_outputs,
        flags: k.flags,
        abi_version: ABI_VERSION,
        functions,
    })
}

/// A table's string, when it is one: non-null and UTF-8.
pub(super) fn read_str(ptr: *const c_char) -> Option<String> {
    if ptr.is_null() {
        return None;
    }
    // SAFETY: non-null strings in a table are NUL-terminated and static (ABI rule).
    unsafe { CStr::from_ptr(ptr) }
        .to_str()
        .ok()
        .map(str::to_owned)
}

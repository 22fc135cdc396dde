//! Loading what [`crate::search`] finds: dlopen by absolute path or by name with libloading,
//! where the loader found a file (glibc's link map), the library's version, and whether the
//! names cudarc loads it by resolve to the object loaded here.

use std::ffi::{CStr, c_char, c_int, c_void};
use std::path::{Path, PathBuf};

use libloading::os::unix::{Library as Handle, RTLD_LAZY, RTLD_LOCAL};

use crate::search::{LoadError, Opened};

/// glibc's `RTLD_NOLOAD` (`<bits/dlfcn.h>`; the crate targets Linux with glibc, as `dlinfo`
/// does): open only an object already loaded.
const RTLD_NOLOAD: c_int = 0x0004;

/// libloading's error with its cause: the loader's own text (`libz.so.9: cannot open shared
/// object file: No such file or directory`), which libloading keeps as the source.
fn dl_text(e: &libloading::Error) -> String {
    match std::error::Error::source(e) {
        Some(cause) => cause.to_string(),
        None => e.to_string(),
    }
}

/// Opens the file at `path`.
pub(crate) fn open_file(path: &Path) -> Result<Handle, LoadError> {
    // SAFETY: loading runs the library's initialisers; the CUDA libraries' are what cudarc
    // would run on first use anyway, and the search only offers files named as they are.
    unsafe { Handle::open(Some(path), RTLD_LAZY | RTLD_LOCAL) }.map_err(|e| LoadError::Dlopen {
        loader: dl_text(&e),
    })
}

/// Opens the first of `names` the loader's path resolves (an object already loaded under that
/// name or soname included), returning where the loader found it.
pub(crate) fn open_names(names: &[String]) -> Result<Opened<Handle>, LoadError> {
    let mut unusual = None;
    for name in names {
        // SAFETY: as in `open_file`.
        match unsafe { Handle::open(Some(name.as_str()), RTLD_LAZY | RTLD_LOCAL) } {
            Ok(handle) => {
                let (handle, linked) = linked_path(handle);
                return Ok(Opened {
                    path: linked.unwrap_or_else(|| PathBuf::from(name)),
                    handle,
                });
            }
            Err(e) => {
                let text = dl_text(&e);
                // "cannot open shared object file" is the plain absence; anything else (a
                // missing dependency, a wrong ELF class) says why a present file failed.
                if unusual.is_none() && !text.contains("cannot open shared object file") {
                    unusual = Some(text);
                }
            }
        }
    }
    Err(match unusual {
        Some(loader) => LoadError::Dlopen { loader },
        None => LoadError::NotOnLoaderPath {
            names: names.to_vec(),
        },
    })
}

/// The leading fields of glibc's public `struct link_map` (`<link.h>`).
#[repr(C)]
struct LinkMap {
    l_addr: usize,
    l_name: *const c_char,
}

/// `handle`'s link map: the loaded object's identity, and the file it came from.
fn link_map(handle: Handle) -> (Handle, Option<(usize, PathBuf)>) {
    let raw = handle.into_raw();
    let mut map: *mut LinkMap = std::ptr::null_mut();
    // SAFETY: `raw` is a live dlopen handle; RTLD_DI_LINKMAP writes a `struct link_map *`.
    let ok = unsafe {
        libc::dlinfo(
            raw,
            libc::RTLD_DI_LINKMAP,
            (&mut map as *mut *mut LinkMap).cast::<c_void>(),
        )
    } == 0;
    let info = if ok && !map.is_null() {
        // SAFETY: glibc keeps the link map alive while the object is loaded, and `l_name` is
        // a NUL-terminated path (empty for the main program, which is never asked about).
        let name = unsafe { (*map).l_name };
        let path = if name.is_null() {
            PathBuf::new()
        } else {
            // SAFETY: as above.
            PathBuf::from(
                unsafe { CStr::from_ptr(name) }
                    .to_string_lossy()
                    .into_owned(),
            )
        };
        Some((map as usize, path))
    } else {
        None
    };
    // SAFETY: `raw` came from `into_raw` above and is owned again by the returned handle.
    (unsafe { Handle::from_raw(raw) }, info)
}

/// The file `handle` was loaded from, as the loader recorded it.
pub(crate) fn linked_path(handle: Handle) -> (Handle, Option<PathBuf>) {
    let (handle, info) = link_map(handle);
    (
        handle,
        info.map(|(_, p)| p).filter(|p| !p.as_os_str().is_empty()),
    )
}

/// Whether a dlopen of any of `names` (cudarc's names for the library, in cudarc's order)
/// would now give the object `handle` holds: the first name already naming a loaded object
/// must name this one. Returns the handle and, when not, a warning saying why.
pub(crate) fn check_names(
    handle: Handle,
    names: &[String],
    user: &str,
) -> (Handle, Option<String>) {
    let (handle, ours) = link_map(handle);
    let Some((ours, _)) = ours else {
        return (handle, None);
    };
    for name in names {
        // SAFETY: RTLD_NOLOAD loads nothing: it only returns an object already loaded.
        let Ok(other) = (unsafe { Handle::open(Some(name.as_str()), RTLD_LAZY | RTLD_NOLOAD) })
        else {
            continue;
        };
        let (_other, theirs) = link_map(other);
        return match theirs {
            Some((theirs, _)) if theirs == ours => (handle, None),
            Some((_, path)) => (
                handle,
                Some(format!(
                    "{user} loads it as {name}, which names another loaded library ({}): {user} \
                     will use that one",
                    path.display()
                )),
            ),
            None => (handle, None),
        };
    }
    (
        handle,
        Some(format!(
            "its soname is none of the names {user} loads it by ({}): {user} will not use this \
             file",
            names.join(", ")
        )),
    )
}

/// The version in a library's file name: what follows `.so.` (`libcufft.so.12.0.0.15` ->
/// `12.0.0.15`), if anything.
pub fn file_name_version(file: &Path) -> Option<String> {
    let name = file.file_name()?.to_str()?;
    let (_, version) = name.split_once(".so.")?;
    (!version.is_empty()).then(|| version.to_string())
}

type IntOut = unsafe extern "C" fn(*mut c_int) -> c_int;
type TwoIntOut = unsafe extern "C" fn(*mut c_int, *mut c_int) -> c_int;
type Property = unsafe extern "C" fn(c_int, *mut c_int) -> c_int;

/// Reads `handle`'s `symbol` of type `F` and calls `call` with it, `None` if it is missing.
fn with_symbol<F: Copy, T>(
    handle: &Handle,
    symbol: &[u8],
    call: impl FnOnce(F) -> Option<T>,
) -> Option<T> {
    // SAFETY: the caller names a symbol whose C type is `F` in the library's headers.
    let f = unsafe { handle.get::<F>(symbol) }.ok()?;
    call(*f)
}

/// The library's own version call, where there is a cheap one that needs no initialisation.
pub(crate) fn own_version(library: crate::Library, handle: &Handle) -> Option<String> {
    use crate::Library::*;
    match library {
        Cuda => with_symbol::<IntOut, _>(handle, b"cuDriverGetVersion\0", |f| {
            let mut v = 0;
            // SAFETY: one valid out-pointer; callable before cuInit.
            (unsafe { f(&mut v) } == 0 && v > 0).then(|| format!("{}.{}", v / 1000, v % 1000 / 10))
        }),
        Cufft => with_symbol::<IntOut, _>(handle, b"cufftGetVersion\0", |f| {
            let mut v = 0;
            // SAFETY: one valid out-pointer; a constant, no GPU involved.
            (unsafe { f(&mut v) } == 0 && v > 0)
                .then(|| format!("{}.{}.{}", v / 1000, v % 1000 / 100, v % 100))
        }),
        Nvrtc => with_symbol::<TwoIntOut, _>(handle, b"nvrtcVersion\0", |f| {
            let (mut major, mut minor) = (0, 0);
            // SAFETY: two valid out-pointers.
            (unsafe { f(&mut major, &mut minor) } == 0).then(|| format!("{major}.{minor}"))
        }),
        Cublas => with_symbol::<Property, _>(handle, b"cublasGetProperty\0", |f| {
            // libraryPropertyType: MAJOR_VERSION 0, MINOR_VERSION 1, PATCH_LEVEL 2.
            let mut parts = [0; 3];
            for (kind, part) in parts.iter_mut().enumerate() {
                // SAFETY: one valid out-pointer; a constant, no GPU involved.
                if unsafe { f(kind as c_int, part) } != 0 {
                    return None;
                }
            }
            Some(format!("{}.{}.{}", parts[0], parts[1], parts[2]))
        }),
        Nvml | NvrtcBuiltins | CublasLt => None,
    }
}

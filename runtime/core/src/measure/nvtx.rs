//! NVTX ranges around a traced run's launches and enqueues, for a profiler such as Nsight
//! Systems: each CPU launch and each GPU enqueue on a worker is a range named by its stage,
//! beside the same span in the run's own trace (`kplace run --trace`).
//!
//! The ranges go through the NVTX library when one can be loaded: `$KPLACE_NVTX_LIBRARY` if it
//! is set, else `libnvToolsExt.so.1` (NVTX 2, which CUDA 11 shipped and the `nvidia-nvtx-cu12`
//! Python wheel still does) on the loader path. CUDA 13's own NVTX 3 is a
//! header-only library that a profiler injects itself into; a program that does not compile
//! against its headers, as this one, reaches a profiler only through `libnvToolsExt`.
//!
//! Guarantees: without a library nothing is called and a run does not change; the range names
//! are made once, so a range allocates nothing; every push is popped on the same thread.

use std::ffi::{CStr, CString, c_char, c_int};

/// The environment variable naming the NVTX library to load.
pub const LIBRARY_ENV: &str = "KPLACE_NVTX_LIBRARY";

type PushFn = unsafe extern "C" fn(*const c_char) -> c_int;
type PopFn = unsafe extern "C" fn() -> c_int;

/// A loaded NVTX library and the names of the ranges a run pushes.
pub struct Nvtx {
    push: PushFn,
    pop: PopFn,
    names: Vec<CString>,
    // Last: the functions above point into it.
    _library: libloading::Library,
}

impl std::fmt::Debug for Nvtx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nvtx").field("names", &self.names).finish()
    }
}

impl Nvtx {
    /// The NVTX library (see the module's docs) with ranges named `names` (a stage's index is
    /// its range's), or `None` when none can be loaded (a debug event says why).
    pub fn load(names: &[String]) -> Option<Nvtx> {
        let candidates: Vec<std::ffi::OsString> = match std::env::var_os(LIBRARY_ENV) {
            Some(path) if !path.is_empty() => vec![path],
            _ => vec!["libnvToolsExt.so.1".into()],
        };
        for candidate in candidates {
            // SAFETY: loading runs the library's initialisers; an NVTX library's only set up
            // its own state.
            let library = match unsafe { libloading::Library::new(&candidate) } {
                Ok(library) => library,
                Err(e) => {
                    tracing::debug!("NVTX: {} not loaded: {e}", candidate.to_string_lossy());
                    continue;
                }
            };
            // SAFETY: the symbols have these C signatures in every NVTX version that exports
            // them (nvToolsExt.h: int nvtxRangePushA(const char *), int nvtxRangePop(void)).
            let functions = unsafe {
                library
                    .get::<PushFn>(b"nvtxRangePushA\0")
                    .and_then(|push| Ok((*push, *library.get::<PopFn>(b"nvtxRangePop\0")?)))
            };
            match functions {
                Ok((push, pop)) => {
                    tracing::debug!("NVTX: ranges through {}", candidate.to_string_lossy());
                    return Some(Nvtx {
                        push,
                        pop,
                        names: names
                            .iter()
                            .map(|n| CString::new(n.replace('\0', " ")).unwrap_or_default())
                            .collect(),
                        _library: library,
                    });
                }
                Err(e) => tracing::debug!(
                    "NVTX: {} has no range functions: {e}",
                    candidate.to_string_lossy()
                ),
            }
        }
        None
    }

    /// Opens range `index` (a stage) on this thread until the guard is dropped.
    pub fn range(&self, index: usize) -> Range<'_> {
        let name: &CStr = self.names.get(index).map_or(c"?", CString::as_c_str);
        // SAFETY: a NUL-terminated name that outlives the call; the library copies it.
        unsafe { (self.push)(name.as_ptr()) };
        Range {
            nvtx: self,
            _thread: std::marker::PhantomData,
        }
    }
}

/// An open NVTX range, closed when dropped, on the thread that opened it (not `Send`).
#[must_use = "the range closes when this is dropped"]
pub struct Range<'a> {
    nvtx: &'a Nvtx,
    _thread: std::marker::PhantomData<*const ()>,
}

impl Drop for Range<'_> {
    fn drop(&mut self) {
        // SAFETY: pops the range this guard pushed, on the thread that pushed it (the guard is
        // not Send).
        unsafe { (self.nvtx.pop)() };
    }
}

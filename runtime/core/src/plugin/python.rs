//! Kernel libraries written in Python: a `.py` module a placement names as a stage's library.
//!
//! Such a module is not a shared object. `libkplace_python.so` (found where kplace's own
//! libraries are) imports it and returns a kernel table of the ABI's own form, which the loader
//! then checks as any other. That library calls into Python, so the process needs an
//! interpreter: a Python program (`kplace.Pipeline`) has its own; the `kplace` command asks
//! `$KPLACE_PYTHON` (else `python3`) where its shared libpython and `sys.path` are, makes the
//! libpython's symbols global, and the library starts the interpreter with that `sys.path`, so
//! the user's virtual environment's packages import. Each step is done once per process;
//! neither library is ever unloaded (an interpreter cannot be).

use std::ffi::{CString, c_char};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use kplace_abi::Library;

use super::PluginError;
use crate::model::placement::library_search_dirs;
use crate::os::process::drain_tail;

/// The library that runs Python kernels.
pub const HOST_LIBRARY: &str = "libkplace_python.so";

/// The environment variable naming the Python interpreter the `kplace` command runs Python
/// kernels in (a virtual environment's `bin/python`); `python3` on `PATH` when unset.
pub const PYTHON_ENV: &str = "KPLACE_PYTHON";

/// How long the interpreter may take to say where it lives.
const ASK_TIMEOUT: Duration = Duration::from_secs(30);

/// The most of the interpreter's answer kept (its `sys.path`, as JSON).
const MAX_ANSWER: usize = 1 << 20;

/// The host library's entry: a module's table, or null with the reason in `error`.
type ModuleFn = unsafe extern "C" fn(
    path: *const c_char,
    sys_path: *const *const c_char,
    n_sys_path: u32,
    error: *mut c_char,
    error_len: usize,
) -> *const Library;

const MODULE_SYMBOL: &[u8] = b"kplace_python_module_v1\0";

/// Why a Python module could not be loaded as a kernel library.
#[derive(Clone, Debug, thiserror::Error)]
pub enum PythonError {
    /// libkplace_python.so is in none of the library directories.
    #[error(
        "it is a Python module, and {HOST_LIBRARY}, which runs Python kernels, was not found in: {dirs} (build it with `cargo build`, or set KPLACE_LIB_DIR)"
    )]
    NoHost {
        /// The directories looked in, joined.
        dirs: String,
    },
    /// The dynamic loader refused libkplace_python.so.
    #[error("cannot load {}: {reason}", file.display())]
    HostLoad {
        /// The file.
        file: PathBuf,
        /// The loader's words.
        reason: String,
    },
    /// libkplace_python.so lacks this runtime's entry.
    #[error(
        "{HOST_LIBRARY} does not export kplace_python_module_v1: it is from another kplace; rebuild it"
    )]
    HostVersion,
    /// The interpreter could not be started.
    #[error("cannot run the Python interpreter {} to run Python kernels in: {reason}; name one with {PYTHON_ENV}", python.display())]
    Spawn {
        /// The interpreter.
        python: PathBuf,
        /// Why.
        reason: String,
    },
    /// The interpreter did not say where it lives in time.
    #[error("the Python interpreter {} did not answer within {} s", python.display(), ASK_TIMEOUT.as_secs())]
    Timeout {
        /// The interpreter.
        python: PathBuf,
    },
    /// The interpreter failed, or could not be waited for.
    #[error("the Python interpreter {} failed ({status}): {stderr}", python.display())]
    Failed {
        /// The interpreter.
        python: PathBuf,
        /// Its exit status, or why it could not be waited for.
        status: String,
        /// The end of what it wrote on stderr.
        stderr: String,
    },
    /// What the interpreter said is not the answer asked for.
    #[error("cannot read what the Python interpreter {} said about itself: {reason}", python.display())]
    Answer {
        /// The interpreter.
        python: PathBuf,
        /// Why.
        reason: String,
    },
    /// The interpreter has no shared libpython to load.
    #[error(
        "{} (Python {version}) has no shared libpython (it looked for {looked}), which the kplace command needs to run Python kernels; name an interpreter that has one with {PYTHON_ENV}, or run the graph from Python (kplace.Pipeline)",
        python.display()
    )]
    NoSharedLibrary {
        /// The interpreter.
        python: PathBuf,
        /// Its version.
        version: String,
        /// The files looked for, joined.
        looked: String,
    },
    /// The dynamic loader refused the interpreter's libpython.
    #[error("cannot load the libpython {} of {} (Python {version}): {reason}", library.display(), python.display())]
    LibraryLoad {
        /// The interpreter.
        python: PathBuf,
        /// Its version.
        version: String,
        /// The libpython.
        library: PathBuf,
        /// The loader's words.
        reason: String,
    },
    /// The module's path cannot be passed to C.
    #[error("the path holds a NUL byte")]
    NulPath,
    /// The host library refused the module: its import, its declarations, NumPy missing.
    #[error("{message}")]
    Module {
        /// What the host library said.
        message: String,
    },
}

/// The interpreter kernels run in, once found.
#[derive(Debug)]
struct Interpreter {
    /// Its `sys.path`, for the host library to start it with; empty when the process already
    /// runs an interpreter.
    sys_path: Vec<CString>,
    /// Its libpython, loaded with global symbols (none when the process has an interpreter).
    _libpython: Option<libloading::Library>,
}

/// Loads the host library and returns it with the table of the module at `path`.
pub fn load(path: &Path) -> Result<(Arc<libloading::Library>, *const Library), PluginError> {
    module(path).map_err(|cause| PluginError::Python {
        path: path.to_path_buf(),
        cause: Box::new(cause),
    })
}

fn module(path: &Path) -> Result<(Arc<libloading::Library>, *const Library), PythonError> {
    let interpreter = interpreter().map_err(Clone::clone)?;
    let host = host()?;
    // SAFETY: the symbol's type is this crate's contract with libkplace_python.so, which is
    // built from the same workspace.
    let module: ModuleFn = unsafe { host.get::<ModuleFn>(MODULE_SYMBOL) }
        .map(|symbol| *symbol)
        .map_err(|_| PythonError::HostVersion)?;
    let file =
        CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| PythonError::NulPath)?;
    let dirs: Vec<*const c_char> = interpreter.sys_path.iter().map(|d| d.as_ptr()).collect();
    let mut error = vec![0u8; super::ERROR_BUFFER];
    // SAFETY: every pointer is valid for the call (the strings are NUL-terminated and live in
    // `file` and `interpreter`), and the error buffer is `error.len()` bytes.
    let table = unsafe {
        module(
            file.as_ptr(),
            dirs.as_ptr(),
            dirs.len() as u32,
            error.as_mut_ptr().cast(),
            error.len(),
        )
    };
    if table.is_null() {
        let end = error.iter().position(|&b| b == 0).unwrap_or(error.len());
        return Err(PythonError::Module {
            message: String::from_utf8_lossy(&error[..end]).into_owned(),
        });
    }
    Ok((host, table))
}

/// libkplace_python.so, loaded once, never unloaded.
fn host() -> Result<Arc<libloading::Library>, PythonError> {
    static HOST: Mutex<Option<Arc<libloading::Library>>> = Mutex::new(None);
    let mut host = HOST.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(loaded) = host.as_ref() {
        return Ok(Arc::clone(loaded));
    }
    let dirs = library_search_dirs();
    let file = dirs
        .iter()
        .map(|d| d.join(HOST_LIBRARY))
        .find(|f| f.is_file())
        .ok_or_else(|| PythonError::NoHost {
            dirs: dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        })?;
    // SAFETY: loading runs the library's initialisers; it is kplace's own. NODELETE: it calls
    // into an interpreter that outlives any plan, so it stays mapped for the process.
    let loaded = unsafe {
        libloading::os::unix::Library::open(Some(&file), libc::RTLD_NOW | libc::RTLD_NODELETE)
    }
    .map_err(|e| PythonError::HostLoad {
        reason: super::loader_reason(&e),
        file,
    })?;
    let loaded = Arc::new(libloading::Library::from(loaded));
    *host = Some(Arc::clone(&loaded));
    Ok(loaded)
}

/// The interpreter, found once per process (an error is kept too: asking again would only
/// say the same).
fn interpreter() -> Result<&'static Interpreter, &'static PythonError> {
    static FOUND: OnceLock<Result<Interpreter, PythonError>> = OnceLock::new();
    FOUND.get_or_init(find_interpreter).as_ref()
}

fn find_interpreter() -> Result<Interpreter, PythonError> {
    // SAFETY: looking a symbol up in the process's global scope loads nothing.
    let this = libloading::os::unix::Library::this();
    // SAFETY: only the symbol's presence is read, never called through this pointer.
    if unsafe { this.get::<unsafe extern "C" fn() -> i32>(b"Py_IsInitialized\0") }.is_ok() {
        return Ok(Interpreter {
            sys_path: Vec::new(),
            _libpython: None,
        });
    }
    let python = std::env::var_os(PYTHON_ENV)
        .filter(|p| !p.is_empty())
        .map_or_else(|| PathBuf::from("python3"), PathBuf::from);
    let answer = ask(&python)?;
    let library = answer
        .libraries
        .iter()
        .map(PathBuf::from)
        .find(|l| l.is_file())
        .ok_or_else(|| PythonError::NoSharedLibrary {
            python: python.clone(),
            version: answer.version.clone(),
            looked: answer.libraries.join(", "),
        })?;
    // SAFETY: loading libpython runs its initialisers, which start nothing; GLOBAL makes its
    // symbols those the host library's undefined ones resolve to.
    let libpython = unsafe {
        libloading::os::unix::Library::open(
            Some(&library),
            libc::RTLD_NOW | libc::RTLD_GLOBAL | libc::RTLD_NODELETE,
        )
    }
    .map_err(|e| PythonError::LibraryLoad {
        python: python.clone(),
        version: answer.version.clone(),
        reason: super::loader_reason(&e),
        library: library.clone(),
    })?;
    let sys_path = answer
        .path
        .into_iter()
        .filter_map(|d| CString::new(d).ok())
        .collect();
    Ok(Interpreter {
        sys_path,
        _libpython: Some(libpython.into()),
    })
}

/// What the interpreter says about itself.
#[derive(serde::Deserialize)]
struct Answer {
    version: String,
    /// Its shared libpython's candidate files, the likeliest first.
    libraries: Vec<String>,
    /// `sys.path`.
    path: Vec<String>,
}

/// Printed by the interpreter: where its shared libpython would be, and its `sys.path`.
const ASK: &str = "import json, os, platform, sys, sysconfig\n\
v = sysconfig.get_config_var\n\
names = [n for n in (v('INSTSONAME'), v('LDLIBRARY')) if n and '.so' in n]\n\
dirs = [d for d in (v('LIBDIR'), os.path.join(sys.base_prefix, 'lib')) if d]\n\
libs = [os.path.join(d, n) for n in names for d in dirs]\n\
print(json.dumps({'version': platform.python_version(), 'libraries': libs, 'path': sys.path}))\n";

/// Runs `python` to ask where it lives, with a deadline and its output bounded.
fn ask(python: &Path) -> Result<Answer, PythonError> {
    let mut child = Command::new(python)
        .args(["-c", ASK])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| PythonError::Spawn {
            python: python.to_path_buf(),
            reason: e.to_string(),
        })?;
    // Read whole on their own threads, so the interpreter never blocks on a full pipe; kept
    // to their ends (an answer longer than that no longer reads as one).
    let stdout = child
        .stdout
        .take()
        .map(|out| std::thread::spawn(move || drain_tail(out, MAX_ANSWER)));
    let stderr = child
        .stderr
        .take()
        .map(|err| std::thread::spawn(move || drain_tail(err, 2048)));
    let failed = |status: String, stderr: String| PythonError::Failed {
        python: python.to_path_buf(),
        status,
        stderr,
    };
    let deadline = Instant::now() + ASK_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(PythonError::Timeout {
                    python: python.to_path_buf(),
                });
            }
            Err(e) => return Err(failed(format!("cannot wait for it: {e}"), String::new())),
        }
    };
    let text = stdout.and_then(|t| t.join().ok()).unwrap_or_default();
    let errors = stderr.and_then(|t| t.join().ok()).unwrap_or_default();
    if !status.success() {
        return Err(failed(status.to_string(), errors.trim().to_string()));
    }
    serde_json::from_str(&text).map_err(|e| PythonError::Answer {
        python: python.to_path_buf(),
        reason: e.to_string(),
    })
}

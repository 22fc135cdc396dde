//! The one place kplace finds the CUDA libraries it loads at run time: the driver's libcuda and
//! NVML, and the user-space cuFFT, NVRTC (with its builtins) and cuBLAS (with cuBLASLt).
//!
//! Machines keep them in different places: a toolkit in `/usr/local/cuda/lib64`, a container's
//! driver in a read-only `/usr/local/nvidia/lib64` that may not be on the loader's path, or
//! only the `nvidia-*` Python wheels of the machine's `python3`. [`find`] searches, per
//! library, in the order [`search`] states (`KPLACE_CUDA_LIB_DIR`, the loader's path, the
//! system directories, the Python packages), never in a `stubs` directory, and loads the first
//! file that opens, by absolute path.
//!
//! # What it guarantees
//! - Each library is searched for and loaded at most once per process, and stays loaded for
//!   the life of the process. [`find`] never panics and never fails: not finding a library is
//!   an answer, whose [`LibraryReport::searched`] says every place looked at and why each gave
//!   nothing.
//! - A library found is loaded before cudarc or nvml-wrapper loads it: cudarc dlopens by name
//!   (`libcuda.so.1`, `libcufft.so.12`, `libnvrtc.so.13`, `libcublas.so.13`, ...), and glibc
//!   gives an already loaded object whose soname matches the name, so cudarc uses the file
//!   found here. The report warns when the file's soname is none of cudarc's names. NVML is
//!   opened by nvml-wrapper from [`LibraryReport::path`].
//! - NVRTC's builtins (`libnvrtc-builtins.so.<major>.<minor>`, which libnvrtc dlopens itself
//!   when it compiles) are loaded from libnvrtc's directory before libnvrtc; cuBLASLt is loaded
//!   before cuBLAS, which needs it.
//! - The search itself ([`search::search`]) takes its environment, its Python answer and its
//!   loader as arguments, so it is tested on made-up layouts.
//!
//! One limit: cudarc tries its names in its own order and takes the first that loads, so a
//! different `libcufft.so` on the loader's path, say, would still win over a file found in
//! `KPLACE_CUDA_LIB_DIR` under `libcufft.so.12`.

pub mod load;
pub mod search;

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use libloading::os::unix::Library as Handle;
use serde::Serialize;

pub use search::{Attempt, Environment};

/// The variable naming directories to search first (one, or a `:`-separated list).
pub const LIB_DIR_ENV: &str = "KPLACE_CUDA_LIB_DIR";

/// The variable naming a Python interpreter to ask, before `python3`, where the `nvidia`
/// packages are.
pub const PYTHON_ENV: &str = "KPLACE_PYTHON";

/// How long a Python interpreter may take to answer.
pub const PYTHON_TIMEOUT: Duration = Duration::from_secs(5);

/// What Python is asked: the directories of the `nvidia` namespace package.
const PYTHON_SCRIPT: &str = "import nvidia, os; print(os.pathsep.join(nvidia.__path__))";

/// The CUDA libraries kplace loads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Library {
    /// The driver API, `libcuda.so.1` (the NVIDIA driver's).
    Cuda,
    /// NVML, `libnvidia-ml.so.1` (the NVIDIA driver's).
    Nvml,
    /// cuFFT, `libcufft.so.12`.
    Cufft,
    /// NVRTC's builtins, `libnvrtc-builtins.so.<major>.<minor>`, found beside libnvrtc.
    NvrtcBuiltins,
    /// NVRTC, `libnvrtc.so.13`.
    Nvrtc,
    /// cuBLASLt, `libcublasLt.so.13` (cuBLAS needs it).
    CublasLt,
    /// cuBLAS, `libcublas.so.13`.
    Cublas,
}

impl Library {
    /// Every library, in report order.
    pub const ALL: [Library; 7] = [
        Library::Cuda,
        Library::Nvml,
        Library::Cufft,
        Library::NvrtcBuiltins,
        Library::Nvrtc,
        Library::CublasLt,
        Library::Cublas,
    ];

    /// The toolkit's user-space libraries (not the driver's), whose directories
    /// [`library_path`] lists.
    pub const USER_SPACE: [Library; 5] = [
        Library::Cufft,
        Library::NvrtcBuiltins,
        Library::Nvrtc,
        Library::CublasLt,
        Library::Cublas,
    ];

    /// The library's name, e.g. `libcufft`.
    pub fn name(self) -> &'static str {
        match self {
            Library::Cuda => "libcuda",
            Library::Nvml => "libnvidia-ml",
            Library::Cufft => "libcufft",
            Library::NvrtcBuiltins => "libnvrtc-builtins",
            Library::Nvrtc => "libnvrtc",
            Library::CublasLt => "libcublasLt",
            Library::Cublas => "libcublas",
        }
    }

    /// The file names searched for, most preferred first: cudarc's own names for the library
    /// (so what is found is what cudarc's dlopen by name resolves to), Linux's only. Empty for
    /// the builtins, which are looked for beside libnvrtc.
    pub fn file_names(self) -> Vec<String> {
        let stem = match self {
            Library::Cuda => "cuda",
            Library::Cufft => "cufft",
            Library::Nvrtc => "nvrtc",
            Library::CublasLt => "cublasLt",
            Library::Cublas => "cublas",
            Library::Nvml => {
                return vec!["libnvidia-ml.so.1".into(), "libnvidia-ml.so".into()];
            }
            Library::NvrtcBuiltins => return Vec::new(),
        };
        let prefix = format!("lib{stem}.so");
        cudarc::get_lib_name_candidates(stem)
            .into_iter()
            .filter(|n| n == &prefix || n.starts_with(&format!("{prefix}.")))
            .collect()
    }

    fn index(self) -> usize {
        Library::ALL
            .iter()
            .position(|&l| l == self)
            .unwrap_or_default()
    }
}

impl fmt::Display for Library {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What the search for one library found. Plain data: `Display` for people, `Serialize` for
/// machines (`kplace devices --json`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LibraryReport {
    /// The library, e.g. `libcufft`.
    pub name: String,
    /// The file loaded, as found (a directory's entry, or where the loader found it).
    pub loaded: Option<String>,
    /// The real file behind it, symbolic links resolved (e.g. `.../libcufft.so.12.0.0.15`).
    pub file: Option<String>,
    /// The version: the library's own version call where one is cheap (`cuDriverGetVersion`,
    /// `cufftGetVersion`, `nvrtcVersion`, `cublasGetProperty`), else the real file name's
    /// suffix; `None` when neither says.
    pub version: Option<String>,
    /// Every place looked at, in order, and what each gave.
    pub searched: Vec<Attempt>,
    /// Problems with what was loaded: a soname cudarc will not find, NVRTC without builtins.
    pub warnings: Vec<String>,
}

impl LibraryReport {
    fn not_found(library: Library, searched: Vec<Attempt>) -> Self {
        LibraryReport {
            name: library.name().into(),
            loaded: None,
            file: None,
            version: None,
            searched,
            warnings: Vec::new(),
        }
    }

    /// Whether the library was loaded.
    pub fn is_loaded(&self) -> bool {
        self.loaded.is_some()
    }

    /// The file loaded, if any.
    pub fn path(&self) -> Option<&Path> {
        self.loaded.as_deref().map(Path::new)
    }

    /// A one-line account of where the library was looked for, for errors: `libcufft not
    /// found (KPLACE_CUDA_LIB_DIR: not set; loader path: no ...; ...)`.
    pub fn not_found_message(&self) -> String {
        let places: Vec<String> = self
            .searched
            .iter()
            .map(|a| format!("{}: {}", a.place, a.result))
            .collect();
        format!(
            "{} not found ({}); set {LIB_DIR_ENV} to the directory that holds it",
            self.name,
            places.join("; ")
        )
    }
}

impl fmt::Display for LibraryReport {
    /// `libcufft: /dir/libcufft.so.12 (libcufft.so.12.0.0.15, version 12.0.0)`, or `libcuda:
    /// not found, looked in:` and one indented line per place; warnings on lines of their own.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.loaded {
            Some(loaded) => {
                write!(f, "{}: {loaded}", self.name)?;
                let real = self
                    .file
                    .as_deref()
                    .filter(|file| file != loaded)
                    .and_then(|file| Path::new(file).file_name())
                    .map(|n| n.to_string_lossy().into_owned());
                match (real, &self.version) {
                    (Some(real), Some(v)) => write!(f, " ({real}, version {v})")?,
                    (Some(real), None) => write!(f, " ({real})")?,
                    (None, Some(v)) => write!(f, " (version {v})")?,
                    (None, None) => {}
                }
                writeln!(f)?;
            }
            None => {
                writeln!(f, "{}: not found, looked in:", self.name)?;
                for a in &self.searched {
                    writeln!(f, "    {}: {}", a.place, a.result)?;
                }
            }
        }
        for w in &self.warnings {
            writeln!(f, "    warning: {w}")?;
        }
        Ok(())
    }
}

/// A report and the handles that keep its library loaded.
struct Found {
    report: LibraryReport,
    _handles: Vec<Handle>,
}

/// Finds and loads `library`, once per process; later calls return the same report.
pub fn find(library: Library) -> &'static LibraryReport {
    &found(library).report
}

/// Every library's report, in [`Library::ALL`]'s order (searching for each not yet sought).
pub fn find_all() -> Vec<&'static LibraryReport> {
    Library::ALL.iter().map(|&l| find(l)).collect()
}

/// The directories of the user-space libraries found ([`Library::USER_SPACE`]), each once, in
/// that order: what another program's `LD_LIBRARY_PATH` needs to load the same files.
pub fn library_path() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for library in Library::USER_SPACE {
        if let Some(dir) = find(library).path().and_then(Path::parent)
            && !dirs.iter().any(|d| d == dir)
        {
            dirs.push(dir.to_path_buf());
        }
    }
    dirs
}

fn found(library: Library) -> &'static Found {
    static FOUND: [OnceLock<Found>; 7] = [const { OnceLock::new() }; 7];
    static NVRTC: OnceLock<(Found, Found)> = OnceLock::new();
    let env = || Environment::from_process();
    match library {
        Library::Nvrtc => {
            &NVRTC
                .get_or_init(|| find_nvrtc(&env(), &mut python_packages))
                .0
        }
        Library::NvrtcBuiltins => {
            &NVRTC
                .get_or_init(|| find_nvrtc(&env(), &mut python_packages))
                .1
        }
        Library::Cublas => FOUND[library.index()].get_or_init(|| {
            // cuBLAS needs cuBLASLt: loaded first, its DT_NEEDED resolves to it.
            found(Library::CublasLt);
            find_in(library, &env(), &mut python_packages)
        }),
        _ => FOUND[library.index()].get_or_init(|| find_in(library, &env(), &mut python_packages)),
    }
}

/// Why one Python interpreter did not say where the `nvidia` packages are.
#[derive(Clone, Debug, thiserror::Error)]
pub enum PythonFailure {
    /// It could not be started (not installed, not executable).
    #[error("not runnable: {0}")]
    NotRunnable(std::sync::Arc<std::io::Error>),
    /// It did not exit within the timeout, and was killed.
    #[error("no answer within {} s", .0.as_secs_f64())]
    NoAnswer(Duration),
    /// Waiting for it failed.
    #[error("cannot wait for it: {0}")]
    Wait(std::sync::Arc<std::io::Error>),
    /// It failed: the last line it wrote to stderr, or its exit status when it wrote none.
    #[error("no nvidia package ({why})")]
    NoPackage {
        /// Its last words, or its exit status.
        why: String,
    },
}

/// Why no Python interpreter said where the `nvidia` packages are: each one asked, with why.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{}", each_failure(.failures))]
pub struct NoPythonAnswer {
    /// Each interpreter asked, and its failure.
    pub failures: Vec<(PathBuf, PythonFailure)>,
}

/// `python: why; python: why`.
fn each_failure(failures: &[(PathBuf, PythonFailure)]) -> String {
    let each: Vec<String> = failures
        .iter()
        .map(|(python, e)| format!("{}: {e}", python.display()))
        .collect();
    each.join("; ")
}

/// The directories Python lists for the `nvidia` package, asked once per process.
fn python_packages() -> Result<Vec<PathBuf>, NoPythonAnswer> {
    static ANSWER: OnceLock<Result<Vec<PathBuf>, NoPythonAnswer>> = OnceLock::new();
    ANSWER
        .get_or_init(|| {
            let mut interpreters = Vec::new();
            if let Some(p) = std::env::var_os(PYTHON_ENV).filter(|p| !p.is_empty()) {
                interpreters.push(PathBuf::from(p));
            }
            interpreters.push(PathBuf::from("python3"));
            ask_pythons(&interpreters, PYTHON_TIMEOUT)
        })
        .clone()
}

/// Asks each interpreter for the `nvidia` package's directories; the union of the answers, or
/// every interpreter's failure when none answered.
pub fn ask_pythons(
    interpreters: &[PathBuf],
    timeout: Duration,
) -> Result<Vec<PathBuf>, NoPythonAnswer> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    let mut failures = Vec::new();
    let mut answered = false;
    for python in interpreters {
        match ask_python(python, timeout) {
            Ok(found) => {
                answered = true;
                for d in found {
                    if !dirs.contains(&d) {
                        dirs.push(d);
                    }
                }
            }
            Err(e) => failures.push((python.clone(), e)),
        }
    }
    if answered {
        Ok(dirs)
    } else {
        Err(NoPythonAnswer { failures })
    }
}

/// Runs `python -c PYTHON_SCRIPT`, killing it after `timeout`.
fn ask_python(python: &Path, timeout: Duration) -> Result<Vec<PathBuf>, PythonFailure> {
    let mut child = Command::new(python)
        .args(["-c", PYTHON_SCRIPT])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| PythonFailure::NotRunnable(e.into()))?;
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(PythonFailure::NoAnswer(timeout));
            }
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(PythonFailure::Wait(e.into()));
            }
        }
    };
    // The child has exited: its pipes hold all it wrote (a few hundred bytes at most).
    let mut stdout = String::new();
    let mut stderr = String::new();
    if let Some(mut out) = child.stdout.take() {
        let _ = out.read_to_string(&mut stdout);
    }
    if let Some(mut err) = child.stderr.take() {
        let _ = err.read_to_string(&mut stderr);
    }
    if !status.success() {
        let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
        let why = match last {
            Some(line) => line.trim().to_string(),
            None => status.to_string(),
        };
        return Err(PythonFailure::NoPackage { why });
    }
    Ok(search::split_dirs(std::ffi::OsStr::new(stdout.trim())))
}

/// Searches for and loads a library other than NVRTC and its builtins.
fn find_in(
    library: Library,
    env: &Environment,
    python: &mut dyn FnMut() -> Result<Vec<PathBuf>, NoPythonAnswer>,
) -> Found {
    let names = library.file_names();
    let outcome = search::search(&names, env, python, &mut |target| match target {
        search::Target::File(path) => load::open_file(path).map(|handle| search::Opened {
            path: path.to_path_buf(),
            handle,
        }),
        search::Target::Names(names) => load::open_names(names),
    });
    let Some(opened) = outcome.opened else {
        return Found {
            report: LibraryReport::not_found(library, outcome.searched),
            _handles: Vec::new(),
        };
    };
    // NVML is opened by nvml-wrapper from the path found; the others by cudarc, by name.
    let (handle, warning) = if library == Library::Nvml {
        (opened.handle, None)
    } else {
        load::check_names(opened.handle, &names, "cudarc")
    };
    loaded_report(library, &opened.path, handle, outcome.searched, warning)
}

fn loaded_report(
    library: Library,
    path: &Path,
    handle: Handle,
    searched: Vec<Attempt>,
    warning: Option<String>,
) -> Found {
    let file = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let version = load::own_version(library, &handle).or_else(|| load::file_name_version(&file));
    Found {
        report: LibraryReport {
            name: library.name().into(),
            loaded: Some(path.display().to_string()),
            file: Some(file.display().to_string()),
            version,
            searched,
            warnings: warning.into_iter().collect(),
        },
        _handles: vec![handle],
    }
}

/// The newest `libnvrtc-builtins.so.<major>.<minor>` in `dir` (of `major`, when given).
pub fn builtins_in(dir: &Path, major: Option<u32>) -> Option<PathBuf> {
    let entries = std::fs::read_dir(dir).ok()?;
    entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let version = name.strip_prefix("libnvrtc-builtins.so.")?;
            let (a, b) = version.split_once('.')?;
            let (a, b) = (a.parse::<u32>().ok()?, b.parse::<u32>().ok()?);
            (major.is_none_or(|m| m == a) && e.path().is_file()).then(|| ((a, b), e.path()))
        })
        .max()
        .map(|(_, path)| path)
}

/// The major version in a libnvrtc file name (`libnvrtc.so.13` -> 13).
fn soname_major(path: &Path) -> Option<u32> {
    let version = load::file_name_version(path)?;
    version.split('.').next()?.parse().ok()
}

/// Searches for libnvrtc and loads its builtins: from a directory, the builtins beside it
/// first (a libnvrtc without them is passed over); from the loader's path, the builtins beside
/// the file the loader found, else by name.
fn find_nvrtc(
    env: &Environment,
    python: &mut dyn FnMut() -> Result<Vec<PathBuf>, NoPythonAnswer>,
) -> (Found, Found) {
    let names = Library::Nvrtc.file_names();
    let mut builtins: Option<(PathBuf, Handle, Attempt)> = None;
    let outcome = search::search(&names, env, python, &mut |target| match target {
        search::Target::File(path) => {
            let dir = path.parent().unwrap_or(Path::new("."));
            let Some(file) = builtins_in(dir, soname_major(path)) else {
                return Err(search::LoadError::NoBuiltinsBeside);
            };
            let b = load::open_file(&file).map_err(|e| search::LoadError::Builtins {
                path: file.clone(),
                why: Box::new(e),
            })?;
            let handle = load::open_file(path)?;
            builtins = Some((
                file.clone(),
                b,
                Attempt {
                    place: file.display().to_string(),
                    result: "loaded (beside libnvrtc)".into(),
                },
            ));
            Ok(search::Opened {
                path: path.to_path_buf(),
                handle,
            })
        }
        search::Target::Names(names) => load::open_names(names),
    });
    let Some(opened) = outcome.opened else {
        let not_sought = vec![Attempt {
            place: "beside libnvrtc".into(),
            result: "libnvrtc not found".into(),
        }];
        return (
            Found {
                report: LibraryReport::not_found(Library::Nvrtc, outcome.searched),
                _handles: Vec::new(),
            },
            Found {
                report: LibraryReport::not_found(Library::NvrtcBuiltins, not_sought),
                _handles: Vec::new(),
            },
        );
    };
    let (handle, warning) = load::check_names(opened.handle, &names, "cudarc");
    let mut nvrtc = loaded_report(
        Library::Nvrtc,
        &opened.path,
        handle,
        outcome.searched,
        warning,
    );

    let builtins = match builtins {
        Some((file, handle, attempt)) => {
            loaded_report(Library::NvrtcBuiltins, &file, handle, vec![attempt], None)
        }
        None => loader_path_builtins(&opened.path, nvrtc.report.version.as_deref()),
    };
    // libnvrtc dlopens exactly `libnvrtc-builtins.so.<its major>.<its minor>`.
    match (&nvrtc.report.version, &builtins.report.version) {
        (Some(n), Some(b)) if n != b => nvrtc.report.warnings.push(format!(
            "its builtins are version {b}, not {n}: libnvrtc will look for \
             libnvrtc-builtins.so.{n} and fail to compile without it"
        )),
        (_, _) if !builtins.report.is_loaded() => nvrtc.report.warnings.push(
            "libnvrtc-builtins not found: NVRTC will fail to compile (see libnvrtc-builtins)"
                .into(),
        ),
        _ => {}
    }
    (nvrtc, builtins)
}

/// The builtins of a libnvrtc the loader found at `nvrtc`: beside it, else by name on the
/// loader's path (`libnvrtc-builtins.so.<version>`, from `nvrtcVersion`).
fn loader_path_builtins(nvrtc: &Path, version: Option<&str>) -> Found {
    let dir = nvrtc.parent().unwrap_or(Path::new("."));
    let mut searched = Vec::new();
    match builtins_in(dir, soname_major(nvrtc)) {
        Some(file) => match load::open_file(&file) {
            Ok(handle) => {
                searched.push(Attempt {
                    place: file.display().to_string(),
                    result: "loaded (beside libnvrtc)".into(),
                });
                return loaded_report(Library::NvrtcBuiltins, &file, handle, searched, None);
            }
            Err(e) => searched.push(Attempt {
                place: file.display().to_string(),
                result: e.to_string(),
            }),
        },
        None => searched.push(Attempt {
            place: dir.display().to_string(),
            result: "missing (no libnvrtc-builtins.so.<major>.<minor>)".into(),
        }),
    }
    let Some(version) = version else {
        searched.push(Attempt {
            place: "loader path".into(),
            result: "not tried: nvrtcVersion gave no version to name the builtins by".into(),
        });
        return Found {
            report: LibraryReport::not_found(Library::NvrtcBuiltins, searched),
            _handles: Vec::new(),
        };
    };
    let names = [format!("libnvrtc-builtins.so.{version}")];
    match load::open_names(&names) {
        Ok(opened) if !search::in_stubs(&opened.path) => {
            searched.push(Attempt {
                place: "loader path".into(),
                result: format!("loaded {}", opened.path.display()),
            });
            loaded_report(
                Library::NvrtcBuiltins,
                &opened.path,
                opened.handle,
                searched,
                None,
            )
        }
        Ok(opened) => {
            searched.push(Attempt {
                place: "loader path".into(),
                result: format!("stub skipped: {}", opened.path.display()),
            });
            Found {
                report: LibraryReport::not_found(Library::NvrtcBuiltins, searched),
                _handles: Vec::new(),
            }
        }
        Err(e) => {
            searched.push(Attempt {
                place: "loader path".into(),
                result: e.to_string(),
            });
            Found {
                report: LibraryReport::not_found(Library::NvrtcBuiltins, searched),
                _handles: Vec::new(),
            }
        }
    }
}

/// Searches for `library` in a described environment and loads what it finds, without the
/// process-wide caching of [`find`]: for tests of the search on made-up layouts. The handles
/// are kept for the life of the process, like [`find`]'s.
pub fn find_in_environment(
    library: Library,
    env: &Environment,
    python: &mut dyn FnMut() -> Result<Vec<PathBuf>, NoPythonAnswer>,
) -> LibraryReport {
    let found = match library {
        Library::Nvrtc => find_nvrtc(env, python).0,
        Library::NvrtcBuiltins => find_nvrtc(env, python).1,
        _ => find_in(library, env, python),
    };
    // Unloading a library cudarc may already use would leave it with dangling symbols.
    std::mem::forget(found._handles);
    found.report
}

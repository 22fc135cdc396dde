//! Where to look for a library, in order, and what each place gave: the search itself, with
//! the loading and the asking of Python passed in, so that it runs on a described environment
//! (temporary directories, a made-up Python answer, a pretend loader) as well as on this
//! process's.
//!
//! The order, for every library:
//! 1. each directory of `KPLACE_CUDA_LIB_DIR` (a directory or a `:`-separated list);
//! 2. the loader's path (dlopen by the library's names, as cudarc does);
//! 3. the fixed system directories (`/usr/local/nvidia/lib64`, `/usr/local/cuda/lib64`);
//! 4. the directories of the installed `nvidia` Python packages: `<pkg>/cu13/lib`, then every
//!    other `<pkg>/*/lib` in name order.
//!
//! The first place whose file loads wins. A directory with a `stubs` component is never used,
//! wherever it comes from (a stub libcuda loads but fails at `cuInit`), and neither is a file
//! the loader finds in one. Python is asked only when the places before it found nothing.

use std::path::{Component, Path, PathBuf};

use serde::Serialize;

/// One place looked at, and what it gave.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Attempt {
    /// The place: `KPLACE_CUDA_LIB_DIR`, `loader path`, a directory or a file.
    pub place: String,
    /// What it gave: `loaded`, `not set`, `no such directory`, `missing`, `stub directory
    /// skipped`, `dlopen failed: ...`, and the like.
    pub result: String,
}

impl Attempt {
    fn new(place: impl Into<String>, result: impl Into<String>) -> Self {
        Attempt {
            place: place.into(),
            result: result.into(),
        }
    }
}

/// Why a library could not be loaded from one place the search tried.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    /// The loader refused the file or name: its own words (a missing dependency, a wrong ELF
    /// class, no such file).
    #[error("dlopen failed: {loader}")]
    Dlopen {
        /// What the loader said.
        loader: String,
    },
    /// None of the names resolves on the loader's path.
    #[error("no {} on it", .names.join(", "))]
    NotOnLoaderPath {
        /// The names tried.
        names: Vec<String>,
    },
    /// A libnvrtc without the builtins it dlopens when it compiles beside it.
    #[error(
        "passed over: no libnvrtc-builtins.so.<major>.<minor> beside it (NVRTC needs it to compile)"
    )]
    NoBuiltinsBeside,
    /// The builtins beside a libnvrtc did not load.
    #[error("{}: {why}", .path.display())]
    Builtins {
        /// The builtins' file.
        path: PathBuf,
        /// Why it did not load.
        why: Box<LoadError>,
    },
}

/// The places to search, apart from Python's answer (asked lazily, see [`search`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Environment {
    /// The directories of `KPLACE_CUDA_LIB_DIR`, or `None` when it is not set.
    pub lib_dirs: Option<Vec<PathBuf>>,
    /// Whether to try the loader's path (dlopen by name).
    pub loader_path: bool,
    /// The fixed directories, in order.
    pub system_dirs: Vec<PathBuf>,
}

/// The fixed directories a driver or toolkit installs to.
pub const SYSTEM_DIRS: [&str; 2] = ["/usr/local/nvidia/lib64", "/usr/local/cuda/lib64"];

impl Environment {
    /// This process's environment: `KPLACE_CUDA_LIB_DIR` as set, the loader's path and
    /// [`SYSTEM_DIRS`].
    pub fn from_process() -> Self {
        Environment {
            lib_dirs: std::env::var_os(crate::LIB_DIR_ENV).map(|v| split_dirs(&v)),
            loader_path: true,
            system_dirs: SYSTEM_DIRS.iter().map(PathBuf::from).collect(),
        }
    }
}

/// A `:`-separated list of directories, empty entries dropped.
pub fn split_dirs(list: &std::ffi::OsStr) -> Vec<PathBuf> {
    std::env::split_paths(list)
        .filter(|p| !p.as_os_str().is_empty())
        .collect()
}

/// What [`search`] asks its loader to open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target<'a> {
    /// A file, by path.
    File(&'a Path),
    /// The first of these names the loader's path resolves.
    Names(&'a [String]),
}

/// A library opened by the loader passed to [`search`]: the path it was loaded from (for a
/// name, where the loader found it) and whatever the loader keeps for it.
#[derive(Debug)]
pub struct Opened<H> {
    /// The file loaded.
    pub path: PathBuf,
    /// The loader's handle.
    pub handle: H,
}

/// The result of [`search`]: the library opened, if any, and every place looked at.
#[derive(Debug)]
pub struct Outcome<H> {
    /// The library loaded, or `None`.
    pub opened: Option<Opened<H>>,
    /// Every place looked at, in order; the last one loaded it when `opened` is `Some`.
    pub searched: Vec<Attempt>,
}

/// Whether `path` has a component named `stubs`.
pub fn in_stubs(path: &Path) -> bool {
    path.components()
        .any(|c| matches!(c, Component::Normal(name) if name == "stubs"))
}

/// The library directories of the `nvidia` Python package directories `packages`: for each,
/// `cu13/lib` (listed whether or not it exists), then every other `*/lib` that exists, in
/// name order.
pub fn python_lib_dirs(packages: &[PathBuf]) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for package in packages {
        dirs.push(package.join("cu13").join("lib"));
        let mut others: Vec<PathBuf> = match std::fs::read_dir(package) {
            Ok(entries) => entries
                .filter_map(Result::ok)
                .filter(|e| e.file_name() != "cu13")
                .map(|e| e.path().join("lib"))
                .filter(|lib| lib.is_dir())
                .collect(),
            Err(_) => Vec::new(),
        };
        others.sort();
        dirs.extend(others);
    }
    let mut seen = Vec::new();
    dirs.retain(|d| {
        let new = !seen.contains(d);
        if new {
            seen.push(d.clone());
        }
        new
    });
    dirs
}

/// Searches for the library called `names` (the file names it goes by, most preferred first)
/// in `env`'s places, then in the library directories of the `nvidia` Python packages that
/// `python` lists (called only if nothing before was found). `open` loads a target; a file
/// the loader found in a `stubs` directory is dropped and the search goes on.
pub fn search<H>(
    names: &[String],
    env: &Environment,
    python: &mut dyn FnMut() -> Result<Vec<PathBuf>, crate::NoPythonAnswer>,
    open: &mut dyn FnMut(Target<'_>) -> Result<Opened<H>, LoadError>,
) -> Outcome<H> {
    let mut searched = Vec::new();
    let found = |opened: Opened<H>, searched: Vec<Attempt>| Outcome {
        opened: Some(opened),
        searched,
    };

    match &env.lib_dirs {
        None => searched.push(Attempt::new(crate::LIB_DIR_ENV, "not set")),
        Some(dirs) if dirs.is_empty() => {
            searched.push(Attempt::new(crate::LIB_DIR_ENV, "set but empty"))
        }
        Some(dirs) => {
            for dir in dirs {
                if let Some(opened) = look_in(dir, names, &mut searched, open) {
                    return found(opened, searched);
                }
            }
        }
    }

    if env.loader_path {
        match open(Target::Names(names)) {
            Ok(opened) if in_stubs(&opened.path) => searched.push(Attempt::new(
                "loader path",
                format!("stub skipped: {}", opened.path.display()),
            )),
            Ok(opened) => {
                searched.push(Attempt::new(
                    "loader path",
                    format!("loaded {}", opened.path.display()),
                ));
                return found(opened, searched);
            }
            Err(e) => searched.push(Attempt::new("loader path", e.to_string())),
        }
    }

    for dir in &env.system_dirs {
        if let Some(opened) = look_in(dir, names, &mut searched, open) {
            return found(opened, searched);
        }
    }

    match python() {
        Err(e) => searched.push(Attempt::new("python nvidia packages", e.to_string())),
        Ok(packages) if packages.is_empty() => {
            searched.push(Attempt::new("python nvidia packages", "none installed"))
        }
        Ok(packages) => {
            for dir in python_lib_dirs(&packages) {
                if let Some(opened) = look_in(&dir, names, &mut searched, open) {
                    return found(opened, searched);
                }
            }
        }
    }
    Outcome {
        opened: None,
        searched,
    }
}

/// Looks for `names` in `dir`, recording what it found; the first file that opens wins.
fn look_in<H>(
    dir: &Path,
    names: &[String],
    searched: &mut Vec<Attempt>,
    open: &mut dyn FnMut(Target<'_>) -> Result<Opened<H>, LoadError>,
) -> Option<Opened<H>> {
    let place = dir.display().to_string();
    if in_stubs(dir) {
        searched.push(Attempt::new(place, "stub directory skipped"));
        return None;
    }
    if !dir.is_dir() {
        searched.push(Attempt::new(place, "no such directory"));
        return None;
    }
    let mut any = false;
    for name in names {
        let file = dir.join(name);
        if !file.is_file() {
            continue;
        }
        any = true;
        match open(Target::File(&file)) {
            Ok(opened) => {
                searched.push(Attempt::new(file.display().to_string(), "loaded"));
                return Some(opened);
            }
            Err(e) => searched.push(Attempt::new(file.display().to_string(), e.to_string())),
        }
    }
    if !any {
        let name = names.first().map_or("the library", String::as_str);
        searched.push(Attempt::new(place, format!("missing (no {name}*)")));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stubs_are_recognised_as_a_whole_component_only() {
        assert!(in_stubs(Path::new("/usr/local/cuda/lib64/stubs")));
        assert!(in_stubs(Path::new("/x/stubs/libcuda.so")));
        assert!(!in_stubs(Path::new("/x/stubsy/libcuda.so")));
        assert!(!in_stubs(Path::new("/x/my-stubs/libcuda.so")));
    }

    #[test]
    fn lib_dir_lists_split_on_colons_without_empty_entries() {
        assert_eq!(
            split_dirs(std::ffi::OsStr::new("/a::/b:")),
            vec![PathBuf::from("/a"), PathBuf::from("/b")]
        );
        assert!(split_dirs(std::ffi::OsStr::new("")).is_empty());
    }
}

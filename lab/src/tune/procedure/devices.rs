//! The kernel libraries a tuning weighs and the GPU it weighs them on, found once for every
//! frame shape tuned: the kernels they offer bound the placements enumerated, and every
//! placement written names them on its `libraries:` line.
//!
//! Each device kind's library is, in this order: the one `--cpu-library` or `--gpu-library`
//! names (a path, or a bare file name looked up where a placement's are:
//! [`resolve_library`]); the one the placement tuned from names ([`TuneOptions::placement`]);
//! the one every placement beside the graph names (its *family*: `placements/*.yaml` and
//! `*.yaml` beside the graph file); kplace's own.
//!
//! Guarantees: a GPU is weighed only when it opens and a GPU library was found (why not is
//! logged once); a library named but not found is an error saying where it was looked for;
//! the `libraries:` line names a library where kplace's own are by its file name, so a
//! written placement works from any build directory.

use std::path::{Path, PathBuf};

use kplace::cuda::GpuProvider;
use kplace::cuda::driver::CudaProvider;
use kplace::model::placement::{Device, Placement, library_search_dirs, resolve_library};
use kplace::plan::bind::find_default_library;

use super::{TuneError, TuneOptions};
use crate::tune::space::Offers;

/// The libraries weighed and the GPU, if one is usable.
pub(super) struct Devices {
    /// The CPU kernel library.
    pub(super) cpu: PathBuf,
    /// The GPU kernel library, if one was found (weighed only with a GPU).
    gpu_library: Option<PathBuf>,
    /// The GPU's name, or why no GPU is weighed.
    pub(super) gpu: Result<String, NoGpu>,
    /// The kernels the libraries weighed offer.
    pub(super) offers: Offers,
    /// The placements' `libraries:` line.
    pub(super) libraries: String,
}

/// Why a tuning weighs no GPU.
#[derive(Debug, thiserror::Error)]
pub(super) enum NoGpu {
    /// Told to weigh the CPU only.
    #[error("--cpu-only")]
    CpuOnly,
    /// No GPU kernel library was found.
    #[error("no GPU kernel library was found")]
    NoLibrary,
    /// The GPU cannot be opened.
    #[error("{0}")]
    Open(kplace::cuda::GpuError),
}

impl Devices {
    /// Finds the libraries for `graph` (the file) that `options` name, else its placement's,
    /// else its family's, else kplace's own (see the module's documentation), and opens the
    /// GPU, unless told to weigh the CPU only.
    pub(super) fn find(options: &TuneOptions, graph: &Path) -> Result<Devices, TuneError> {
        let sources = Sources::new(options, graph)?;
        let cpu = match sources.library("cpu", "--cpu-library", options.cpu_library.as_deref())? {
            Some(path) => path,
            None => {
                find_default_library(Device::Cpu).map_err(|e| TuneError::Library(Box::new(e)))?
            }
        };
        let gpu_library =
            match sources.library("gpu", "--gpu-library", options.gpu_library.as_deref())? {
                // A GPU library a placement names but this build lacks is a GPU not weighed.
                Some(path) if path.is_file() => Some(path),
                Some(path) => {
                    tracing::warn!("tune: no GPU library at {}", path.display());
                    None
                }
                None => find_default_library(Device::Gpu(options.knobs.gpu)).ok(),
            };
        tracing::info!(
            "tune: CPU library {}{}",
            cpu.display(),
            gpu_library
                .as_ref()
                .map_or(String::new(), |g| format!(", GPU library {}", g.display()))
        );
        let gpu = if options.cpu_only {
            Err(NoGpu::CpuOnly)
        } else if gpu_library.is_none() {
            Err(NoGpu::NoLibrary)
        } else {
            CudaProvider::global()
                .open(options.knobs.gpu)
                .map(|g| g.name().to_string())
                .map_err(NoGpu::Open)
        };
        if let Err(why) = &gpu {
            tracing::warn!("tune: weighing the CPU only: {why}");
        }
        let mut devices = Devices {
            cpu,
            gpu_library,
            gpu,
            offers: Offers::default(),
            libraries: String::new(),
        };
        devices.offers = Offers::of_libraries(Some(&devices.cpu), devices.weighed_gpu_library())?;
        devices.libraries = devices.libraries_line();
        Ok(devices)
    }

    /// The GPU library, when a GPU is weighed.
    pub(super) fn weighed_gpu_library(&self) -> Option<&Path> {
        self.gpu
            .is_ok()
            .then_some(self.gpu_library.as_deref())
            .flatten()
    }

    /// The placements' `libraries:` line. A library where kplace's own are is named by its
    /// file name alone, which a placement looks up there (so the file works from any build
    /// directory); any other by its path.
    fn libraries_line(&self) -> String {
        let searched = library_search_dirs();
        let quote = |p: &Path| {
            // A placement resolves a relative path from its own directory: name it whole.
            let p = &std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
            let name = match (p.parent(), p.file_name()) {
                (Some(dir), Some(file)) if searched.iter().any(|d| d == dir) => {
                    file.to_string_lossy().into_owned()
                }
                _ => p.display().to_string(),
            };
            serde_json::to_string(&name).unwrap_or_default()
        };
        match (&self.gpu_library, &self.gpu) {
            (Some(gpu), Ok(_)) => format!(
                "libraries: {{cpu: {}, gpu: {}}}\n",
                quote(&self.cpu),
                quote(gpu)
            ),
            _ => format!("libraries: {{cpu: {}}}\n", quote(&self.cpu)),
        }
    }
}

/// Where a tuning's libraries may come from besides kplace's own: the placement it tunes from,
/// and the graph's family.
struct Sources {
    /// The placement named, if any.
    placement: Option<Placement>,
    /// The placements beside the graph that parse, in file name order.
    family: Vec<Placement>,
}

impl Sources {
    /// The placement `options` name (an error if it cannot be read) and `graph`'s family.
    fn new(options: &TuneOptions, graph: &Path) -> Result<Sources, TuneError> {
        let placement = options
            .placement
            .as_deref()
            .map(Placement::load)
            .transpose()
            .map_err(|e| TuneError::Placement(Box::new(e)))?;
        Ok(Sources {
            placement,
            family: family(graph),
        })
    }

    /// The `kind` (`cpu`, `gpu`) library: the one `option` gives as `written`, resolved as a
    /// placement resolves it and required to exist; else the placement's; else the one the
    /// family agrees on; `None`: kplace's own.
    fn library(
        &self,
        kind: &str,
        option: &'static str,
        written: Option<&Path>,
    ) -> Result<Option<PathBuf>, TuneError> {
        if let Some(written) = written {
            return named(option, written).map(Some);
        }
        if let Some(path) = self.placement.as_ref().and_then(|p| p.libraries.get(kind)) {
            return Ok(Some(path.clone()));
        }
        let mut named: Vec<(PathBuf, &Path)> = Vec::new();
        for p in &self.family {
            if let Some(path) = p.libraries.get(kind) {
                let same = std::fs::canonicalize(path).unwrap_or_else(|_| path.clone());
                if !named.iter().any(|(n, _)| *n == same) {
                    named.push((same, &p.path));
                }
            }
        }
        match named.len() {
            0 => Ok(None),
            1 => Ok(named.pop().map(|(path, _)| path)),
            _ => Err(TuneError::Family {
                kind: kind.to_string(),
                option,
                named: named
                    .iter()
                    .map(|(lib, p)| format!("{} ({})", lib.display(), p.display()))
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        }
    }
}

/// The library `option` names as `written`: a path (from the current directory), or a bare
/// file name found there or where a placement's are looked up ([`resolve_library`]).
fn named(option: &'static str, written: &Path) -> Result<PathBuf, TuneError> {
    let path = resolve_library(Path::new("."), &written.to_string_lossy());
    if path.is_file() {
        return Ok(path);
    }
    let mut searched = vec![written.display().to_string()];
    if written.components().count() == 1 {
        searched.extend(
            library_search_dirs()
                .iter()
                .map(|d| d.join(written).display().to_string()),
        );
    }
    Err(TuneError::LibraryNotFound {
        option,
        written: written.to_path_buf(),
        searched: searched.join(", "),
    })
}

/// The placements beside the graph file `graph`: every `.yaml` file in its directory's
/// `placements/` and in its directory (the graph itself aside) that reads as a placement, in
/// file name order; any other file is passed over.
fn family(graph: &Path) -> Vec<Placement> {
    let dir = match graph.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let own = std::fs::canonicalize(graph).ok();
    let mut files: Vec<PathBuf> = [dir.join("placements"), dir.to_path_buf()]
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flat_map(|entries| entries.filter_map(|e| Some(e.ok()?.path())))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml") && p.is_file())
        .filter(|p| std::fs::canonicalize(p).ok() != own)
        .collect();
    files.sort();
    files
        .iter()
        .filter_map(|path| match Placement::load(path) {
            Ok(placement) => Some(placement),
            Err(why) => {
                tracing::debug!("tune: {} is not a placement: {why}", path.display());
                None
            }
        })
        .collect()
}

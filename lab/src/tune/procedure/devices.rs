//! The kernel libraries a tuning weighs and the GPU it weighs them on, found once for every
//! frame shape tuned: the kernels they offer bound the placements enumerated, and every
//! placement written names them on its `libraries:` line.
//!
//! Guarantees: a GPU is weighed only when it opens and a GPU library was found (why not is
//! logged once); the `libraries:` line names a library where kplace's own are by its file
//! name, so a written placement works from any build directory.

use std::path::{Path, PathBuf};

use kplace::cuda::GpuProvider;
use kplace::cuda::driver::CudaProvider;
use kplace::model::placement::{Device, library_search_dirs};
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
    pub(super) gpu: Result<String, String>,
    /// The kernels the libraries weighed offer.
    pub(super) offers: Offers,
    /// The placements' `libraries:` line.
    pub(super) libraries: String,
}

impl Devices {
    /// Finds the libraries `options` name (else kplace's own) and opens the GPU, unless told
    /// to weigh the CPU only.
    pub(super) fn find(options: &TuneOptions) -> Result<Devices, TuneError> {
        let cpu = match &options.cpu_library {
            Some(path) => path.clone(),
            None => {
                find_default_library(Device::Cpu).map_err(|e| TuneError::Library(Box::new(e)))?
            }
        };
        let gpu_library = match &options.gpu_library {
            Some(path) => Some(path.clone()),
            None => find_default_library(Device::Gpu(options.knobs.gpu)).ok(),
        };
        let gpu = if options.cpu_only {
            Err("--cpu-only".to_string())
        } else if gpu_library.is_none() {
            Err("no GPU kernel library was found".to_string())
        } else {
            CudaProvider::global()
                .open(options.knobs.gpu)
                .map(|g| g.name().to_string())
                .map_err(|e| e.to_string())
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

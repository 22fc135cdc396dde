//! Each completed frame's sink tensors written to files: one file per sink tensor, frames one
//! after another, as NumPy `.npy` (readable by `numpy.load`, and as golden files) or raw bytes.
//!
//! Guarantees: every file is created before the run starts, so an unwritable directory loses
//! no run; each is written under a temporary name beside it and renamed into place when the
//! run completes it, so a file under its name is whole, and nothing but a regular file is
//! replaced ([`kplace_core::os::write`]); a write error stops the run with the frame and file named.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::npy::{NpyError, NpyWriter};
use kplace_core::model::graph::Graph;
use kplace_core::os::write::{self, Kind, WholeFile};

/// How sink files are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SinkFormat {
    /// `<tensor>.npy`: NumPy's format, shape `[frames, ...]`.
    Npy,
    /// `<tensor>.raw`: the frames' bytes back to back.
    Raw,
}

/// A sink format's name that names none.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown sink format {0:?}: expected npy or raw")]
pub struct UnknownSinkFormat(pub String);

impl std::str::FromStr for SinkFormat {
    type Err = UnknownSinkFormat;

    fn from_str(s: &str) -> Result<Self, UnknownSinkFormat> {
        match s {
            "npy" => Ok(SinkFormat::Npy),
            "raw" => Ok(SinkFormat::Raw),
            other => Err(UnknownSinkFormat(other.to_string())),
        }
    }
}

enum Writer {
    Npy(NpyWriter),
    Raw(PathBuf, BufWriter<WholeFile>),
}

/// Writes every sink tensor of a graph, frame after frame, into a directory.
pub struct SinkFiles {
    writers: Vec<Writer>,
}

impl SinkFiles {
    /// Creates `dir` (and its parents) and one file per sink of `graph` in it.
    pub fn create(dir: &Path, graph: &Graph, format: SinkFormat) -> Result<SinkFiles, NpyError> {
        write::create_dir_all(dir)?;
        let mut writers = Vec::with_capacity(graph.sinks.len());
        for &t in &graph.sinks {
            let tensor = graph.tensor(t);
            writers.push(match format {
                SinkFormat::Npy => Writer::Npy(NpyWriter::create(
                    &dir.join(format!("{}.npy", tensor.name)),
                    tensor,
                )?),
                SinkFormat::Raw => {
                    let path = dir.join(format!("{}.raw", tensor.name));
                    let file = WholeFile::create(&path, Kind::File)?;
                    Writer::Raw(path, BufWriter::new(file))
                }
            });
        }
        Ok(SinkFiles { writers })
    }

    /// Appends sink `index`'s bytes for one frame.
    pub fn write(&mut self, index: usize, bytes: &[u8]) -> Result<(), NpyError> {
        match &mut self.writers[index] {
            Writer::Npy(w) => w.frame(bytes),
            Writer::Raw(path, w) => w.write_all(bytes).map_err(|cause| NpyError::Io {
                path: path.clone(),
                cause,
            }),
        }
    }

    /// Sinks written per frame.
    pub fn len(&self) -> usize {
        self.writers.len()
    }

    /// Whether the graph has no sinks (never, for a checked graph).
    pub fn is_empty(&self) -> bool {
        self.writers.is_empty()
    }

    /// Completes every file (an `.npy` header gets its frame count).
    pub fn finish(self) -> Result<(), NpyError> {
        for w in self.writers {
            match w {
                Writer::Npy(w) => {
                    w.finish()?;
                }
                Writer::Raw(path, w) => {
                    let io = |cause| NpyError::Io {
                        path: path.clone(),
                        cause,
                    };
                    w.into_inner().map_err(|e| io(e.into_error()))?.commit()?;
                }
            }
        }
        Ok(())
    }
}

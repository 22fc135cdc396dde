//! Recordings: a source tensor's frames in a raw file, with a SigMF metadata file when there
//! is one, loaded into memory to be replayed, sent, or run through a reference.
//!
//! A recording is the frames of a graph's source tensor back to back, each exactly the
//! tensor's bytes, in the host's (little-endian) byte order: what a capture of the stream
//! holds, and what `kplace send --recording` sends one packet per slice of the packet axis.
//! Beside `NAME.sigmf-data` a `NAME.sigmf-meta` file (SigMF 1.0 JSON) says the element type
//! (`core:datatype`: `ci8`, `ci16_le`, `cf32_le`, `cf64_le`, `ri8`, `ri16_le`, `ri32_le`,
//! `rf32_le`, `rf64_le`; SigMF has no half-precision type), the sample rate per channel, the
//! channels sampled at once (`core:num_channels`, for a graph whose source states a channel
//! axis), and in kplace's own field `kplace:frame_shape` the frame's shape; when it is
//! present, it must agree with the graph. [`write()`] writes both;
//! [`synthesize`](super::synthesis::synthesize) makes a recording to write.
//!
//! A metadata file that is absent means none; one that is there but is not a regular file
//! (a directory, a FIFO, a device, a symbolic link that loops or leads nowhere) or cannot be
//! read is an error, never taken for none. The data must be a regular file too: a FIFO or a
//! device is refused as such, and never opened to block or to read forever.
//!
//! Guarantees: a recording is checked against the graph (element type, frame shape, a whole
//! number of frames) before its frames are read, and one larger than
//! [`RECORDING_BUDGET_BYTES`] is refused before anything is allocated; its metadata is read
//! only up to [`MAX_META_BYTES`]; a `core:sample_rate` whose frame period is out of
//! [`rate`]'s range (1 ns to 1 day; zero, negative, NaN and infinite included) is refused
//! naming the metadata file and the field.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kplace_abi::Dtype;
use serde::{Deserialize, Serialize};

use kplace_core::model::files::GraphFiles;
use kplace_core::model::graph::{Graph, GraphError, TensorSpec};
use kplace_core::model::rate::{self, RateError};
use kplace_core::os::write::{Kind, write_whole};
use kplace_core::plan::human_bytes;

/// The most bytes of frames a recording may hold: they are replayed from memory.
pub const RECORDING_BUDGET_BYTES: u64 = 1 << 30;

/// The most bytes a `.sigmf-meta` file is read for: far more than its few fields and any
/// annotations need.
pub const MAX_META_BYTES: u64 = 16 << 20;

/// The metadata field that states the sample rate.
const SAMPLE_RATE: &str = "core:sample_rate";

/// A recording's frames, loaded and checked against a graph's source tensor.
#[derive(Clone, Debug)]
pub struct Recording {
    /// The data file.
    pub path: PathBuf,
    /// Its frames, each the source tensor's bytes.
    pub frames: Arc<[Vec<u8>]>,
    /// Samples per second per channel, from the metadata (`core:sample_rate`); `None`
    /// without one.
    pub sample_rate: Option<f64>,
    /// Channels sampled at once: the graph's channel axis's extent (`core:num_channels` in
    /// the metadata), 1 for a single stream.
    pub channels: u64,
}

/// Why a recording cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    /// A file could not be read or written.
    #[error("recording {}: {cause}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        cause: std::io::Error,
    },
    /// A file of the recording is there, but is not a regular file (or a link to one).
    #[error("recording {}: {what}, not a regular file", path.display())]
    NotAFile {
        /// The file.
        path: PathBuf,
        /// What it is: `a directory`, `a FIFO`, `a loop of symbolic links`, ...
        what: &'static str,
    },
    /// A file of the recording cannot be put where it was asked for.
    #[error(transparent)]
    Place(#[from] kplace_core::os::write::WriteError),
    /// The metadata could not be read, or holds more than [`MAX_META_BYTES`].
    #[error(transparent)]
    Read(#[from] kplace_core::os::files::ReadBoundedError),
    /// The recording does not hold frames of the graph's source tensor.
    #[error("recording {}: {why}", path.display())]
    Mismatch {
        /// The file.
        path: PathBuf,
        /// What does not agree.
        why: String,
    },
    /// The metadata's sample rate makes a frame period out of [`rate`]'s range.
    #[error("recording {}: {why}", path.display())]
    Rate {
        /// The metadata file.
        path: PathBuf,
        /// The field, its value and the range.
        why: RateError,
    },
    /// The graph the recording is read against cannot be loaded.
    #[error(transparent)]
    Graph(#[from] GraphError),
}

/// SigMF's global object, with the fields kplace reads and writes.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Global {
    #[serde(rename = "core:datatype")]
    datatype: String,
    #[serde(rename = "core:version", default)]
    version: String,
    #[serde(
        rename = "core:sample_rate",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    sample_rate: Option<f64>,
    #[serde(
        rename = "core:description",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    description: Option<String>,
    #[serde(
        rename = "core:recorder",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    recorder: Option<String>,
    #[serde(
        rename = "kplace:frame_shape",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    frame_shape: Option<Vec<u64>>,
    #[serde(
        rename = "core:num_channels",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    num_channels: Option<u64>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Meta {
    global: Global,
    #[serde(default)]
    captures: Vec<serde_json::Value>,
    #[serde(default)]
    annotations: Vec<serde_json::Value>,
}

/// The SigMF `core:datatype` of a tensor's elements, if it has one (SigMF has no
/// half-precision type, so `f16`, `cf16` and `bf16` have none).
pub fn sigmf_datatype(dtype: Dtype) -> Option<&'static str> {
    match dtype {
        Dtype::CI16 => Some("ci16_le"),
        Dtype::CF32 => Some("cf32_le"),
        Dtype::F32 => Some("rf32_le"),
        Dtype::CI8 => Some("ci8"),
        Dtype::I8 => Some("ri8"),
        Dtype::I16 => Some("ri16_le"),
        Dtype::I32 => Some("ri32_le"),
        Dtype::F64 => Some("rf64_le"),
        Dtype::CF64 => Some("cf64_le"),
        _ => None,
    }
}

/// Every SigMF `core:datatype` a recording may have, for messages.
fn sigmf_datatypes() -> String {
    Dtype::ALL
        .iter()
        .filter_map(|&(d, _)| sigmf_datatype(d))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The data and metadata files a recording's `path` names: `NAME.sigmf-meta` or
/// `NAME.sigmf-data` name the pair; any other path is the data, with `PATH.sigmf-meta` beside
/// it as its metadata.
pub fn files(path: &Path) -> (PathBuf, PathBuf) {
    match path.extension().and_then(|e| e.to_str()) {
        Some("sigmf-meta") | Some("sigmf-data") => (
            path.with_extension("sigmf-data"),
            path.with_extension("sigmf-meta"),
        ),
        _ => {
            let mut meta = path.as_os_str().to_owned();
            meta.push(".sigmf-meta");
            (path.to_path_buf(), meta.into())
        }
    }
}

impl Recording {
    /// Loads the recording at `path` (see [`files`]) as frames of `graph`'s source tensor.
    pub fn load(path: &Path, graph: &Graph) -> Result<Recording, RecordingError> {
        let tensor = graph.tensor(graph.source.tensor);
        let channels = graph
            .source
            .channel_axis
            .map(|_| graph.source.channels(graph));
        load(path, tensor, Channels::Graph(channels), &dims_hint(graph))
    }

    /// Loads the recording at `path` as its SigMF metadata describes it (`core:datatype` and
    /// `kplace:frame_shape`, as [`write()`] writes them), with no graph to check it against;
    /// returns it with the frame's tensor.
    pub fn load_described(path: &Path) -> Result<(Recording, TensorSpec), RecordingError> {
        let (data, meta_path) = files(path);
        let meta = read_meta(&meta_path)?.ok_or_else(|| RecordingError::Mismatch {
            path: data.clone(),
            why: format!(
                "no SigMF metadata ({}) says its frames' type and shape; write the recording with `kplace record`, or add the metadata",
                meta_path.display()
            ),
        })?;
        let described = |why: String| RecordingError::Mismatch {
            path: meta_path.clone(),
            why,
        };
        let dtype = Dtype::ALL
            .iter()
            .map(|&(d, _)| d)
            .find(|&d| sigmf_datatype(d) == Some(meta.global.datatype.as_str()))
            .ok_or_else(|| {
                described(format!(
                    "core:datatype {} is not one kplace sends ({})",
                    meta.global.datatype,
                    sigmf_datatypes()
                ))
            })?;
        let shape = meta
            .global
            .frame_shape
            .clone()
            .filter(|s| !s.is_empty() && s.len() <= kplace_abi::MAX_RANK && !s.contains(&0))
            .ok_or_else(|| {
                described(format!(
                    "it has no kplace:frame_shape of 1 to {} non-zero dimensions",
                    kplace_abi::MAX_RANK
                ))
            })?;
        let bytes = dtype
            .bytes_for(&shape)
            .ok_or_else(|| described(format!("a frame of {shape:?} overflows")))?;
        let tensor = TensorSpec {
            name: "source".into(),
            dtype,
            shape,
            bytes,
            producer: kplace_core::model::graph::Producer::Source,
        };
        Ok((load(path, &tensor, Channels::Described, "")?, tensor))
    }

    /// The frame shape the recording's metadata states (`kplace:frame_shape`, outermost axis
    /// first), if it has metadata that states one.
    pub fn described_shape(path: &Path) -> Result<Option<Vec<u64>>, RecordingError> {
        let (_, meta_path) = files(path);
        Ok(read_meta(&meta_path)?.and_then(|m| m.global.frame_shape))
    }

    /// `files`' dimension bindings, then those the frame shape described by the recording at
    /// `path` binds of the rest: what the command line leaves to the graph file, the
    /// recording's metadata decides. A described shape the graph's source cannot take binds
    /// nothing (loading the recording then says why).
    pub fn bind_described(
        files: &GraphFiles,
        path: &Path,
    ) -> Result<Vec<(String, u64)>, RecordingError> {
        let mut dims = files.dims.clone();
        let Some(mut extents) = Recording::described_shape(path)? else {
            return Ok(dims);
        };
        extents.reverse();
        if let Ok(bound) = files.shaped_graph()?.bind_source_shape(&extents) {
            for (name, value) in bound {
                if !dims.iter().any(|(n, _)| *n == name) {
                    dims.push((name, value));
                }
            }
        }
        Ok(dims)
    }

    /// The real-time frame period: a frame's samples per channel at the recording's sample
    /// rate, if it states one (loading refused a rate whose frame period is out of
    /// [`rate`]'s range, so a recording's own frames always have one).
    pub fn frame_period(&self, tensor: &TensorSpec) -> Option<std::time::Duration> {
        let samples = tensor.shape.iter().product::<u64>() / self.channels.max(1);
        self.sample_rate
            .and_then(|r| rate::sample_period(SAMPLE_RATE, r, samples).ok())
    }
}

fn read_meta(meta_path: &Path) -> Result<Option<Meta>, RecordingError> {
    if !regular_file(meta_path)? {
        return Ok(None);
    }
    let text =
        kplace_core::os::files::read_text_bounded(meta_path, MAX_META_BYTES, "SigMF metadata")?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| RecordingError::Mismatch {
            path: meta_path.to_path_buf(),
            why: format!("not SigMF metadata: {e}"),
        })
}

/// Whether `path` names a regular file, through any symbolic links: `false` when nothing is
/// there at all. Anything else there is an error naming it and what it is: a directory, a
/// FIFO, a device or a socket, and a symbolic link that loops or leads nowhere (the user made
/// it, so it is not taken for an absent file). Nothing is opened.
fn regular_file(path: &Path) -> Result<bool, RecordingError> {
    let not_a_file = |what: &'static str| RecordingError::NotAFile {
        path: path.to_path_buf(),
        what,
    };
    let looping = |e: &std::io::Error| e.raw_os_error() == Some(libc::ELOOP);
    let io = |cause| RecordingError::Io {
        path: path.to_path_buf(),
        cause,
    };
    match fs::symlink_metadata(path) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) if looping(&e) => return Err(not_a_file("a loop of symbolic links")),
        Err(e) => return Err(io(e)),
    }
    match fs::metadata(path) {
        Ok(m) if m.is_file() => Ok(true),
        Ok(m) => Err(not_a_file(file_type(m.file_type()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(not_a_file("a symbolic link to nothing"))
        }
        Err(e) if looping(&e) => Err(not_a_file("a loop of symbolic links")),
        Err(e) => Err(io(e)),
    }
}

/// What a file that is not a regular one is, in words.
fn file_type(t: fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "something else"
    }
}

/// Opens the regular file `path` to read it, with its length. Opened without blocking, so a
/// FIFO put there after [`regular_file`] looked never blocks; it is refused as the file it is.
fn open_regular(path: &Path) -> Result<(fs::File, u64), RecordingError> {
    use std::os::unix::fs::OpenOptionsExt;
    let io = |cause| RecordingError::Io {
        path: path.to_path_buf(),
        cause,
    };
    // Absent, it is not opened either: the error says so.
    regular_file(path)?;
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(RecordingError::NotAFile {
            path: path.to_path_buf(),
            what: file_type(meta.file_type()),
        });
    }
    Ok((file, meta.len()))
}

/// Where a recording's channel count comes from.
#[derive(Clone, Copy)]
enum Channels {
    /// The graph's: its channel axis's extent, or `None` when it states no channel axis (a
    /// recording of several channels is then refused: it would be paced as one stream).
    Graph(Option<u64>),
    /// The metadata's (`core:num_channels`, 1 without it).
    Described,
}

/// Loads the recording at `path` as frames of `tensor` with `channels`; `hint` ends a shape
/// mismatch's message (the graph's dimensions).
fn load(
    path: &Path,
    tensor: &TensorSpec,
    channels: Channels,
    hint: &str,
) -> Result<Recording, RecordingError> {
    let (data, meta_path) = files(path);
    let mismatch = |why: String| RecordingError::Mismatch {
        path: data.clone(),
        why,
    };
    let mut sample_rate = None;
    let mut described_channels = None;
    if let Some(meta) = read_meta(&meta_path)? {
        described_channels = meta.global.num_channels;
        let want = sigmf_datatype(tensor.dtype).unwrap_or("(none)");
        if meta.global.datatype != want {
            return Err(mismatch(format!(
                "its metadata says core:datatype {}, but the graph's source {} is {} ({want})",
                meta.global.datatype,
                tensor.name,
                tensor.dtype.name().unwrap_or("?")
            )));
        }
        if let Some(shape) = &meta.global.frame_shape
            && *shape != tensor.shape
        {
            return Err(mismatch(format!(
                "its frames are {shape:?} (kplace:frame_shape), but the graph's source {} is {:?}{hint}",
                tensor.name, tensor.shape,
            )));
        }
        sample_rate = meta.global.sample_rate;
    }
    let elements: u64 = tensor.shape.iter().product();
    let channels = match (channels, described_channels) {
        (Channels::Graph(Some(c)), Some(n)) if n != c => {
            return Err(mismatch(format!(
                "its metadata says {n} channels (core:num_channels), but the channel axis of the graph's source {} has {c}{hint}",
                tensor.name
            )));
        }
        (Channels::Graph(None), Some(n)) if n > 1 => {
            return Err(mismatch(format!(
                "it holds {n} channels (core:num_channels), but the graph's source {} states no channel axis: add `channel_axis: AXIS` to the graph's source, so that a frame lasts its samples per channel",
                tensor.name
            )));
        }
        (Channels::Graph(c), _) => c.unwrap_or(1),
        (Channels::Described, n) => n.unwrap_or(1),
    };
    if channels == 0 || !elements.is_multiple_of(channels) {
        return Err(mismatch(format!(
            "{channels} channels (core:num_channels) do not divide a frame of {:?}",
            tensor.shape
        )));
    }
    if let Some(r) = sample_rate {
        rate::sample_period(SAMPLE_RATE, r, elements / channels).map_err(|why| {
            RecordingError::Rate {
                path: meta_path.clone(),
                why,
            }
        })?;
    }
    let (mut file, len) = open_regular(&data)?;
    if len == 0 || len % tensor.bytes != 0 {
        return Err(mismatch(format!(
            "{len} bytes is not a whole number of frames of the graph's source {} ({} bytes each){hint}",
            tensor.name, tensor.bytes,
        )));
    }
    if len > RECORDING_BUDGET_BYTES {
        return Err(mismatch(format!(
            "{} of frames, more than the {} kplace replays from memory: record fewer frames",
            human_bytes(len),
            human_bytes(RECORDING_BUDGET_BYTES)
        )));
    }
    // Frame by frame, straight into each frame's buffer: the file is never held twice.
    let io = |cause| RecordingError::Io {
        path: data.clone(),
        cause,
    };
    let frames = (0..len / tensor.bytes)
        .map(|_| {
            let mut frame = vec![0u8; tensor.bytes as usize];
            std::io::Read::read_exact(&mut file, &mut frame).map(|()| frame)
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(io)?;
    Ok(Recording {
        path: data,
        frames: frames.into(),
        sample_rate,
        channels,
    })
}

fn dims_hint(graph: &Graph) -> String {
    let dims: Vec<String> = graph.dims.iter().map(|(k, v)| format!("{k}={v}")).collect();
    if dims.is_empty() {
        String::new()
    } else {
        format!(
            " (dims {}; --shape or --set DIM=VALUE binds them)",
            dims.join(" ")
        )
    }
}

/// Writes `frames` of `graph`'s source tensor to `path` (see [`files`]) and its SigMF
/// metadata beside it, with `sample_rate` and `description`; returns the data and metadata
/// files.
pub fn write(
    path: &Path,
    graph: &Graph,
    frames: &[Vec<u8>],
    sample_rate: Option<f64>,
    description: &str,
) -> Result<(PathBuf, PathBuf), RecordingError> {
    let tensor = graph.tensor(graph.source.tensor);
    let (data, meta_path) = files(path);
    let datatype = sigmf_datatype(tensor.dtype).ok_or_else(|| RecordingError::Mismatch {
        path: data.clone(),
        why: format!(
            "the graph's source {} is {}, which SigMF has no type for",
            tensor.name,
            tensor.dtype.name().unwrap_or("?")
        ),
    })?;
    let meta = Meta {
        global: Global {
            datatype: datatype.into(),
            version: "1.0.0".into(),
            sample_rate,
            description: Some(description.into()),
            recorder: Some(format!("kplace {}", env!("CARGO_PKG_VERSION"))),
            frame_shape: Some(tensor.shape.clone()),
            num_channels: graph
                .source
                .channel_axis
                .map(|_| graph.source.channels(graph)),
        },
        captures: vec![serde_json::json!({"core:sample_start": 0})],
        annotations: Vec::new(),
    };
    write_whole(&data, Kind::File, &frames.concat())?;
    let text = serde_json::to_string_pretty(&meta).map_err(|e| RecordingError::Mismatch {
        path: meta_path.clone(),
        why: e.to_string(),
    })?;
    write_whole(&meta_path, Kind::File, (text + "\n").as_bytes())?;
    Ok((data, meta_path))
}

#[cfg(test)]
mod tests;

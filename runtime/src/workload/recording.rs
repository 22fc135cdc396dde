//! Recordings: a source tensor's frames in a raw file, with a SigMF metadata file when there
//! is one, loaded into memory to be replayed, sent, or run through a reference.
//!
//! A recording is the frames of a graph's source tensor back to back, each exactly the
//! tensor's bytes, in the host's (little-endian) byte order: what a capture of the stream
//! holds, and what `kplace send --recording` sends one packet per slice of the packet axis.
//! Beside `NAME.sigmf-data` a `NAME.sigmf-meta` file (SigMF 1.0 JSON) says the element type
//! (`core:datatype`: `ci16_le`, `cf32_le`, `rf32_le`), the sample rate, and in kplace's own
//! field `kplace:frame_shape` the frame's shape; when it is present, it must agree with the
//! graph. [`write()`] writes both; [`synthesize`] makes a recording of tones in noise for any
//! graph whose source is `ci16`, `cf32` or `f32`.
//!
//! Guarantees: a recording is checked against the graph (element type, frame shape, a whole
//! number of frames) before its frames are read, and one larger than
//! [`RECORDING_BUDGET_BYTES`] is refused before anything is allocated.

use std::f64::consts::TAU;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kplace_abi::Dtype;
use rand::SeedableRng;
use rand_distr::{Distribution, Normal};
use serde::{Deserialize, Serialize};

use crate::model::files::GraphFiles;
use crate::model::graph::{Graph, GraphError, TensorSpec};
use crate::plan::human_bytes;

/// The most bytes of frames a recording may hold: they are replayed from memory.
pub const RECORDING_BUDGET_BYTES: u64 = 1 << 30;

/// A recording's frames, loaded and checked against a graph's source tensor.
#[derive(Clone, Debug)]
pub struct Recording {
    /// The data file.
    pub path: PathBuf,
    /// Its frames, each the source tensor's bytes.
    pub frames: Arc<[Vec<u8>]>,
    /// Samples per second, from the metadata (`core:sample_rate`); `None` without one.
    pub sample_rate: Option<f64>,
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
    /// The recording does not hold frames of the graph's source tensor.
    #[error("recording {}: {why}", path.display())]
    Mismatch {
        /// The file.
        path: PathBuf,
        /// What does not agree.
        why: String,
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
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Meta {
    global: Global,
    #[serde(default)]
    captures: Vec<serde_json::Value>,
    #[serde(default)]
    annotations: Vec<serde_json::Value>,
}

/// The SigMF `core:datatype` of a tensor's elements, if it has one.
pub fn sigmf_datatype(dtype: Dtype) -> Option<&'static str> {
    match dtype {
        Dtype::CI16 => Some("ci16_le"),
        Dtype::CF32 => Some("cf32_le"),
        Dtype::F32 => Some("rf32_le"),
        _ => None,
    }
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
        load(path, graph.tensor(graph.source.tensor), &dims_hint(graph))
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
        let dtype = [Dtype::CI16, Dtype::CF32, Dtype::F32]
            .into_iter()
            .find(|&d| sigmf_datatype(d) == Some(meta.global.datatype.as_str()))
            .ok_or_else(|| {
                described(format!(
                    "core:datatype {} is not one kplace sends (ci16_le, cf32_le, rf32_le)",
                    meta.global.datatype
                ))
            })?;
        let shape = meta
            .global
            .frame_shape
            .clone()
            .filter(|s| !s.is_empty() && s.len() <= kplace_abi::MAX_RANK && !s.contains(&0))
            .ok_or_else(|| {
                described("it has no kplace:frame_shape of 1 to 4 non-zero dimensions".into())
            })?;
        let bytes = dtype
            .bytes_for(&shape)
            .ok_or_else(|| described(format!("a frame of {shape:?} overflows")))?;
        let tensor = TensorSpec {
            name: "source".into(),
            dtype,
            shape,
            bytes,
            producer: crate::model::graph::Producer::Source,
        };
        Ok((load(path, &tensor, "")?, tensor))
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

    /// The real-time frame period: a frame's samples at the recording's sample rate, if it
    /// states one.
    pub fn frame_period(&self, tensor: &TensorSpec) -> Option<std::time::Duration> {
        let samples: u64 = tensor.shape.iter().product();
        self.sample_rate
            .map(|rate| std::time::Duration::from_secs_f64(samples as f64 / rate))
    }
}

fn read_meta(meta_path: &Path) -> Result<Option<Meta>, RecordingError> {
    if !meta_path.is_file() {
        return Ok(None);
    }
    let text = fs::read_to_string(meta_path).map_err(|cause| RecordingError::Io {
        path: meta_path.to_path_buf(),
        cause,
    })?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| RecordingError::Mismatch {
            path: meta_path.to_path_buf(),
            why: format!("not SigMF metadata: {e}"),
        })
}

/// Loads the recording at `path` as frames of `tensor`; `hint` ends a shape mismatch's
/// message (the graph's dimensions).
fn load(path: &Path, tensor: &TensorSpec, hint: &str) -> Result<Recording, RecordingError> {
    let (data, meta_path) = files(path);
    let mismatch = |why: String| RecordingError::Mismatch {
        path: data.clone(),
        why,
    };
    let mut sample_rate = None;
    if let Some(meta) = read_meta(&meta_path)? {
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
        sample_rate = meta
            .global
            .sample_rate
            .filter(|r| r.is_finite() && *r > 0.0);
    }
    let len = fs::metadata(&data)
        .map_err(|cause| RecordingError::Io {
            path: data.clone(),
            cause,
        })?
        .len();
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
    let mut file = fs::File::open(&data).map_err(io)?;
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

/// What a synthesized recording holds: tones in complex Gaussian noise, continuous from frame
/// to frame.
#[derive(Clone, Debug, PartialEq)]
pub struct Synthesis {
    /// Tones as (frequency in cycles per sample, in [-0.5, 0.5); amplitude as a fraction of
    /// full scale).
    pub tones: Vec<(f64, f64)>,
    /// The noise's standard deviation per real component, as a fraction of full scale.
    pub noise: f64,
    /// The noise generator's seed.
    pub seed: u64,
    /// Samples per second, written to the metadata.
    pub sample_rate: f64,
}

impl Synthesis {
    /// Checks the tones and noise: frequencies in [-0.5, 0.5), amplitudes and noise finite
    /// and non-negative, their sum at most full scale (1) so that `ci16` never clips; a
    /// positive sample rate.
    pub fn check(&self) -> Result<(), String> {
        for &(f, a) in &self.tones {
            if !(-0.5..0.5).contains(&f) {
                return Err(format!(
                    "tone frequency {f} is outside [-0.5, 0.5) cycles per sample"
                ));
            }
            if !(a.is_finite() && a >= 0.0) {
                return Err(format!("tone amplitude {a} is not a number >= 0"));
            }
        }
        if !(self.noise.is_finite() && self.noise >= 0.0) {
            return Err(format!("noise {} is not a number >= 0", self.noise));
        }
        let peak: f64 = self.tones.iter().map(|t| t.1).sum::<f64>() + 4.0 * self.noise;
        if peak > 1.0 {
            return Err(format!(
                "the tones' amplitudes plus four noise deviations reach {peak:.3} of full scale; keep them at most 1"
            ));
        }
        if !(self.sample_rate.is_finite() && self.sample_rate > 0.0) {
            return Err(format!("sample rate {} is not positive", self.sample_rate));
        }
        Ok(())
    }
}

/// `frames` frames of `tensor` (`ci16`, `cf32` or `f32`; a real tensor takes the real part)
/// holding `synthesis`: sample `n` of the stream (counted across frames, row-major) is
/// `sum a * exp(2 pi i f n) + noise`, scaled to full scale (32767 for `ci16`, 1 for floats).
pub fn synthesize(
    tensor: &TensorSpec,
    frames: u64,
    synthesis: &Synthesis,
) -> Result<Vec<Vec<u8>>, String> {
    synthesis.check()?;
    let (scale, width) = match tensor.dtype {
        Dtype::CI16 => (32767.0, 4),
        Dtype::CF32 => (1.0, 8),
        Dtype::F32 => (1.0, 4),
        other => {
            return Err(format!(
                "the source {} is {}: a synthesized recording is ci16, cf32 or f32",
                tensor.name,
                other.name().unwrap_or("?")
            ));
        }
    };
    frames
        .checked_mul(tensor.bytes)
        .filter(|&b| b <= RECORDING_BUDGET_BYTES)
        .ok_or_else(|| {
            format!(
                "{frames} frames of {} each exceed the {} a recording may hold",
                human_bytes(tensor.bytes),
                human_bytes(RECORDING_BUDGET_BYTES)
            )
        })?;
    let samples = tensor.bytes as usize / width;
    let mut rng = rand_pcg::Pcg64::seed_from_u64(synthesis.seed);
    let noise = Normal::new(0.0, synthesis.noise).map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(frames as usize);
    let mut n: u64 = 0;
    for _ in 0..frames {
        let mut frame = Vec::with_capacity(tensor.bytes as usize);
        for _ in 0..samples {
            let (mut re, mut im) = (noise.sample(&mut rng), noise.sample(&mut rng));
            for &(f, a) in &synthesis.tones {
                // The phase is reduced before it is scaled, so a long stream keeps its precision.
                let phase = TAU * (f * n as f64).rem_euclid(1.0);
                re += a * phase.cos();
                im += a * phase.sin();
            }
            match tensor.dtype {
                Dtype::CI16 => {
                    for v in [re, im] {
                        let q = (v * scale).round().clamp(-32768.0, 32767.0) as i16;
                        frame.extend_from_slice(&q.to_le_bytes());
                    }
                }
                Dtype::CF32 => {
                    frame.extend_from_slice(&(re as f32).to_le_bytes());
                    frame.extend_from_slice(&(im as f32).to_le_bytes());
                }
                _ => frame.extend_from_slice(&(re as f32).to_le_bytes()),
            }
            n += 1;
        }
        out.push(frame);
    }
    Ok(out)
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
        },
        captures: vec![serde_json::json!({"core:sample_start": 0})],
        annotations: Vec::new(),
    };
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |cause| RecordingError::Io { path, cause }
    };
    fs::write(&data, frames.concat()).map_err(io(&data))?;
    let text = serde_json::to_string_pretty(&meta).map_err(|e| RecordingError::Mismatch {
        path: meta_path.clone(),
        why: e.to_string(),
    })?;
    fs::write(&meta_path, text + "\n").map_err(io(&meta_path))?;
    Ok((data, meta_path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::graph::Overrides;

    fn graph(dtype: &str) -> Graph {
        let text = format!(
            "name: g\ndims: {{N: 8, M: 4}}\nsource: {{tensor: x, packet_axis: 0}}\n\
             tensors:\n  - {{name: x, dtype: {dtype}, shape: [M, N]}}\n  - {{name: y, dtype: f32, shape: [M, N]}}\n\
             stages:\n  - {{name: s, kernel: k, inputs: [x], outputs: [y]}}\nsinks: [y]\n"
        );
        Graph::parse(&text, Path::new("g.yaml"), &Overrides::default()).unwrap()
    }

    fn tones() -> Synthesis {
        Synthesis {
            tones: vec![(0.125, 0.5), (-0.25, 0.25)],
            noise: 0.0,
            seed: 1,
            sample_rate: 1e6,
        }
    }

    #[test]
    fn a_recording_reads_back_as_written_with_its_rate() {
        let dir = tempfile::tempdir().unwrap();
        for dtype in ["ci16", "cf32", "f32"] {
            let g = graph(dtype);
            let frames = synthesize(g.tensor(g.source.tensor), 3, &tones()).unwrap();
            let path = dir.path().join(format!("r-{dtype}.sigmf-data"));
            let (data, meta) = write(&path, &g, &frames, Some(1e6), "test").unwrap();
            assert!(data.is_file() && meta.is_file());
            let r = Recording::load(&meta, &g).unwrap();
            assert_eq!(&r.frames[..], &frames[..]);
            assert_eq!(r.sample_rate, Some(1e6));
            let (described, tensor) = Recording::load_described(&data).unwrap();
            assert_eq!(&described.frames[..], &frames[..]);
            assert_eq!(
                (tensor.dtype, &tensor.shape[..]),
                (g.tensor(g.source.tensor).dtype, &[4u64, 8][..])
            );
            assert_eq!(
                r.frame_period(g.tensor(g.source.tensor)),
                Some(std::time::Duration::from_micros(32))
            );
        }
    }

    #[test]
    fn tones_are_where_they_were_put_and_continue_across_frames() {
        let g = graph("cf32");
        let frames = synthesize(g.tensor(g.source.tensor), 2, &tones()).unwrap();
        let sample = |k: usize| {
            let frame = &frames[k / 32];
            let at = (k % 32) * 8;
            let f = |i| f32::from_le_bytes(frame[i..i + 4].try_into().unwrap()) as f64;
            (f(at), f(at + 4))
        };
        for k in [0usize, 5, 31, 32, 47] {
            let n = k as f64;
            let want_re = 0.5 * (TAU * 0.125 * n).cos() + 0.25 * (TAU * -0.25 * n).cos();
            let want_im = 0.5 * (TAU * 0.125 * n).sin() + 0.25 * (TAU * -0.25 * n).sin();
            let (re, im) = sample(k);
            assert!(
                (re - want_re).abs() < 1e-6 && (im - want_im).abs() < 1e-6,
                "{k}"
            );
        }
    }

    #[test]
    fn a_recording_that_disagrees_with_the_graph_is_named_and_refused() {
        let dir = tempfile::tempdir().unwrap();
        let g = graph("ci16");
        let frames = synthesize(g.tensor(g.source.tensor), 2, &tones()).unwrap();
        let path = dir.path().join("r.sigmf-data");
        write(&path, &g, &frames, None, "test").unwrap();
        let e = Recording::load(&path, &graph("cf32"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("core:datatype ci16_le") && e.contains("cf32_le"),
            "{e}"
        );
        let bigger = Overrides {
            dims: vec![("N".into(), 16)],
            params: Vec::new(),
        };
        let text = "name: g\ndims: {N: 8, M: 4}\nsource: {tensor: x, packet_axis: 0}\n\
             tensors:\n  - {name: x, dtype: ci16, shape: [M, N]}\n  - {name: y, dtype: f32, shape: [M, N]}\n\
             stages:\n  - {name: s, kernel: k, inputs: [x], outputs: [y]}\nsinks: [y]\n";
        let g16 = Graph::parse(text, Path::new("g.yaml"), &bigger).unwrap();
        let e = Recording::load(&path, &g16).unwrap_err().to_string();
        assert!(
            e.contains("[4, 8] (kplace:frame_shape)") && e.contains("N=16"),
            "{e}"
        );
        // Without metadata, only the length is checked.
        let raw = dir.path().join("raw.bin");
        std::fs::write(&raw, &frames.concat()[..100]).unwrap();
        let e = Recording::load(&raw, &g).unwrap_err().to_string();
        assert!(
            e.contains("100 bytes is not a whole number of frames"),
            "{e}"
        );
        std::fs::write(&raw, frames.concat()).unwrap();
        assert_eq!(Recording::load(&raw, &g).unwrap().frames.len(), 2);
        let e = Recording::load_described(&raw).unwrap_err().to_string();
        assert!(e.contains("no SigMF metadata"), "{e}");
        assert!(Recording::load(&dir.path().join("none"), &g).is_err());
    }

    #[test]
    fn a_synthesis_that_would_clip_or_alias_is_refused() {
        let t = graph("ci16");
        let t = t.tensor(t.source.tensor);
        for (s, phrase) in [
            (
                Synthesis {
                    tones: vec![(0.5, 0.1)],
                    ..tones()
                },
                "outside [-0.5, 0.5)",
            ),
            (
                Synthesis {
                    tones: vec![(0.1, 0.9)],
                    noise: 0.1,
                    ..tones()
                },
                "full scale",
            ),
            (
                Synthesis {
                    noise: -1.0,
                    ..tones()
                },
                "noise -1",
            ),
            (
                Synthesis {
                    sample_rate: 0.0,
                    ..tones()
                },
                "sample rate 0",
            ),
        ] {
            let e = synthesize(t, 1, &s).unwrap_err();
            assert!(e.contains(phrase), "{e}");
        }
        let e = synthesize(t, u64::MAX, &tones()).unwrap_err();
        assert!(e.contains("exceed"), "{e}");
    }
}

//! NumPy's `.npy` format (version 1.0), for sink tensors stacked frame after frame: what
//! `numpy.load` reads as an array of shape `[frames, ...tensor shape]`.
//!
//! [`NpyWriter`] streams frames to a file whose frame count is known only at the end: its
//! header is written at the start with room for any count and rewritten by
//! [`NpyWriter::finish`]. [`read`] reads such a file back (golden files), checking its element
//! type and shape against the tensor it stands for.
//!
//! Element types: `f32` is `<f4`, `cf32` is `<c8`, `ci16` is `<i2` with a last axis of 2
//! (I, Q), and a record list is its bytes (`|u1`, one axis of the list's size).
//!
//! Guarantees: a file is read only after its header is checked and its length matches the
//! header; nothing is allocated for more bytes than the file holds.

use std::fs::File;
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use kplace_core::model::graph::TensorSpec;
use kplace_core::model::npy::{self, Header};
use kplace_core::os::write::{Kind, WholeFile, WriteError};

const MAGIC: &[u8] = b"\x93NUMPY\x01\x00";
/// Bytes of the header, magic included: room for a frame count of 20 digits, and a multiple of
/// 64 as the format asks.
const HEADER_BYTES: usize = 256;

/// Why an `.npy` file cannot be written or read.
#[derive(Debug, thiserror::Error)]
pub enum NpyError {
    /// The file could not be opened, read or written.
    #[error("{}: {cause}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        cause: io::Error,
    },
    /// The file cannot be put where it was asked for (see [`kplace_core::os::write`]).
    #[error(transparent)]
    Place(#[from] WriteError),
    /// The file is not an `.npy` file of the tensor's frames.
    #[error("{}: {why}", path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
}

/// The `.npy` element type and the shape of one frame of `tensor` ([`npy::layout`]).
pub fn layout(tensor: &TensorSpec) -> (&'static str, Vec<u64>) {
    npy::layout(tensor.dtype, &tensor.shape, tensor.bytes)
}

fn header(descr: &str, frames: u64, shape: &[u64]) -> Vec<u8> {
    let dims: Vec<String> = std::iter::once(frames)
        .chain(shape.iter().copied())
        .map(|d| d.to_string())
        .collect();
    let dict = format!(
        "{{'descr': '{descr}', 'fortran_order': False, 'shape': ({},), }}",
        dims.join(", ")
    );
    let mut out = Vec::with_capacity(HEADER_BYTES);
    out.extend_from_slice(MAGIC);
    let len = HEADER_BYTES - MAGIC.len() - 2;
    out.extend_from_slice(&(len as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out.resize(HEADER_BYTES - 1, b' ');
    out.push(b'\n');
    out
}

/// Writes one sink tensor's frames to an `.npy` file, one after another: under a temporary
/// name beside it, renamed onto it by [`NpyWriter::finish`], so the file is whole or absent.
pub struct NpyWriter {
    path: PathBuf,
    out: BufWriter<WholeFile>,
    descr: &'static str,
    shape: Vec<u64>,
    frame_bytes: usize,
    frames: u64,
}

impl NpyWriter {
    /// Creates `path` for frames of `tensor`.
    pub fn create(path: &Path, tensor: &TensorSpec) -> Result<NpyWriter, NpyError> {
        let io = |cause| NpyError::Io {
            path: path.to_path_buf(),
            cause,
        };
        let (descr, shape) = layout(tensor);
        let mut out = BufWriter::new(WholeFile::create(path, Kind::File)?);
        out.write_all(&header(descr, 0, &shape)).map_err(io)?;
        Ok(NpyWriter {
            path: path.to_path_buf(),
            out,
            descr,
            shape,
            frame_bytes: tensor.bytes as usize,
            frames: 0,
        })
    }

    /// Appends one frame's bytes (the tensor's size exactly).
    pub fn frame(&mut self, bytes: &[u8]) -> Result<(), NpyError> {
        if bytes.len() != self.frame_bytes {
            return Err(NpyError::Format {
                path: self.path.clone(),
                why: format!(
                    "a frame of {} bytes, not the tensor's {}",
                    bytes.len(),
                    self.frame_bytes
                ),
            });
        }
        self.out.write_all(bytes).map_err(|cause| NpyError::Io {
            path: self.path.clone(),
            cause,
        })?;
        self.frames += 1;
        Ok(())
    }

    /// Writes the header with the frame count, flushes the file and renames it into place.
    pub fn finish(self) -> Result<u64, NpyError> {
        let path = self.path;
        let io = |cause| NpyError::Io {
            path: path.clone(),
            cause,
        };
        let mut whole = self.out.into_inner().map_err(|e| io(e.into_error()))?;
        let file = whole.as_file_mut();
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        file.write_all(&header(self.descr, self.frames, &self.shape))
            .map_err(io)?;
        file.flush().map_err(io)?;
        whole.commit()?;
        Ok(self.frames)
    }
}

/// Reads `path`, an `.npy` file of frames of `tensor`, into one buffer per frame.
pub fn read(path: &Path, tensor: &TensorSpec) -> Result<Vec<Vec<u8>>, NpyError> {
    let io = |cause| NpyError::Io {
        path: path.to_path_buf(),
        cause,
    };
    let format = |why: String| NpyError::Format {
        path: path.to_path_buf(),
        why,
    };
    let mut file = File::open(path).map_err(io)?;
    let file_len = file.metadata().map_err(io)?.len();
    let header = Header::read(&mut file, file_len).map_err(|e| format(e.to_string()))?;
    let (descr, shape) = layout(tensor);
    let found = &header.descr;
    if found != descr {
        return Err(format(format!(
            "element type '{found}', but tensor {} is {}, stored as '{descr}'",
            tensor.name,
            tensor.dtype.name().unwrap_or("?")
        )));
    }
    if header.fortran_order {
        return Err(format(
            "only C-ordered arrays are read (fortran_order is not False)".into(),
        ));
    }
    let dims = header.shape;
    if dims.len() != shape.len() + 1 || dims[1..] != shape[..] {
        return Err(format(format!(
            "shape {dims:?}, but frames of tensor {} are {shape:?}, so the file must be [frames, {}]",
            tensor.name,
            shape
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let frames = dims[0];
    let data = header.data_bytes;
    if frames.checked_mul(tensor.bytes) != Some(data) {
        return Err(format(format!(
            "the header says {frames} frames of {} bytes, but {data} bytes follow it",
            tensor.bytes
        )));
    }
    let mut out = Vec::with_capacity(frames as usize);
    for _ in 0..frames {
        let mut frame = vec![0u8; tensor.bytes as usize];
        file.read_exact(&mut frame).map_err(io)?;
        out.push(frame);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use kplace_abi::Dtype;

    use super::*;
    use kplace_core::model::graph::Producer;

    fn tensor(dtype: Dtype, shape: &[u64]) -> TensorSpec {
        TensorSpec {
            name: "t".into(),
            dtype,
            shape: shape.to_vec(),
            bytes: dtype.bytes_for(shape).unwrap(),
            producer: Producer::Source,
        }
    }

    #[test]
    fn a_file_appears_under_its_name_only_once_finished() {
        let dir = tempfile::tempdir().unwrap();
        let t = tensor(Dtype::F32, &[2]);
        let path = dir.path().join("t.npy");
        let mut w = NpyWriter::create(&path, &t).unwrap();
        w.frame(&[0; 8]).unwrap();
        assert!(
            !path.exists(),
            "nothing under the name while the run writes"
        );
        drop(w);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "a run that never finished leaves nothing"
        );
        let w = NpyWriter::create(&path, &t).unwrap();
        assert_eq!(w.finish().unwrap(), 0);
        assert_eq!(read(&path, &t).unwrap().len(), 0);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn frames_written_read_back_with_their_count() {
        let dir = tempfile::tempdir().unwrap();
        for t in [
            tensor(Dtype::F32, &[3, 5]),
            tensor(Dtype::CF32, &[4]),
            tensor(Dtype::CI16, &[2, 3]),
            tensor(Dtype::RECORDS, &[2]),
            tensor(Dtype::I8, &[3]),
            tensor(Dtype::CI8, &[2, 2]),
            tensor(Dtype::I32, &[3]),
            tensor(Dtype::F16, &[4]),
            tensor(Dtype::CF16, &[1]),
            tensor(Dtype::F64, &[2]),
            tensor(Dtype::CF64, &[2]),
        ] {
            let path = dir.path().join("t.npy");
            let mut w = NpyWriter::create(&path, &t).unwrap();
            let frames: Vec<Vec<u8>> = (0..7u8)
                .map(|f| (0..t.bytes).map(|i| f.wrapping_mul(31) ^ i as u8).collect())
                .collect();
            for f in &frames {
                w.frame(f).unwrap();
            }
            assert_eq!(w.finish().unwrap(), 7);
            let bytes = std::fs::read(&path).unwrap();
            assert_eq!(bytes.len() % 64, (HEADER_BYTES + 7 * t.bytes as usize) % 64);
            let text = String::from_utf8_lossy(&bytes[10..HEADER_BYTES]).to_string();
            assert!(text.contains("'shape': (7, "), "{text}");
            assert!(text.ends_with('\n'));
            assert_eq!(read(&path, &t).unwrap(), frames);
        }
    }

    #[test]
    fn each_dtype_has_numpy_s_type_or_its_parts() {
        let cases = [
            (Dtype::F32, "<f4", vec![3]),
            (Dtype::CF32, "<c8", vec![3]),
            (Dtype::CF64, "<c16", vec![3]),
            (Dtype::F64, "<f8", vec![3]),
            (Dtype::F16, "<f2", vec![3]),
            (Dtype::I8, "|i1", vec![3]),
            (Dtype::I16, "<i2", vec![3]),
            (Dtype::I32, "<i4", vec![3]),
            (Dtype::CI8, "|i1", vec![3, 2]),
            (Dtype::CI16, "<i2", vec![3, 2]),
            (Dtype::CF16, "<f2", vec![3, 2]),
            (Dtype::BF16, "<u2", vec![3]),
        ];
        for (dtype, descr, shape) in cases {
            assert_eq!(layout(&tensor(dtype, &[3])), (descr, shape), "{dtype:?}");
        }
        assert_eq!(
            layout(&tensor(Dtype::RECORDS, &[2])),
            ("|u1", vec![16 + 2 * 12])
        );
    }

    #[test]
    fn a_wrong_file_is_refused_with_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let t = tensor(Dtype::F32, &[4]);
        let path = dir.path().join("t.npy");
        let mut w = NpyWriter::create(&path, &t).unwrap();
        w.frame(&[0; 16]).unwrap();
        assert!(w.frame(&[0; 12]).is_err());
        w.finish().unwrap();
        let e = read(&path, &tensor(Dtype::CF32, &[4]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("element type '<f4'"), "{e}");
        let e = read(&path, &tensor(Dtype::F32, &[5]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("shape [1, 4]"), "{e}");
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.pop();
        std::fs::write(&path, &bytes).unwrap();
        let e = read(&path, &t).unwrap_err().to_string();
        assert!(e.contains("15 bytes follow"), "{e}");
        std::fs::write(&path, b"hello").unwrap();
        let e = read(&path, &t).unwrap_err().to_string();
        assert!(e.contains("too short"), "{e}");
    }
}

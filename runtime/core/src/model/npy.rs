//! Reading NumPy's `.npy` files: the header every reader checks first ([`Header::read`]),
//! small arrays of real numbers, which a graph may name as a parameter's value
//! ([`read_values`]: FIR taps, a window written by NumPy), and arrays of a tensor's element
//! type and shape, which a graph may name as a constant tensor ([`read_array`]: beam
//! weights). [`layout`] says how each element type is stored.
//!
//! Guarantees: nothing is allocated for more than the file holds, nor, for values, for more
//! than the caller's limit; an array whose header and length disagree is refused; every error
//! says what is wrong with the file.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use kplace_abi::Dtype;

/// What is wrong with an `.npy` file, or reading it; without its path (the caller names it).
#[derive(Debug, thiserror::Error)]
pub enum NpyReadError {
    /// The file could not be opened or read.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// Shorter than the header's fixed part.
    #[error("too short for an .npy header")]
    Short,
    /// No `\x93NUMPY` magic.
    #[error("not an .npy file (no \\x93NUMPY magic)")]
    NoMagic,
    /// A format version this reader does not know.
    #[error(".npy version {0} is not supported")]
    Version(u8),
    /// The header's length is past the file's end, or past 64 KiB.
    #[error("a header of {0} bytes does not fit the file")]
    HeaderLength(u64),
    /// The header's `shape` is not a tuple of integers.
    #[error("its shape is not a tuple of integers")]
    Shape,
    /// The array is stored column-major.
    #[error("only C-ordered arrays are read (fortran_order is not False)")]
    FortranOrder,
    /// The element type is not the one a tensor's type is stored as.
    #[error("element type '{found}', but a {dtype} tensor is stored as '{descr}'")]
    TensorType {
        /// The file's element type.
        found: String,
        /// The tensor's element type.
        dtype: &'static str,
        /// How the tensor's type is stored.
        descr: &'static str,
    },
    /// The shape is not the one the tensor is stored as.
    #[error("shape {found:?}, but the tensor is stored as {want:?}")]
    TensorShape {
        /// The file's shape.
        found: Vec<u64>,
        /// The tensor's, as [`layout`] stores it.
        want: Vec<u64>,
    },
    /// The data after the header is not the length of the tensor.
    #[error("the header says {bytes} bytes of data, but {follow} bytes follow it")]
    TensorBytes {
        /// The tensor's bytes.
        bytes: u64,
        /// Bytes after the header.
        follow: u64,
    },
    /// The element type is not a real number type.
    #[error(
        "element type '{descr}' is not a real number type (f2-f8, i1-i8, u1-u8, b1){}",
        if .descr.contains('c') { ": a complex array must be given as its real and imaginary parts" } else { "" }
    )]
    NotReal {
        /// The file's element type.
        descr: String,
    },
    /// More values than the caller takes.
    #[error("shape {shape:?} holds more than the {limit} values a parameter may have")]
    TooMany {
        /// The file's shape.
        shape: Vec<u64>,
        /// The most values taken.
        limit: usize,
    },
    /// The data after the header is not the length of its values.
    #[error("the header says {count} values of {size} bytes, but {follow} bytes follow it")]
    ValueBytes {
        /// Values the shape holds.
        count: usize,
        /// Bytes of each.
        size: usize,
        /// Bytes after the header.
        follow: u64,
    },
}

/// The parts of an `.npy` header a reader needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// The element type as NumPy writes it: `<f4`, `|i1`, `<c8`, ...
    pub descr: String,
    /// Whether the array is stored column-major.
    pub fortran_order: bool,
    /// The array's dimensions.
    pub shape: Vec<u64>,
    /// Where the data starts.
    pub data_offset: u64,
    /// Bytes of data after the header.
    pub data_bytes: u64,
}

impl Header {
    /// Reads the header at the start of `file`, `file_len` bytes long, leaving the file at
    /// the data. The error says what is wrong.
    pub fn read(file: &mut File, file_len: u64) -> Result<Header, NpyReadError> {
        let mut lead = [0u8; 10];
        file.read_exact(&mut lead)
            .map_err(|_| NpyReadError::Short)?;
        if &lead[..6] != b"\x93NUMPY" {
            return Err(NpyReadError::NoMagic);
        }
        let (header_len, lead_len) = match lead[6] {
            1 => (u64::from(u16::from_le_bytes([lead[8], lead[9]])), 10),
            2 | 3 => {
                let mut more = [0u8; 2];
                file.read_exact(&mut more)?;
                (
                    u64::from(u32::from_le_bytes([lead[8], lead[9], more[0], more[1]])),
                    12,
                )
            }
            v => return Err(NpyReadError::Version(v)),
        };
        if header_len > 1 << 16 || lead_len + header_len > file_len {
            return Err(NpyReadError::HeaderLength(header_len));
        }
        let mut dict = vec![0u8; header_len as usize];
        file.read_exact(&mut dict)?;
        let dict = String::from_utf8_lossy(&dict);
        let field = |key: &str| -> Option<String> {
            let at = dict.find(&format!("'{key}'"))? + key.len() + 2;
            let rest = dict[at..].trim_start().strip_prefix(':')?.trim_start();
            let end = match rest.chars().next()? {
                '(' => rest.find(')')? + 1,
                '\'' => rest[1..].find('\'')? + 2,
                _ => rest.find([',', '}'])?,
            };
            Some(rest[..end].trim().to_string())
        };
        let shape: Vec<u64> = field("shape")
            .unwrap_or_default()
            .trim_matches(['(', ')'])
            .split(',')
            .filter(|d| !d.trim().is_empty())
            .map(|d| d.trim().parse::<u64>())
            .collect::<Result<_, _>>()
            .map_err(|_| NpyReadError::Shape)?;
        Ok(Header {
            descr: field("descr")
                .unwrap_or_default()
                .trim_matches('\'')
                .to_string(),
            fortran_order: field("fortran_order").as_deref() != Some("False"),
            shape,
            data_offset: lead_len + header_len,
            data_bytes: file_len - lead_len - header_len,
        })
    }
}

pub use kplace_abi::numpy::layout;

/// Reads `path`, a C-ordered `.npy` array stored as [`layout`] says for a tensor of `dtype`
/// and `shape`, into the tensor's `bytes`. The file's element type and shape must be exactly
/// those (NumPy's `astype` and `reshape` make them); its length is checked before anything is
/// allocated, so a file cannot make the reader hold more than `bytes`.
pub fn read_array(
    path: &Path,
    dtype: Dtype,
    shape: &[u64],
    bytes: u64,
) -> Result<Vec<u8>, NpyReadError> {
    let mut file = File::open(path)?;
    let file_len = file.metadata()?.len();
    let header = Header::read(&mut file, file_len)?;
    let (descr, want) = layout(dtype, shape, bytes);
    if header.descr != descr {
        return Err(NpyReadError::TensorType {
            found: header.descr,
            dtype: dtype.name().unwrap_or("?"),
            descr,
        });
    }
    if header.fortran_order {
        return Err(NpyReadError::FortranOrder);
    }
    if header.shape != want {
        return Err(NpyReadError::TensorShape {
            found: header.shape,
            want,
        });
    }
    if header.data_bytes != bytes {
        return Err(NpyReadError::TensorBytes {
            bytes,
            follow: header.data_bytes,
        });
    }
    let mut data = vec![0u8; bytes as usize];
    file.read_exact(&mut data)?;
    Ok(data)
}

/// An array of real numbers read from an `.npy` file, in row-major order.
#[derive(Clone, Debug, PartialEq)]
pub struct Values {
    /// Its dimensions.
    pub shape: Vec<u64>,
    /// Its values, each exactly as stored (every supported type converts to `f64` exactly).
    pub values: Vec<f64>,
}

/// Reads `path`, a C-ordered `.npy` array of at most `limit` real numbers of any integer or
/// floating type NumPy writes (little-endian or single-byte; `f2` to `f8`, `i1` to `i8`, `u1`
/// to `u8`, `b1`). Complex arrays are refused: a kernel parameter is real.
pub fn read_values(path: &Path, limit: usize) -> Result<Values, NpyReadError> {
    let mut file = File::open(path)?;
    let file_len = file.metadata()?.len();
    let header = Header::read(&mut file, file_len)?;
    if header.fortran_order {
        return Err(NpyReadError::FortranOrder);
    }
    let Some((kind, size)) = element(&header.descr) else {
        return Err(NpyReadError::NotReal {
            descr: header.descr,
        });
    };
    let count = header
        .shape
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d))
        .filter(|&n| n <= limit as u64)
        .ok_or_else(|| NpyReadError::TooMany {
            shape: header.shape.clone(),
            limit,
        })? as usize;
    if header.data_bytes != (count * size) as u64 {
        return Err(NpyReadError::ValueBytes {
            count,
            size,
            follow: header.data_bytes,
        });
    }
    let mut data = vec![0u8; count * size];
    file.read_exact(&mut data)?;
    let values = data.chunks_exact(size).map(|b| decode(kind, b)).collect();
    Ok(Values {
        shape: header.shape,
        values,
    })
}

/// What NumPy's type string names: its kind (`f`, `i`, `u`, `b`) and size in bytes.
fn element(descr: &str) -> Option<(char, usize)> {
    let (order, rest) = descr.split_at_checked(1)?;
    let mut chars = rest.chars();
    let kind = chars.next()?;
    let size: usize = chars.as_str().parse().ok()?;
    let little = order == "<" || (order == "|" && size == 1);
    let known = match kind {
        'f' => matches!(size, 2 | 4 | 8),
        'i' | 'u' => matches!(size, 1 | 2 | 4 | 8),
        'b' => size == 1,
        _ => false,
    };
    (little && known).then_some((kind, size))
}

/// One little-endian value of `kind` as `f64` (exact for every supported type but 64-bit
/// integers beyond 2^53, which round).
fn decode(kind: char, b: &[u8]) -> f64 {
    let word = |n: usize| {
        let mut w = [0u8; 8];
        w[..n].copy_from_slice(&b[..n]);
        u64::from_le_bytes(w)
    };
    let n = b.len();
    match kind {
        'f' => match n {
            2 => half::f16::from_bits(word(2) as u16).to_f64(),
            4 => f64::from(f32::from_bits(word(4) as u32)),
            _ => f64::from_bits(word(8)),
        },
        'i' => {
            let shift = 64 - 8 * n as u32;
            ((word(n) << shift) as i64 >> shift) as f64
        }
        _ => word(n) as f64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An `.npy` file of `descr` and `shape` around `data`.
    fn npy(descr: &str, shape: &str, data: &[u8]) -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), kplace_testkit::npy::bytes(descr, shape, data)).unwrap();
        file
    }

    #[test]
    fn reads_every_real_type_exactly() {
        let f32s: Vec<u8> = [0.1f32, -2.5, 1e-30]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let got = read_values(npy("<f4", "(3,)", &f32s).path(), 10).unwrap();
        assert_eq!(got.shape, [3]);
        assert_eq!(got.values, [f64::from(0.1f32), -2.5, f64::from(1e-30f32)]);
        let i16s: Vec<u8> = [-3i16, 7, i16::MIN, 0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let got = read_values(npy("<i2", "(2, 2)", &i16s).path(), 10).unwrap();
        assert_eq!(
            (got.shape, got.values),
            (vec![2, 2], vec![-3.0, 7.0, -32768.0, 0.0])
        );
        let got = read_values(npy("|u1", "(2,)", &[255, 1]).path(), 10).unwrap();
        assert_eq!(got.values, [255.0, 1.0]);
        let got = read_values(npy("|i1", "(2,)", &[255, 1]).path(), 10).unwrap();
        assert_eq!(got.values, [-1.0, 1.0]);
        let halves: Vec<u8> = [half::f16::from_f32(0.5)]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(
            read_values(npy("<f2", "(1,)", &halves).path(), 1)
                .unwrap()
                .values,
            [0.5]
        );
        let f64s: Vec<u8> = [1.0f64 / 3.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(
            read_values(npy("<f8", "()", &f64s).path(), 1)
                .unwrap()
                .values,
            [1.0 / 3.0]
        );
    }

    #[test]
    fn refuses_what_it_cannot_read_saying_why() {
        let complex = read_values(npy("<c8", "(1,)", &[0; 8]).path(), 10)
            .unwrap_err()
            .to_string();
        assert!(complex.contains("real and imaginary parts"), "{complex}");
        let big_endian = read_values(npy(">f4", "(1,)", &[0; 4]).path(), 10)
            .unwrap_err()
            .to_string();
        assert!(
            big_endian.contains("'>f4' is not a real number type"),
            "{big_endian}"
        );
        let short = read_values(npy("<f4", "(3,)", &[0; 8]).path(), 10)
            .unwrap_err()
            .to_string();
        assert!(
            short.contains("3 values of 4 bytes, but 8 bytes"),
            "{short}"
        );
        let many = read_values(npy("<f4", "(1000, 1000)", &[]).path(), 1 << 16)
            .unwrap_err()
            .to_string();
        assert!(many.contains("more than the 65536 values"), "{many}");
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), b"not numpy at all").unwrap();
        let text = read_values(file.path(), 10).unwrap_err().to_string();
        assert!(text.contains("not an .npy file"), "{text}");
    }
}

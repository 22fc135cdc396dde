//! The detection line format: how any receiver reports its clusters to `kplace verify`.
//!
//! # Format (version 1)
//!
//! UTF-8 text, one record per line; every line ends in `\n`, the last one included (a
//! trailing `\r` is tolerated), so a file cut short mid-line is an error, never a shorter
//! record. A line is at most [`MAX_LINE_BYTES`] (64 KiB) before its `\n`. Fields are
//! separated by one or more spaces or tabs.
//!
//! ```text
//! kplace-detections v1 cpi=1024x128
//! # anything after a '#' at the start of a line is a comment
//! frame 0 3
//! 61 7 1234567.5
//! 154 118 1022944.25
//! 246 3 998102.1
//! frame 1 0
//! frame 2 1
//! 61 7 1301551.9
//! ```
//!
//! - **Header** (the first line that is neither blank nor a comment, required):
//!   `kplace-detections v1 cpi=<N>x<M>`, with the CPI as samples (range bins) by chirps
//!   (Doppler bins).
//! - **Comments and blank lines**: a line whose first non-blank character is `#`, or that is
//!   blank, is ignored wherever it appears, including between a frame's cluster lines.
//!   Comments cannot follow data on the same line.
//! - **Frame line**: `frame <frame_id> <count>`: frame id a `u64`, count the number of cluster
//!   lines that follow (at most `N * M`; 0 for a frame with no detections). Every frame
//!   processed should appear, even with count 0: a frame id that never appears is a missing
//!   frame. A frame id may appear only once. Frames may come in any order, as long as none
//!   comes 65,536 ([`WINDOW`]) or more frames after a newer one.
//! - **Cluster line**: `<range_bin> <doppler_bin> <power>`: `u32`, `u32` and `f32`, with
//!   `range_bin < N`, `doppler_bin < M` and power finite and `>= 0`. Exactly `count` cluster
//!   lines follow each frame line.
//!
//! Writers print power with Rust's `{}` formatting of `f32` (the shortest text that parses back
//! to the same value, never in exponent form), so identical detections give identical bytes.
//! Readers accept any text Rust's `f32` parser accepts (`1e6`, `1000000.0`, ...).
//!
//! # Guarantees
//! - [`DetectionWriter`] only writes files [`read_detections`] accepts: it refuses a cluster
//!   outside the CPI or with a non-finite or negative power before writing any of its frame.
//! - [`DetectionReader`] returns the frames one at a time, in file order, each complete and
//!   valid, or a [`FormatError`] naming the source, the 1-based line and what is wrong. It
//!   holds one line (at most [`MAX_LINE_BYTES`]) and one frame at a time, plus the frame ids
//!   seen in constant memory ([`crate::seen`]); with a frame limit an endless input ends in an
//!   error within `limit` frames.
//! - [`read_detections`] reads a whole file that way and returns every frame (or the first
//!   error).

use std::io::{self, BufRead, Read, Write};

use crate::cpi::{Cpi, CpiParseError};
use crate::reference::Detection64;
use crate::seen::{Insert, SeenFrames, WINDOW};

const MAGIC: &str = "kplace-detections";
const VERSION: &str = "v1";

/// One reported cluster: its strongest cell and that cell's power.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cluster {
    /// Range bin, in `[0, N)`.
    pub range_bin: u32,
    /// Doppler bin, in `[0, M)`.
    pub doppler_bin: u32,
    /// `|X|^2` at the cell.
    pub power: f32,
}

impl From<Detection64> for Cluster {
    /// Rounds the power to the nearest `f32`.
    fn from(d: Detection64) -> Self {
        Cluster {
            range_bin: d.range_bin,
            doppler_bin: d.doppler_bin,
            power: d.power as f32,
        }
    }
}

/// The clusters reported for one frame.
#[derive(Clone, Debug, PartialEq)]
pub struct FrameDetections {
    /// The frame's id, as sent on the wire.
    pub frame_id: u64,
    /// Its clusters, in file order.
    pub clusters: Vec<Cluster>,
}

/// Writes the detection format to `W`.
///
/// It writes straight to `W` without allocating, so give it a buffered writer (a
/// [`std::io::BufWriter`], or a `Vec<u8>`).
#[derive(Debug)]
pub struct DetectionWriter<W: Write> {
    inner: W,
    cpi: Cpi,
}

impl<W: Write> DetectionWriter<W> {
    /// Writes the header for `cpi` and returns the writer.
    pub fn new(mut inner: W, cpi: Cpi) -> io::Result<Self> {
        writeln!(inner, "{MAGIC} {VERSION} cpi={cpi}")?;
        Ok(DetectionWriter { inner, cpi })
    }

    /// Writes one frame: its frame line, then one line per cluster.
    ///
    /// # Errors
    /// `InvalidInput`, writing nothing, if a cluster is outside the CPI or has a non-finite or
    /// negative power; otherwise any error of `W`.
    pub fn write_frame(&mut self, frame_id: u64, clusters: &[Cluster]) -> io::Result<()> {
        if let Some(bad) = clusters.iter().find(|c| !self.fits(c)) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "frame {frame_id}: cluster ({}, {}, power {}) is not valid for CPI {}",
                    bad.range_bin, bad.doppler_bin, bad.power, self.cpi
                ),
            ));
        }
        writeln!(self.inner, "frame {frame_id} {}", clusters.len())?;
        for c in clusters {
            writeln!(self.inner, "{} {} {}", c.range_bin, c.doppler_bin, c.power)?;
        }
        Ok(())
    }

    /// Flushes and returns the underlying writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.inner.flush()?;
        Ok(self.inner)
    }

    fn fits(&self, c: &Cluster) -> bool {
        (c.range_bin as usize) < self.cpi.samples
            && (c.doppler_bin as usize) < self.cpi.chirps
            && c.power.is_finite()
            && c.power >= 0.0
    }
}

/// A detection file that cannot be read, located to its line.
#[derive(Debug, thiserror::Error)]
#[error("{source_name}:{line}: {kind}")]
pub struct FormatError {
    /// The name of the source, as given to [`read_detections`].
    pub source_name: String,
    /// The 1-based line number of the problem.
    pub line: usize,
    /// What is wrong.
    pub kind: FormatErrorKind,
}

/// What is wrong with a detection file.
#[derive(Debug, thiserror::Error)]
pub enum FormatErrorKind {
    /// Reading failed.
    #[error("read error: {0}")]
    Io(io::Error),
    /// The line is not UTF-8.
    #[error("line is not valid UTF-8")]
    NotUtf8,
    /// The line is longer than [`MAX_LINE_BYTES`] (an input without newlines, or not a
    /// detection file).
    #[error("line is longer than {limit} bytes (not a detection file?)")]
    LineTooLong {
        /// [`MAX_LINE_BYTES`].
        limit: usize,
    },
    /// The last line has no `\n`: the file was cut short, e.g. its writer stopped mid-line.
    #[error("line is truncated: no newline at end of file (was its writer stopped mid-line?)")]
    NoFinalNewline,
    /// The input has no header (it is empty or only comments).
    #[error("no header: expected `{MAGIC} {VERSION} cpi=<samples>x<chirps>`")]
    MissingHeader,
    /// The first line is not a detection header.
    #[error("bad header {found:?}: expected `{MAGIC} {VERSION} cpi=<samples>x<chirps>`")]
    BadHeader {
        /// The line found.
        found: String,
    },
    /// The header names a version this reader does not know.
    #[error("unsupported format version {version:?} (this reader knows {VERSION})")]
    UnsupportedVersion {
        /// The version token found.
        version: String,
    },
    /// The header's CPI does not parse.
    #[error("bad header: {0}")]
    BadCpi(CpiParseError),
    /// A line starts with neither `frame` nor a number.
    #[error("unknown keyword {keyword:?}: expected `frame` or a cluster line")]
    UnknownKeyword {
        /// The first token of the line.
        keyword: String,
    },
    /// A line has the wrong number of fields.
    #[error("{what} has {found} fields, expected {expected}")]
    FieldCount {
        /// `frame line` or `cluster line`.
        what: &'static str,
        /// Fields expected.
        expected: usize,
        /// Fields found.
        found: usize,
    },
    /// A field is not a number of its type.
    #[error("{field} {value:?} is not a valid {expected}")]
    BadNumber {
        /// Which field.
        field: &'static str,
        /// Its text.
        value: String,
        /// The type expected (`u64`, `u32`, `f32`).
        expected: &'static str,
    },
    /// A power is negative, infinite or NaN.
    #[error("power {value:?} must be finite and >= 0")]
    BadPower {
        /// Its text.
        value: String,
    },
    /// A bin lies outside the header's CPI.
    #[error("{axis} bin {bin} is outside the CPI {cpi} (must be < {limit})")]
    BinOutOfRange {
        /// `range` or `doppler`.
        axis: &'static str,
        /// The bin.
        bin: u32,
        /// N or M.
        limit: usize,
        /// The header's CPI.
        cpi: Cpi,
    },
    /// A frame declares more clusters than the CPI has cells.
    #[error("frame {frame_id} declares {count} clusters, more than the {cells} cells of the CPI")]
    TooManyClusters {
        /// The frame.
        frame_id: u64,
        /// Its declared count.
        count: u64,
        /// `N * M`.
        cells: usize,
    },
    /// A cluster line appears where no frame expects one.
    #[error("cluster line outside a frame ({context})")]
    UnexpectedCluster {
        /// Why no frame was expecting it.
        context: String,
    },
    /// A frame ended (at the next frame line or at the end of input) before its count of
    /// cluster lines. The error's line is the frame's line.
    #[error("frame {frame_id} declares {declared} clusters but only {found} cluster lines follow")]
    TruncatedFrame {
        /// The frame.
        frame_id: u64,
        /// Its declared count.
        declared: u64,
        /// Cluster lines found.
        found: u64,
    },
    /// A frame id is outside the frames expected (see [`DetectionReader::with_frame_limit`]).
    #[error("frame {frame_id} is outside the frames expected, 0..{limit}")]
    FrameOutOfRange {
        /// The frame.
        frame_id: u64,
        /// The limit: ids are below it.
        limit: u64,
    },
    /// A frame id appears twice.
    #[error("frame {frame_id} appears again ({})", first_at(*first_line))]
    DuplicateFrame {
        /// The frame.
        frame_id: u64,
        /// The line of its first appearance, if still remembered (see [`crate::seen`]).
        first_line: Option<usize>,
    },
    /// A frame came [`WINDOW`] or more frames after a newer one: it can no longer be told
    /// from a duplicate. A run's detections come in frame order, or nearly.
    #[error(
        "frame {frame_id} comes after frame {newest}, {WINDOW} or more frames out of order: too late to tell from a duplicate; a receiver's detections come in frame order"
    )]
    TooLate {
        /// The frame.
        frame_id: u64,
        /// The newest frame before it.
        newest: u64,
    },
}

fn first_at(line: Option<usize>) -> String {
    match line {
        Some(line) => format!("first at line {line}"),
        None => format!(
            "first more than {} frames earlier",
            crate::seen::RECENT_LINES
        ),
    }
}

/// The longest line a reader accepts, in bytes, not counting its `\n`.
///
/// A valid header, frame or cluster line is well under 100 bytes; the rest is room for
/// padding and comments. It bounds what a reader holds for one line, so an input without
/// newlines (`/dev/zero`, a binary file) is an error at its first line rather than unbounded
/// memory.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// What a data line starts with.
enum LineKind {
    Frame,
    Cluster,
}

/// A frame being read: its line, its clusters so far and its declared count.
struct OpenFrame {
    line: usize,
    frame: FrameDetections,
    declared: u64,
}

/// Reads a detection file frame by frame, holding one frame at a time.
///
/// [`new`](Self::new) reads the header; each [`next_frame`](Self::next_frame) returns the next
/// frame, complete and valid, or `None` at the end of the input. What it keeps between frames
/// is the set of frame ids seen (to refuse a duplicate), in constant memory: a frame
/// [`WINDOW`] or more frames older than the newest is refused (see [`crate::seen`]); with
/// [`with_frame_limit`](Self::with_frame_limit) an endless input of valid lines ends in an
/// error (a duplicate or an id out of range) after at most `limit` frames.
#[derive(Debug)]
pub struct DetectionReader<R: BufRead> {
    inner: R,
    source_name: String,
    cpi: Cpi,
    line_no: usize,
    buf: Vec<u8>,
    seen: SeenFrames,
    /// The last complete frame, for error messages.
    last: Option<u64>,
    limit: Option<u64>,
}

impl<R: BufRead> DetectionReader<R> {
    /// Reads the header from `inner`. `source_name` (a path, `<stdin>`) names it in errors.
    pub fn new(mut inner: R, source_name: &str) -> Result<Self, FormatError> {
        let mut buf = Vec::new();
        let mut line_no = 0;
        let err = |line, kind| FormatError {
            source_name: source_name.into(),
            line,
            kind,
        };
        let cpi = match next_line(&mut inner, &mut buf, &mut line_no, source_name)? {
            Some(text) => parse_header(text).map_err(|kind| err(line_no, kind))?,
            None => return Err(err(line_no.max(1), FormatErrorKind::MissingHeader)),
        };
        Ok(DetectionReader {
            inner,
            source_name: source_name.into(),
            cpi,
            line_no,
            buf,
            seen: SeenFrames::new(),
            last: None,
            limit: None,
        })
    }

    /// Refuses frame ids `>= limit` ([`FormatErrorKind::FrameOutOfRange`]): a reader of a run
    /// of `limit` frames (ids `0..limit`).
    pub fn with_frame_limit(mut self, limit: u64) -> Self {
        self.limit = Some(limit);
        self
    }

    /// The header's CPI.
    pub fn cpi(&self) -> Cpi {
        self.cpi
    }

    /// The next frame with all its clusters, or `None` at the end of the input.
    pub fn next_frame(&mut self) -> Result<Option<FrameDetections>, FormatError> {
        let mut open: Option<OpenFrame> = None;
        loop {
            let text = next_line(
                &mut self.inner,
                &mut self.buf,
                &mut self.line_no,
                &self.source_name,
            )?;
            let line_no = self.line_no;
            let err = |kind| FormatError {
                source_name: self.source_name.clone(),
                line: line_no,
                kind,
            };
            let Some(text) = text else {
                return match open {
                    Some(f) => Err(self.truncated(f)),
                    None => Ok(None),
                };
            };
            let mut fields = text.split_ascii_whitespace();
            // next_line returns no blank line.
            let first = fields.next().unwrap_or_default();
            let kind = if first == "frame" {
                LineKind::Frame
            } else if first.starts_with(|c: char| c.is_ascii_digit() || c == '+' || c == '-') {
                LineKind::Cluster
            } else {
                return Err(err(FormatErrorKind::UnknownKeyword {
                    keyword: first.into(),
                }));
            };
            match (kind, open.take()) {
                (LineKind::Frame, Some(f)) => return Err(self.truncated(f)),
                (LineKind::Frame, None) => {
                    let [id, count] = exact_fields(fields, "frame line").map_err(err)?;
                    let frame_id: u64 = parse_number(id, "frame id", "u64").map_err(err)?;
                    let declared: u64 = parse_number(count, "cluster count", "u64").map_err(err)?;
                    let cells = self.cpi.cells();
                    if declared > cells as u64 {
                        return Err(err(FormatErrorKind::TooManyClusters {
                            frame_id,
                            count: declared,
                            cells,
                        }));
                    }
                    if let Some(limit) = self.limit.filter(|&l| frame_id >= l) {
                        return Err(err(FormatErrorKind::FrameOutOfRange { frame_id, limit }));
                    }
                    match self.seen.insert(frame_id, line_no) {
                        Insert::New => {}
                        Insert::Again(first_line) => {
                            return Err(err(FormatErrorKind::DuplicateFrame {
                                frame_id,
                                first_line,
                            }));
                        }
                        Insert::TooLate { newest } => {
                            return Err(err(FormatErrorKind::TooLate { frame_id, newest }));
                        }
                    }
                    let frame = FrameDetections {
                        frame_id,
                        clusters: Vec::new(),
                    };
                    if declared == 0 {
                        self.last = Some(frame_id);
                        return Ok(Some(frame));
                    }
                    open = Some(OpenFrame {
                        line: line_no,
                        frame,
                        declared,
                    });
                }
                (LineKind::Cluster, None) => {
                    let context = match self.last {
                        Some(id) => {
                            format!("frame {id} already has all the cluster lines it declared")
                        }
                        None => "no frame line before it".into(),
                    };
                    return Err(err(FormatErrorKind::UnexpectedCluster { context }));
                }
                (LineKind::Cluster, Some(mut f)) => {
                    let cluster = parse_cluster(first, fields, self.cpi).map_err(err)?;
                    f.frame.clusters.push(cluster);
                    if f.frame.clusters.len() as u64 == f.declared {
                        self.last = Some(f.frame.frame_id);
                        return Ok(Some(f.frame));
                    }
                    open = Some(f);
                }
            }
        }
    }

    /// The error for a frame that ended before its declared count, at its frame line.
    fn truncated(&self, f: OpenFrame) -> FormatError {
        FormatError {
            source_name: self.source_name.clone(),
            line: f.line,
            kind: FormatErrorKind::TruncatedFrame {
                frame_id: f.frame.frame_id,
                declared: f.declared,
                found: f.frame.clusters.len() as u64,
            },
        }
    }
}

/// Reads the next line that is neither blank nor a comment into `buf`, counting every line in
/// `line_no`; `None` at the end of the input. A line longer than [`MAX_LINE_BYTES`], or a last
/// line without its `\n`, is an error.
fn next_line<'b>(
    r: &mut impl BufRead,
    buf: &'b mut Vec<u8>,
    line_no: &mut usize,
    source_name: &str,
) -> Result<Option<&'b str>, FormatError> {
    let err = |line, kind| FormatError {
        source_name: source_name.into(),
        line,
        kind,
    };
    loop {
        buf.clear();
        let read = r
            .by_ref()
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', buf)
            .map_err(|e| err(*line_no + 1, FormatErrorKind::Io(e)))?;
        if read == 0 {
            return Ok(None);
        }
        *line_no += 1;
        if buf.last() != Some(&b'\n') {
            return Err(err(
                *line_no,
                if buf.len() > MAX_LINE_BYTES {
                    FormatErrorKind::LineTooLong {
                        limit: MAX_LINE_BYTES,
                    }
                } else {
                    FormatErrorKind::NoFinalNewline
                },
            ));
        }
        let text = std::str::from_utf8(buf).map_err(|_| err(*line_no, FormatErrorKind::NotUtf8))?;
        let data = text
            .split_ascii_whitespace()
            .next()
            .is_some_and(|first| !first.starts_with('#'));
        if data {
            break;
        }
    }
    // Checked above; the borrow is taken again here so that the loop may clear `buf`.
    std::str::from_utf8(buf)
        .map(Some)
        .map_err(|_| err(*line_no, FormatErrorKind::NotUtf8))
}

/// Reads a whole detection file into memory. `source_name` (a path, `<stdin>`) names it in
/// errors.
///
/// Returns the header's CPI and the frames in file order. It keeps every frame: for input of
/// unknown size, read frame by frame with a [`DetectionReader`] and a frame limit.
pub fn read_detections(
    r: impl BufRead,
    source_name: &str,
) -> Result<(Cpi, Vec<FrameDetections>), FormatError> {
    let mut reader = DetectionReader::new(r, source_name)?;
    let mut frames = Vec::new();
    while let Some(frame) = reader.next_frame()? {
        frames.push(frame);
    }
    Ok((reader.cpi(), frames))
}

fn parse_header(text: &str) -> Result<Cpi, FormatErrorKind> {
    let bad = || FormatErrorKind::BadHeader {
        found: text.trim_end().into(),
    };
    let mut fields = text.split_ascii_whitespace();
    if fields.next() != Some(MAGIC) {
        return Err(bad());
    }
    let version = fields.next().ok_or_else(bad)?;
    if version != VERSION {
        return Err(FormatErrorKind::UnsupportedVersion {
            version: version.into(),
        });
    }
    let cpi = fields
        .next()
        .and_then(|f| f.strip_prefix("cpi="))
        .ok_or_else(bad)?;
    if fields.next().is_some() {
        return Err(bad());
    }
    cpi.parse().map_err(FormatErrorKind::BadCpi)
}

/// The `N` fields after a line's first, which must be all the fields it has.
fn exact_fields<'a, const N: usize>(
    mut rest: impl Iterator<Item = &'a str>,
    what: &'static str,
) -> Result<[&'a str; N], FormatErrorKind> {
    let wrong = |found| FormatErrorKind::FieldCount {
        what,
        expected: N + 1,
        found,
    };
    let mut out = [""; N];
    for (i, slot) in out.iter_mut().enumerate() {
        *slot = rest.next().ok_or_else(|| wrong(i + 1))?;
    }
    match rest.count() {
        0 => Ok(out),
        extra => Err(wrong(N + 1 + extra)),
    }
}

fn parse_number<T: std::str::FromStr>(
    text: &str,
    field: &'static str,
    expected: &'static str,
) -> Result<T, FormatErrorKind> {
    text.parse().map_err(|_| FormatErrorKind::BadNumber {
        field,
        value: text.into(),
        expected,
    })
}

fn parse_cluster<'a>(
    range: &str,
    rest: impl Iterator<Item = &'a str>,
    cpi: Cpi,
) -> Result<Cluster, FormatErrorKind> {
    let [doppler, power] = exact_fields(rest, "cluster line")?;
    let range_bin: u32 = parse_number(range, "range bin", "u32")?;
    let doppler_bin: u32 = parse_number(doppler, "doppler bin", "u32")?;
    let power_value: f32 = parse_number(power, "power", "f32")?;
    if !(power_value.is_finite() && power_value >= 0.0) {
        return Err(FormatErrorKind::BadPower {
            value: power.into(),
        });
    }
    for (axis, bin, limit) in [
        ("range", range_bin, cpi.samples),
        ("doppler", doppler_bin, cpi.chirps),
    ] {
        if bin as usize >= limit {
            return Err(FormatErrorKind::BinOutOfRange {
                axis,
                bin,
                limit,
                cpi,
            });
        }
    }
    Ok(Cluster {
        range_bin,
        doppler_bin,
        power: power_value,
    })
}

#[cfg(test)]
mod tests;

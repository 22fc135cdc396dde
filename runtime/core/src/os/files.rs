//! Files a user names. Reading one whole, with a bound: `/dev/zero`, a FIFO or a file still
//! growing never fills memory. At most `limit` bytes are read; a file that holds more is an
//! error that names it and the limit, and nothing past the limit is kept. [`read_bounded`]
//! (and [`read_text_bounded`]) is how every file kplace reads whole is read: a regular file
//! whose length is over the limit is refused before a byte of it is read, and [`excerpt`] is
//! how an error quotes what it read. Writing one is [`super::write`]'s.

use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// Reads `path` as UTF-8 text of at most `limit` bytes; more is an error of kind
/// `InvalidData` naming the file and the limit (as is text that is not UTF-8).
pub fn read_to_string_bounded(path: &Path, limit: u64) -> io::Result<String> {
    let file = std::fs::File::open(path)?;
    let mut text = String::new();
    file.take(limit.saturating_add(1))
        .read_to_string(&mut text)?;
    if text.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} holds more than {} MiB, more than such a file can be",
                path.display(),
                limit >> 20
            ),
        ));
    }
    Ok(text)
}

/// Why a file could not be read whole within its bound. Each names the file and what it is.
#[derive(Debug, thiserror::Error)]
pub enum ReadBoundedError {
    /// Opening or reading it failed.
    #[error("cannot read {what} {}: {cause}", path.display())]
    Io {
        /// What the file is to kplace (`graph`, `placement`, `run report`, ...).
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The I/O error.
        cause: io::Error,
    },
    /// It holds more than `limit` bytes.
    #[error("{what} {}{}", path.display(), held(*size, *limit))]
    TooLarge {
        /// What the file is to kplace.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Its length, where the file system states one (a regular file, refused before it
        /// is read); `None` for one that held more than `limit` when read (a device, a FIFO).
        size: Option<u64>,
        /// The most it may hold.
        limit: u64,
    },
    /// It is not UTF-8 text.
    #[error("{what} {} is not UTF-8 text (from byte {offset})", path.display())]
    NotText {
        /// What the file is to kplace.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The first byte that is not part of valid UTF-8.
        offset: usize,
    },
}

impl ReadBoundedError {
    /// Whether the file does not exist (some readers take that as "not yet").
    pub fn is_not_found(&self) -> bool {
        matches!(self, ReadBoundedError::Io { cause, .. } if cause.kind() == io::ErrorKind::NotFound)
    }
}

/// How much a too-large file held, and the limit: its length when known, else "more than"
/// the limit.
fn held(size: Option<u64>, limit: u64) -> String {
    match size {
        Some(size) => format!(
            " is {size} bytes ({}), more than such a file can be (at most {})",
            amount(size),
            amount(limit)
        ),
        None => format!(
            " holds more than {}, more than such a file can be",
            amount(limit)
        ),
    }
}

/// `bytes` in the largest binary unit it reaches: whole (`4 MiB`) when it is a whole number of
/// them, else to one decimal (`1.5 GiB`).
fn amount(bytes: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    match UNITS.iter().find(|(unit, _)| bytes >= *unit) {
        Some((unit, name)) if bytes.is_multiple_of(*unit) => format!("{} {name}", bytes / unit),
        Some((unit, name)) => format!("{:.1} {name}", bytes as f64 / *unit as f64),
        None => format!("{bytes} bytes"),
    }
}

/// Reads `path` whole, at most `limit` bytes of it; `what` names it in errors (`placement`).
/// A regular file longer than `limit` is refused from its length, before a byte is read; any
/// other (a device, a FIFO, a `/proc` file, whose length says nothing) is read up to
/// `limit + 1` bytes, and refused if it held more. A file that grows while it is read is
/// refused too: nothing past the limit is ever kept.
pub fn read_bounded(
    path: &Path,
    limit: u64,
    what: &'static str,
) -> Result<Vec<u8>, ReadBoundedError> {
    let io = |cause| ReadBoundedError::Io {
        what,
        path: path.to_path_buf(),
        cause,
    };
    let too_large = |size| ReadBoundedError::TooLarge {
        what,
        path: path.to_path_buf(),
        size,
        limit,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let metadata = file.metadata().map_err(io)?;
    let mut bytes = Vec::new();
    if metadata.is_file() {
        if metadata.len() > limit {
            return Err(too_large(Some(metadata.len())));
        }
        bytes.reserve(usize::try_from(metadata.len()).unwrap_or(0));
    }
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(too_large(None));
    }
    Ok(bytes)
}

/// As [`read_bounded`], the file read as UTF-8 text.
pub fn read_text_bounded(
    path: &Path,
    limit: u64,
    what: &'static str,
) -> Result<String, ReadBoundedError> {
    String::from_utf8(read_bounded(path, limit, what)?).map_err(|e| ReadBoundedError::NotText {
        what,
        path: path.to_path_buf(),
        offset: e.utf8_error().valid_up_to(),
    })
}

/// The most bytes of a `/proc` or `/sys` file read (their length says nothing): far more than
/// any kplace reads (`/proc/cpuinfo` of hundreds of cores is under a MiB).
pub const MAX_PROC_BYTES: u64 = 16 << 20;

/// The most characters of an input that [`excerpt`] quotes.
pub const EXCERPT_CHARS: usize = 80;

/// `text` quoted for an error message (as `{:?}` quotes it), cut after [`EXCERPT_CHARS`]
/// characters: a longer text is its start, `...` and its length in bytes, so that a bad line
/// of megabytes costs a line of stderr, not megabytes.
pub fn excerpt(text: &str) -> String {
    match text.char_indices().nth(EXCERPT_CHARS) {
        None => format!("{text:?}"),
        Some((end, _)) => format!("{:?}... ({} bytes)", &text[..end], text.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_within_the_limit_is_read_whole_and_one_beyond_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.json");
        std::fs::write(&path, "0123456789").unwrap();
        assert_eq!(read_to_string_bounded(&path, 10).unwrap(), "0123456789");
        let e = read_to_string_bounded(&path, 9).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("f.json holds more than"), "{e}");
    }

    #[test]
    fn an_endless_device_is_refused_at_the_limit() {
        let e = read_to_string_bounded(Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert!(
            e.to_string().contains("/dev/zero holds more than 1 MiB"),
            "{e}"
        );
    }

    #[test]
    fn a_regular_file_over_the_limit_is_refused_from_its_length_before_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.yaml");
        // Sparse: a length of 1 GiB and 1 byte, not one byte written.
        let file = std::fs::File::create(&path).unwrap();
        file.set_len((1 << 30) + 1).unwrap();
        let e = read_bounded(&path, 1 << 30, "graph").unwrap_err();
        assert!(
            matches!(e, ReadBoundedError::TooLarge { size: Some(n), .. } if n == (1 << 30) + 1),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            format!(
                "graph {} is 1073741825 bytes (1.0 GiB), more than such a file can be (at most 1 GiB)",
                path.display()
            )
        );
        std::fs::write(&path, "abc").unwrap();
        assert_eq!(read_text_bounded(&path, 3, "graph").unwrap(), "abc");
        assert!(read_bounded(&path, 2, "graph").is_err());
    }

    #[test]
    fn a_device_is_read_up_to_the_limit_and_refused_past_it() {
        let e = read_bounded(Path::new("/dev/zero"), 4 << 20, "placement").unwrap_err();
        assert!(
            matches!(e, ReadBoundedError::TooLarge { size: None, .. }),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "placement /dev/zero holds more than 4 MiB, more than such a file can be"
        );
        assert_eq!(read_bounded(Path::new("/dev/null"), 1, "x").unwrap(), b"");
    }

    #[test]
    fn a_missing_file_and_one_not_text_say_so_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.json");
        let e = read_bounded(&missing, 10, "run report").unwrap_err();
        assert!(e.is_not_found(), "{e:?}");
        assert!(e.to_string().starts_with("cannot read run report "), "{e}");
        let binary = dir.path().join("b.txt");
        std::fs::write(&binary, b"ok\xff").unwrap();
        let e = read_text_bounded(&binary, 10, "control file").unwrap_err();
        assert!(!e.is_not_found());
        assert!(
            e.to_string()
                .contains("b.txt is not UTF-8 text (from byte 2)"),
            "{e}"
        );
    }

    #[test]
    fn an_excerpt_is_short_whatever_it_quotes() {
        assert_eq!(excerpt("fir.gain"), "\"fir.gain\"");
        let long = "x".repeat(2 << 20);
        let quoted = excerpt(&long);
        assert!(quoted.len() < 120, "{quoted}");
        assert!(quoted.ends_with("\"... (2097152 bytes)"), "{quoted}");
        // Escapes make a character longer, never the excerpt unbounded.
        assert!(excerpt(&"\0".repeat(1 << 20)).len() < 1024);
        assert_eq!(
            excerpt(&"é".repeat(81))
                .chars()
                .filter(|c| *c == 'é')
                .count(),
            80
        );
    }
}

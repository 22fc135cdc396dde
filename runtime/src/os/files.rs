//! Files a user names. Reading one whole, with a bound: `/dev/zero`, a FIFO or a file still
//! growing never fills memory. At most `limit` bytes are read; a file that holds more is an
//! error that names it and the limit, and nothing past the limit is kept. Writing one is
//! [`super::write`]'s.

use std::io::{self, Read};
use std::path::Path;

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
}

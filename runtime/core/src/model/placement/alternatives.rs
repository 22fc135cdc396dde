//! A placement's `alternatives:` list, checked: the placements a run may switch to, each
//! once, none the placement itself, at most [`MAX_ALTERNATIVES`]; a path made relative to the
//! file's directory.

use std::path::{Path, PathBuf};

use super::MAX_ALTERNATIVES;

/// What is wrong with a placement's `alternatives:` list.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AlternativesError {
    /// More than [`MAX_ALTERNATIVES`].
    #[error(
        "alternatives lists {0} placements; at most {MAX_ALTERNATIVES} (each is planned for the \
         whole run)"
    )]
    TooMany(usize),
    /// An entry is empty.
    #[error("alternatives: an entry is empty")]
    Empty,
    /// An entry names the placement itself (by name or by file).
    #[error("alternatives: {0} is this placement itself; list the others")]
    Itself(String),
    /// An entry is listed twice.
    #[error("alternatives: {0} is listed twice")]
    Twice(String),
}

/// The alternatives the placement named `own` in file `path` lists, checked: at most
/// [`MAX_ALTERNATIVES`], each once, none empty or the placement itself (by name or by file); a
/// path made relative to `base`, the file's directory.
pub(super) fn checked(
    base: &Path,
    path: &Path,
    own: &str,
    written: Vec<String>,
) -> Result<Vec<PathBuf>, AlternativesError> {
    let stem = path.file_stem().and_then(|s| s.to_str());
    if written.len() > MAX_ALTERNATIVES {
        return Err(AlternativesError::TooMany(written.len()));
    }
    let mut seen = std::collections::BTreeSet::new();
    written
        .into_iter()
        .map(|w| {
            if w.trim().is_empty() {
                return Err(AlternativesError::Empty);
            }
            if w == own || Some(w.as_str()) == stem || base.join(&w) == path {
                return Err(AlternativesError::Itself(w));
            }
            if !seen.insert(w.clone()) {
                return Err(AlternativesError::Twice(w));
            }
            let path = PathBuf::from(&w);
            Ok(if crate::model::locate::is_name(&path) {
                path
            } else {
                base.join(path)
            })
        })
        .collect()
}

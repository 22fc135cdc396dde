//! Reading a sweep's results file (`bisect-rate.json`), strictly, for the plots: the current
//! version as it is, versions 2 and 3 brought to it by [`super::upgrade`], any other refused.

use std::path::Path;

use serde::Deserialize;

use super::PlotError;
use super::upgrade::upgrade;
use crate::rate::sweep::{SCHEMA, SweepFile};

/// Just the schema of a results file, read before the rest so that a file of another kind
/// is named as such rather than by its first unexpected field.
#[derive(Deserialize)]
struct SchemaOnly {
    schema: Option<String>,
}

/// The most bytes a results file is read for: far more than any search writes (a few MiB
/// with every trial), far less than memory.
pub const MAX_RESULTS_BYTES: u64 = 256 << 20;

/// Reads and checks one results file. Errors name the file, and a parse error its line and
/// column (of the file as written, for every version).
pub fn read_results(path: &Path) -> Result<SweepFile, PlotError> {
    let refused = |message: String| PlotError::Results { message };
    let text = kplace::os::files::read_text_bounded(path, MAX_RESULTS_BYTES, "results file")
        .map_err(|e| refused(e.to_string()))?;
    let head: SchemaOnly = serde_json::from_str(&text).map_err(|e| {
        refused(format!(
            "{} is not JSON (a results file of kplace bisect-rate is): {e}",
            path.display()
        ))
    })?;
    let invalid = |e: serde_json::Error| {
        refused(format!(
            "{} is not a valid {SCHEMA} results file: {e}",
            path.display()
        ))
    };
    match head.schema.as_deref() {
        Some(SCHEMA) => serde_json::from_str(&text).map_err(invalid),
        Some(other) => {
            let version = other
                .strip_prefix("kplace-bisect-rate/")
                .unwrap_or_default();
            let mut file: serde_json::Value = serde_json::from_str(&text).map_err(invalid)?;
            if !upgrade(&mut file, version) {
                return Err(refused(format!(
                    "{} has schema {other:?}, not {SCHEMA:?} (nor version 2 or 3, which are read \
                     as it): rerun kplace bisect-rate with this kplace to write it",
                    path.display()
                )));
            }
            serde_json::from_value(file).map_err(|e| {
                refused(format!(
                    "{} (schema {other}, read as {SCHEMA}) is not a valid results file: {e}",
                    path.display()
                ))
            })
        }
        None => Err(refused(format!(
            "{} has no \"schema\" field: not a results file of kplace bisect-rate ({SCHEMA})",
            path.display()
        ))),
    }
}

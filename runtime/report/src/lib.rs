//! What a run measured, and the files that say it.
//!
//! The executor counts into its own types (`kplace_core::measure`, re-exported here under
//! their old names): [`metrics`] (latency histograms and per-stage timing, gathered into a
//! [`metrics::RunMetrics`]), [`overhead`] (where the executor's threads spend their time
//! besides the kernels), [`trace`] (a run's timeline, written as Chrome trace events by
//! `kplace run --trace FILE.json`) and [`nvtx`]. This crate
//! reads them and says them:
//!
//! - [`telemetry`]: NVML readings of the GPUs a run uses, sampled beside it.
//! - [`run`]: the typed run report (`kplace run --report FILE`), the one set of structs every
//!   writer and reader of that file shares.
//! - [`send`]: the sender's report (`kplace send --report FILE`), typed the same way.
//! - [`ready`]: the ready file (`kplace run --ready-file FILE`): where a run takes packets, once
//!   it does.
//! - [`progress`]: a run's progress as JSON lines (`kplace run --report-every DURATION`).
//! - [`openmetrics`]: the same progress as metrics a monitoring system scrapes (`kplace run
//!   --metrics ADDR`).
//! - [`endpoint`]: the HTTP endpoint a monitoring system scrapes [`openmetrics`] from.
//! - [`devices`]: what this machine offers for CUDA (driver, devices, NVML, libraries), for
//!   `kplace devices` and the telemetry.
//! - [`output`]: where a run's files go (a file, or standard output for `-`): each one whole
//!   or absent, and a failed one costs only itself.
//!
//! # What reading guarantees
//! [`read_json`] reads a versioned report strictly: the `schema` must be the type's own, an
//! unknown field, a field of the wrong type and a missing field (a nullable one too: it must be
//! present as `null`) are each an error naming the file and the field's path, e.g.
//! `trial-3.json: pipelines[1].latency.post_frame: missing field p99_ms`. A report that parses is
//! therefore exactly what the writer wrote; no reader falls back to zero.
//!
//! [`json_schema`] is the JSON Schema generated from the same types (committed as
//! `docs/schema/*.schema.json`, kept equal to the types by a test).

#![warn(missing_docs)]

pub mod devices;
pub mod endpoint;
pub mod openmetrics;
pub mod output;
pub mod progress;
pub mod ready;
pub mod run;
pub mod send;
pub mod telemetry;

pub use kplace_core::measure::{metrics, nvtx, overhead, trace};

use std::fmt::Write as _;

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The most bytes a report file is read for (a run's, a sender's, the ready file): far more
/// than any run writes (a few MiB with every histogram), far less than memory.
pub const MAX_REPORT_BYTES: u64 = 256 << 20;

/// A report file with a schema name and version of its own.
pub trait Versioned: Serialize + DeserializeOwned {
    /// The `schema` field every file of this type carries.
    const SCHEMA: &'static str;
}

impl Versioned for run::RunReport {
    const SCHEMA: &'static str = run::RUN_SCHEMA;
}

impl Versioned for run::MultiRunReport {
    const SCHEMA: &'static str = run::MULTI_SCHEMA;
}

/// Why a report could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The text is not JSON.
    #[error("{origin}: not JSON: {source}")]
    Json {
        /// The file (or other origin) read.
        origin: String,
        /// The parser's error.
        source: serde_json::Error,
    },
    /// The file is another kind of report, or another version.
    #[error("{origin}: {}", schema_mismatch(found, expected))]
    Schema {
        /// The file read.
        origin: String,
        /// What its `schema` field holds (`none` when absent).
        found: String,
        /// The schema the reader understands.
        expected: &'static str,
    },
    /// A field is unknown, of the wrong type, or missing.
    #[error("{origin}: {path}: {message}")]
    Field {
        /// The file read.
        origin: String,
        /// The field's path (`.` for the top level).
        path: String,
        /// What is wrong with it.
        message: String,
    },
}

/// What a reader says of a file whose schema is not `expected`: another version of the same
/// report is named as such, with what to do.
fn schema_mismatch(found: &str, expected: &str) -> String {
    let name = |schema: &str| {
        schema
            .trim_matches('"')
            .split('/')
            .next()
            .map(str::to_owned)
    };
    match (name(found), name(expected)) {
        (Some(a), Some(b)) if a == b && found.trim_matches('"') != expected => format!(
            "schema {found} is another version of this report; this kplace reads {expected}: \
             produce the file again with this kplace"
        ),
        _ => format!("schema {found}, expected {expected}"),
    }
}

/// Reads a `T` from `text`, strictly (see the module docs); `origin` names the file in errors.
pub fn read_json<T: Versioned>(text: &str, origin: &str) -> Result<T, ReadError> {
    let value: Value = serde_json::from_str(text).map_err(|source| ReadError::Json {
        origin: origin.to_string(),
        source,
    })?;
    from_value(value, origin)
}

/// As [`read_json`], from parsed JSON.
pub fn from_value<T: Versioned>(value: Value, origin: &str) -> Result<T, ReadError> {
    let found = value.get("schema").and_then(Value::as_str);
    if found != Some(T::SCHEMA) {
        return Err(ReadError::Schema {
            origin: origin.to_string(),
            found: found.map_or_else(|| "none".to_string(), |s| format!("{s:?}")),
            expected: T::SCHEMA,
        });
    }
    let typed: T = serde_path_to_error::deserialize(&value).map_err(|e| ReadError::Field {
        origin: origin.to_string(),
        path: e.path().to_string(),
        message: e.inner().to_string(),
    })?;
    // serde fills an absent nullable field with None: what the writer writes must all be there.
    let written = serde_json::to_value(&typed).map_err(|e| ReadError::Field {
        origin: origin.to_string(),
        path: ".".to_string(),
        message: format!("cannot be written back: {e}"),
    })?;
    if let Some((path, field)) = first_missing(&written, &value, String::new()) {
        return Err(ReadError::Field {
            origin: origin.to_string(),
            path: if path.is_empty() { ".".into() } else { path },
            message: format!("missing field {field}"),
        });
    }
    Ok(typed)
}

/// The first object key `written` has and `read` lacks, as (the object's path, the key).
fn first_missing(written: &Value, read: &Value, path: String) -> Option<(String, String)> {
    match (written, read) {
        (Value::Object(w), Value::Object(r)) => w.iter().find_map(|(key, w)| match r.get(key) {
            None => Some((path.clone(), key.clone())),
            Some(r) => {
                let mut inner = path.clone();
                if !inner.is_empty() {
                    inner.push('.');
                }
                inner.push_str(key);
                first_missing(w, r, inner)
            }
        }),
        (Value::Array(w), Value::Array(r)) => {
            w.iter().zip(r).enumerate().find_map(|(i, (w, r))| {
                let mut inner = path.clone();
                let _ = write!(inner, "[{i}]");
                first_missing(w, r, inner)
            })
        }
        _ => None,
    }
}

/// The JSON Schema of `T`, generated from its types: every property required (a nullable one
/// as `null`), as [`read_json`] reads it.
pub fn json_schema<T: JsonSchema>() -> Value {
    let mut schema = schemars::schema_for!(T).to_value();
    require_all(&mut schema);
    schema
}

fn require_all(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            if let Some(Value::Object(props)) = map.get("properties") {
                let names = props.keys().cloned().map(Value::String).collect();
                map.insert("required".to_string(), Value::Array(names));
            }
            map.values_mut().for_each(require_all);
        }
        Value::Array(items) => items.iter_mut().for_each(require_all),
        _ => {}
    }
}

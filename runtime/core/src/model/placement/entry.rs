//! A stage's entry in a placement file, as written: `cpu` (the short form) or
//! `{device: gpu:0, library: ..., priority: -1, tile: 64}`, and what it resolves to.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};

use super::{
    Device, PYTHON, PlacementError, StagePlacement, UnknownDevice, is_python_module,
    resolve_library,
};

/// A stage entry: `cpu` (short form) or `{device: gpu:0, library: ..., priority: -1, tile: 64}`.
pub(super) struct StageEntry {
    device: String,
    library: Option<String>,
    priority: i32,
    tile: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StageEntryLong {
    device: String,
    #[serde(default)]
    library: Option<String>,
    #[serde(default)]
    priority: i32,
    #[serde(default)]
    tile: Option<u64>,
}

impl<'de> Deserialize<'de> for StageEntry {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EntryVisitor;
        impl<'de> Visitor<'de> for EntryVisitor {
            type Value = StageEntry;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(
                    "a device (cpu, gpu, gpu:N, python) or a map with device, library, priority, tile",
                )
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<StageEntry, E> {
                Ok(StageEntry {
                    device: v.to_string(),
                    library: None,
                    priority: 0,
                    tile: None,
                })
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<StageEntry, A::Error> {
                // Delegating keeps the long form's own errors (unknown field, bad type).
                let long = StageEntryLong::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(StageEntry {
                    device: long.device,
                    library: long.library,
                    priority: long.priority,
                    tile: long.tile,
                })
            }
        }
        deserializer.deserialize_any(EntryVisitor)
    }
}

impl StageEntry {
    /// The stage's placement: its device, and its library resolved against `base` (the
    /// placement's directory); a stage on `python` runs on the CPU from its own Python module,
    /// else the placement's (`libraries`). An error names `file` and the entry's line.
    pub(super) fn resolve(
        self,
        name: &str,
        (file, line): (&Path, u64),
        base: &Path,
        libraries: &BTreeMap<String, PathBuf>,
    ) -> Result<StagePlacement, PlacementError> {
        let invalid = |message: String| PlacementError::Invalid {
            path: file.to_path_buf(),
            line: Some(line),
            message,
        };
        let StageEntry {
            device,
            library,
            priority,
            tile,
        } = self;
        let mut library = library.map(|l| resolve_library(base, &l));
        let device = if device == PYTHON {
            match library.clone().or_else(|| libraries.get(PYTHON).cloned()) {
                Some(module) if is_python_module(&module) => library = Some(module),
                Some(other) => {
                    return Err(invalid(format!(
                        "stage {name} is placed on python, but its library {} is not a Python module (a .py file)",
                        other.display()
                    )));
                }
                None => {
                    return Err(invalid(format!(
                        "stage {name} is placed on python, which needs the Python module of its kernel: name it with {{device: python, library: kernels.py}}, or under libraries: {{python: kernels.py}}"
                    )));
                }
            }
            Device::Cpu
        } else {
            device.parse().map_err(|UnknownDevice(device)| {
                invalid(format!(
                    "stage {name}: unknown device {device:?} (expected cpu, gpu, gpu:N or python)"
                ))
            })?
        };
        if tile == Some(0) {
            return Err(invalid(format!("stage {name}: tile must be at least 1")));
        }
        Ok(StagePlacement {
            device,
            library,
            priority,
            tile,
            line,
        })
    }
}

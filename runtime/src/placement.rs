//! Placement files: which device runs each stage, from which library, with which executor
//! settings.
//!
//! A placement is data, not code: swapping one for another is a file edit, never a rebuild.
//! [`Placement::load`] checks the file's own syntax and values; whether its stages exist in a
//! graph and whether a library offers their kernels is checked when planning. Every error names
//! the file, and the line and column where there is one.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde_saphyr::Spanned;

/// A device a stage can be placed on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Device {
    /// The host CPU.
    Cpu,
    /// CUDA device with this ordinal.
    Gpu(u32),
}

impl Device {
    /// The kernel device kind this device runs.
    pub fn kind(self) -> kplace_abi::DeviceKind {
        match self {
            Device::Cpu => kplace_abi::DeviceKind::CPU,
            Device::Gpu(_) => kplace_abi::DeviceKind::CUDA,
        }
    }
}

impl FromStr for Device {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "cpu" => Ok(Device::Cpu),
            "gpu" | "cuda" => Ok(Device::Gpu(0)),
            _ => s
                .strip_prefix("gpu:")
                .or_else(|| s.strip_prefix("cuda:"))
                .and_then(|n| n.parse().ok())
                .map(Device::Gpu)
                .ok_or_else(|| format!("unknown device {s:?} (expected cpu, gpu or gpu:N)")),
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Gpu(n) => write!(f, "gpu:{n}"),
        }
    }
}

/// A checked placement file.
#[derive(Clone, Debug)]
pub struct Placement {
    /// The placement's name.
    pub name: String,
    /// What the placement is for, if the file says.
    pub description: Option<String>,
    /// The file it came from.
    pub path: PathBuf,
    /// Libraries per device kind (`cpu`, `gpu`), resolved against the file's directory.
    pub libraries: BTreeMap<String, PathBuf>,
    /// Each stage's placement, by stage name.
    pub stages: BTreeMap<String, StagePlacement>,
    /// Executor settings.
    pub runtime: RuntimeSettings,
}

/// Where one stage runs.
#[derive(Clone, Debug, PartialEq)]
pub struct StagePlacement {
    /// The device.
    pub device: Device,
    /// A library for this stage alone, overriding the per-device one.
    pub library: Option<PathBuf>,
    /// CUDA stream priority (lower is more urgent); ignored on the CPU.
    pub priority: i32,
    /// Indices per launch along the stage's split axis, overriding the graph's tile (and the
    /// GPU's default, see [`crate::plan::tiles`]); only for stages the graph splits.
    pub tile: Option<u64>,
    /// Line of the entry in the placement file.
    pub line: u64,
}

/// Executor settings a placement carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeSettings {
    /// Frames in flight, each with its own buffers and kernel states.
    pub slots: usize,
    /// Threads running CPU stages.
    pub workers: usize,
    /// Cores the workers are pinned to, one each, in order (empty: not pinned).
    pub pin_cores: Vec<usize>,
}

impl Default for RuntimeSettings {
    fn default() -> Self {
        Self {
            slots: 4,
            workers: 1,
            pin_cores: Vec::new(),
        }
    }
}

/// Why a placement could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum PlacementError {
    /// The file could not be read.
    #[error("cannot read placement {}: {cause}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        cause: std::io::Error,
    },
    /// The file is not a valid placement (the message has line and column).
    #[error("placement {}: {cause}", path.display())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The parser's error, with line, column and a snippet.
        cause: Box<serde_saphyr::Error>,
    },
    /// A value is out of range.
    #[error("placement {}{}: {message}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The line, where there is one.
        line: Option<u64>,
        /// What is wrong.
        message: String,
    },
}

impl Placement {
    /// Reads and checks a placement file.
    pub fn load(path: &Path) -> Result<Placement, PlacementError> {
        let text = std::fs::read_to_string(path).map_err(|source| PlacementError::Io {
            path: path.to_path_buf(),
            cause: source,
        })?;
        Self::parse(&text, path)
    }

    /// Checks placement text; `path` names it in errors and anchors relative library paths.
    pub fn parse(text: &str, path: &Path) -> Result<Placement, PlacementError> {
        let file: PlacementFile =
            serde_saphyr::from_str(text).map_err(|source| PlacementError::Syntax {
                path: path.to_path_buf(),
                cause: Box::new(source),
            })?;
        let invalid = |line, message: String| PlacementError::Invalid {
            path: path.to_path_buf(),
            line,
            message,
        };
        // A bare file name has an empty parent; "." keeps relative library paths relative to
        // the current directory instead of letting the dynamic loader search the system path.
        let base = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        let libraries = file
            .libraries
            .into_iter()
            .map(|(kind, p)| {
                if kind != "cpu" && kind != "gpu" {
                    return Err(invalid(
                        Some(p.referenced.line()),
                        format!("libraries: unknown device kind {kind} (expected cpu or gpu)"),
                    ));
                }
                Ok((kind, base.join(p.value)))
            })
            .collect::<Result<_, _>>()?;
        let stages = file
            .stages
            .into_iter()
            .map(|(name, entry)| {
                let line = entry.referenced.line();
                let StageEntry {
                    device,
                    library,
                    priority,
                    tile,
                } = entry.value;
                let device = device
                    .parse()
                    .map_err(|e: String| invalid(Some(line), format!("stage {name}: {e}")))?;
                if tile == Some(0) {
                    return Err(invalid(
                        Some(line),
                        format!("stage {name}: tile must be at least 1"),
                    ));
                }
                let library = library.map(|l| base.join(l));
                Ok((
                    name,
                    StagePlacement {
                        device,
                        library,
                        priority,
                        tile,
                        line,
                    },
                ))
            })
            .collect::<Result<_, _>>()?;
        let runtime = file.runtime.unwrap_or_default();
        let line = None;
        if runtime.slots == 0 {
            return Err(invalid(line, "runtime.slots must be at least 1".into()));
        }
        if runtime.workers == 0 {
            return Err(invalid(line, "runtime.workers must be at least 1".into()));
        }
        if !runtime.pin_cores.is_empty() && runtime.pin_cores.len() < runtime.workers {
            return Err(invalid(
                line,
                format!(
                    "runtime.pin_cores lists {} cores for {} workers (give one per worker, or none)",
                    runtime.pin_cores.len(),
                    runtime.workers
                ),
            ));
        }
        Ok(Placement {
            name: file.name,
            description: file.description,
            path: path.to_path_buf(),
            libraries,
            stages,
            runtime: runtime.into(),
        })
    }

    /// The library file to load for `stage`: its own, else its device kind's, else `None`
    /// (the planner then uses the default library for the kind).
    pub fn library_for<'a>(&'a self, stage: &'a StagePlacement) -> Option<&'a Path> {
        let kind = match stage.device {
            Device::Cpu => "cpu",
            Device::Gpu(_) => "gpu",
        };
        stage
            .library
            .as_deref()
            .or_else(|| self.libraries.get(kind).map(PathBuf::as_path))
    }
}

// ---- the file as written --------------------------------------------------------------------

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlacementFile {
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    libraries: BTreeMap<String, Spanned<String>>,
    stages: BTreeMap<String, Spanned<StageEntry>>,
    runtime: Option<RuntimeFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuntimeFile {
    #[serde(default = "default_slots")]
    slots: usize,
    #[serde(default = "default_workers")]
    workers: usize,
    #[serde(default)]
    pin_cores: Vec<usize>,
}

fn default_slots() -> usize {
    RuntimeSettings::default().slots
}

fn default_workers() -> usize {
    RuntimeSettings::default().workers
}

impl Default for RuntimeFile {
    fn default() -> Self {
        Self {
            slots: default_slots(),
            workers: default_workers(),
            pin_cores: Vec::new(),
        }
    }
}

impl From<RuntimeFile> for RuntimeSettings {
    fn from(r: RuntimeFile) -> Self {
        Self {
            slots: r.slots,
            workers: r.workers,
            pin_cores: r.pin_cores,
        }
    }
}

/// A stage entry: `cpu` (short form) or `{device: gpu:0, library: ..., priority: -1, tile: 64}`.
struct StageEntry {
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
                    "a device (cpu, gpu, gpu:N) or a map with device, library, priority, tile",
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Placement, PlacementError> {
        Placement::parse(text, Path::new("placements/test.yaml"))
    }

    #[test]
    fn short_and_long_stage_forms() {
        let p = parse(
            "name: t\nstages:\n  a: cpu\n  b: {device: gpu:1, priority: -1, library: lib.so}\n  c: gpu\n",
        )
        .unwrap();
        assert_eq!(p.stages["a"].device, Device::Cpu);
        assert_eq!(p.stages["b"].device, Device::Gpu(1));
        assert_eq!(p.stages["b"].priority, -1);
        assert_eq!(
            p.stages["b"].library.as_deref(),
            Some(Path::new("placements/lib.so"))
        );
        assert_eq!(p.stages["c"].device, Device::Gpu(0));
        assert_eq!((p.stages["a"].tile, p.stages["b"].tile), (None, None));
        assert_eq!(p.runtime, RuntimeSettings::default());
        let tiled = parse("name: t\nstages:\n  a: {device: gpu, tile: 64}\n").unwrap();
        assert_eq!(tiled.stages["a"].tile, Some(64));
        let bare = Placement::parse(
            "name: t\nlibraries: {cpu: libk.so}\nstages: {a: cpu}\n",
            Path::new("p.yaml"),
        )
        .unwrap();
        assert_eq!(
            bare.libraries["cpu"],
            Path::new("./libk.so"),
            "never a bare name the loader would search for"
        );
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let e = parse("name: t\nstages:\n  a: {device: cpu, prio: 1}\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("placements/test.yaml") && e.contains("line 3") && e.contains("prio"),
            "{e}"
        );
        let e = parse("name: t\nstages:\n  a: tpu\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("placements/test.yaml:3") && e.contains("tpu"),
            "{e}"
        );
        let e = parse("name: t\nstages:\n  a: {device: gpu, tile: 0}\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("placements/test.yaml:3") && e.contains("stage a: tile must be at least 1"),
            "{e}"
        );
        let e = parse("name: t\nstages: {a: cpu}\nruntime: {slots: 0}\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("slots"), "{e}");
        let e = parse("name: t\nstages: {a: cpu}\nruntime: {workers: 2, pin_cores: [0]}\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("pin_cores"), "{e}");
    }
}

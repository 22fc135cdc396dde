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
use std::time::Duration;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use serde_saphyr::Spanned;

pub use alternatives::AlternativesError;
use entry::StageEntry;

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

/// A placement's word for a stage run on the CPU's workers by a kernel written in Python
/// (`stage: python`, with the module under `libraries: {python: ...}`), and that key.
pub const PYTHON: &str = "python";

/// Whether `path` names a Python module of kernels (a `.py` file), which the loader hands to
/// the Python host (`plugin`) rather than to the dynamic loader.
pub fn is_python_module(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "py")
}

/// A device's name that is none kplace knows.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown device {0:?} (expected cpu, gpu or gpu:N)")]
pub struct UnknownDevice(pub String);

impl FromStr for Device {
    type Err = UnknownDevice;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "cpu" => Ok(Device::Cpu),
            "gpu" | "cuda" => Ok(Device::Gpu(0)),
            _ => s
                .strip_prefix("gpu:")
                .or_else(|| s.strip_prefix("cuda:"))
                .and_then(|n| n.parse().ok())
                .map(Device::Gpu)
                .ok_or_else(|| UnknownDevice(s.to_string())),
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
    /// Placements to move the stream to when this one stops keeping up, in order of
    /// preference after it (`kplace run --budget`, docs/adapt.md): a name as written, to look
    /// up as `--placement` does, or a path made relative to this file's directory.
    pub alternatives: Vec<PathBuf>,
}

/// The most alternatives a placement may list (`alternatives:`, or `kplace run --adapt`):
/// each is planned whole (slots, pools, workers) for the whole run.
pub const MAX_ALTERNATIVES: usize = 7;

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
    /// Frames in flight, each with its own kernel states and its own buffers for the source,
    /// the sinks and whatever a GPU touches. With `slots: auto`,
    /// the count [`RuntimeSettings::size_slots`] chose for the stream ([`AUTO_SLOTS_MIN`]
    /// until it is called).
    pub slots: usize,
    /// `slots: auto`: how the slot count follows the stream; `None` for a fixed count.
    pub auto_slots: Option<AutoSlots>,
    /// Threads running CPU stages.
    pub workers: usize,
    /// Cores the workers are pinned to, one each, in order (empty: not pinned); the source and
    /// collector threads then keep to the other cores.
    pub pin_cores: Vec<usize>,
    /// How long an idle thread of the executor (a worker waiting for a task, the collector for
    /// a frame, a closed-loop source for a slot) spins before it sleeps: a hand-off within
    /// this time costs no wake-up, at the price of the core meanwhile. At most [`MAX_SPIN`].
    pub spin: Duration,
    /// Whether a slot's GPU work may be captured once as a graph and launched with one call
    /// per frame (`runtime.gpu_graphs`, on by default; see `plan::gpu_path`). Off: every GPU
    /// stage enqueues its own work on its own stream each frame, for a kernel library that
    /// enqueues outside the stream it is given, which a graph would run only once.
    pub gpu_graphs: bool,
}

/// The longest `runtime.spin_us` a placement may ask for.
pub const MAX_SPIN: Duration = Duration::from_millis(10);

impl Default for RuntimeSettings {
    fn default() -> Self {
        Self {
            slots: 4,
            auto_slots: None,
            workers: 1,
            pin_cores: Vec::new(),
            spin: Duration::ZERO,
            gpu_graphs: true,
        }
    }
}

/// The fewest slots `slots: auto` gives.
pub const AUTO_SLOTS_MIN: usize = 4;
/// The most slots `slots: auto` gives, whatever the stream: a bound on what a fast stream
/// can make the executor allocate (the memory is also checked before it is allocated).
pub const AUTO_SLOTS_MAX: usize = 64;
/// How much stream `slots: auto` buffers unless `slot_buffer_ms` says otherwise.
pub const DEFAULT_SLOT_BUFFER: Duration = Duration::from_millis(50);

/// `slots: auto`: enough slots to hold `buffer` of stream, so that a stall of the machine
/// that long shows as latency, not as dropped frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AutoSlots {
    /// The time of stream to buffer (`runtime.slot_buffer_ms`, default 50 ms).
    pub buffer: Duration,
    /// The stream's frame period the count was sized for, once [`RuntimeSettings::size_slots`]
    /// has been called.
    pub frame_period: Option<Duration>,
}

impl AutoSlots {
    /// `ceil(buffer / frame_period)` within [`AUTO_SLOTS_MIN`, `AUTO_SLOTS_MAX`].
    pub fn count(buffer: Duration, frame_period: Duration) -> usize {
        if frame_period.is_zero() {
            return AUTO_SLOTS_MAX;
        }
        let frames = (buffer.as_secs_f64() / frame_period.as_secs_f64()).ceil();
        (frames as usize).clamp(AUTO_SLOTS_MIN, AUTO_SLOTS_MAX)
    }
}

impl RuntimeSettings {
    /// With `slots: auto`, sizes the slots for a stream of one frame every `frame_period`;
    /// a fixed count is left as it is.
    pub fn size_slots(&mut self, frame_period: Duration) {
        if let Some(auto) = &mut self.auto_slots {
            auto.frame_period = Some(frame_period);
            self.slots = AutoSlots::count(auto.buffer, frame_period);
        }
    }

    /// How the slot count was chosen, in words: `8 slots (auto: 50 ms of stream at 6.4 ms a
    /// frame)`, or `4 slots`.
    pub fn describe_slots(&self) -> String {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        match self.auto_slots {
            None => format!("{} slots", self.slots),
            Some(AutoSlots {
                buffer,
                frame_period: Some(period),
            }) => format!(
                "{} slots (auto: {} ms of stream at {:.3} ms a frame, {AUTO_SLOTS_MIN} to {AUTO_SLOTS_MAX})",
                self.slots,
                ms(buffer),
                ms(period)
            ),
            Some(AutoSlots { buffer, .. }) => format!(
                "{} slots (auto, {} ms of stream; no stream period given, so the least)",
                self.slots,
                ms(buffer)
            ),
        }
    }
}

/// The most bytes a placement file may hold: far more than one placing thousands of stages
/// needs, and read whole before it is parsed.
pub const MAX_PLACEMENT_BYTES: u64 = 4 << 20;

/// Why a placement could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum PlacementError {
    /// The file could not be read, or holds more than [`MAX_PLACEMENT_BYTES`].
    #[error(transparent)]
    Read(#[from] crate::os::files::ReadBoundedError),
    /// The file is not a valid placement (the message has line and column).
    #[error("placement {}: {cause}", path.display())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The parser's error, with line, column and a snippet naming the file.
        cause: String,
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
    /// The `alternatives:` list is not one a run can switch between.
    #[error("placement {}:{line}: {why}", path.display())]
    Alternatives {
        /// The file.
        path: PathBuf,
        /// The list's line.
        line: u64,
        /// What is wrong with it.
        why: AlternativesError,
    },
}

impl Placement {
    /// Reads and checks a placement file.
    pub fn load(path: &Path) -> Result<Placement, PlacementError> {
        let text = crate::os::files::read_text_bounded(path, MAX_PLACEMENT_BYTES, "placement")?;
        Self::parse(&text, path)
    }

    /// Checks placement text; `path` names it in errors and anchors relative library paths.
    pub fn parse(text: &str, path: &Path) -> Result<Placement, PlacementError> {
        let file: PlacementFile =
            serde_saphyr::from_str(text).map_err(|source| PlacementError::Syntax {
                path: path.to_path_buf(),
                cause: super::yaml::syntax_error(&source, path, "a placement"),
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
        let libraries: BTreeMap<String, PathBuf> = file
            .libraries
            .into_iter()
            .map(|(kind, p)| {
                let line = Some(p.referenced.line());
                if kind != "cpu" && kind != "gpu" && kind != PYTHON {
                    return Err(invalid(
                        line,
                        format!(
                            "libraries: unknown device kind {kind} (expected cpu, gpu or python)"
                        ),
                    ));
                }
                let library = resolve_library(base, &p.value);
                if kind == PYTHON && !is_python_module(&library) {
                    return Err(invalid(
                        line,
                        format!(
                            "libraries: python names {}, which is not a Python module (a .py file)",
                            p.value
                        ),
                    ));
                }
                Ok((kind, library))
            })
            .collect::<Result<_, _>>()?;
        let stages = file
            .stages
            .into_iter()
            .map(|(name, entry)| {
                let line = entry.referenced.line();
                let stage = entry.value.resolve(&name, (path, line), base, &libraries);
                stage.map(|stage| (name, stage))
            })
            .collect::<Result<_, _>>()?;
        let runtime = file.runtime.unwrap_or_default();
        let line = None;
        if runtime.slots == SlotsEntry::Count(0) {
            return Err(invalid(
                line,
                "runtime.slots must be at least 1, or auto".into(),
            ));
        }
        let slot_buffer = match runtime.slot_buffer_ms {
            None => DEFAULT_SLOT_BUFFER,
            Some(ms) => match Duration::try_from_secs_f64(ms / 1e3) {
                Ok(d) if !d.is_zero() && d <= Duration::from_secs(10) => d,
                _ => {
                    return Err(invalid(
                        line,
                        format!(
                            "runtime.slot_buffer_ms must be above 0 and at most 10000, not {ms}"
                        ),
                    ));
                }
            },
        };
        if runtime.slot_buffer_ms.is_some() && runtime.slots != SlotsEntry::Auto {
            return Err(invalid(
                line,
                "runtime.slot_buffer_ms applies only to slots: auto".into(),
            ));
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
        let spin = Duration::from_micros(runtime.spin_us);
        if spin > MAX_SPIN {
            return Err(invalid(
                line,
                format!(
                    "runtime.spin_us must be at most {} (10 ms), not {}",
                    MAX_SPIN.as_micros(),
                    runtime.spin_us
                ),
            ));
        }
        let alternatives = match file.alternatives {
            None => Vec::new(),
            Some(list) => {
                alternatives::checked(base, path, &file.name, list.value).map_err(|why| {
                    PlacementError::Alternatives {
                        path: path.to_path_buf(),
                        line: list.referenced.line(),
                        why,
                    }
                })?
            }
        };
        Ok(Placement {
            alternatives,
            name: file.name,
            description: file.description,
            path: path.to_path_buf(),
            libraries,
            stages,
            runtime: RuntimeSettings {
                slots: match runtime.slots {
                    SlotsEntry::Count(n) => n,
                    SlotsEntry::Auto => AUTO_SLOTS_MIN,
                },
                auto_slots: (runtime.slots == SlotsEntry::Auto).then_some(AutoSlots {
                    buffer: slot_buffer,
                    frame_period: None,
                }),
                workers: runtime.workers,
                pin_cores: runtime.pin_cores,
                spin,
                gpu_graphs: runtime.gpu_graphs,
            },
        })
    }

    /// The files of [`alternatives`](Self::alternatives), in order: a name found as
    /// `--placement` finds one, beside the graph file `graph`; a path as it is.
    pub fn alternative_files(&self, graph: &Path) -> Result<Vec<PathBuf>, super::locate::NotFound> {
        (self.alternatives.iter())
            .map(|written| super::locate::placement(written, graph))
            .collect()
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

/// Environment variable naming a directory to search first for kplace's libraries.
pub const LIB_DIR_ENV: &str = "KPLACE_LIB_DIR";

/// Directories searched for kplace's libraries (the default ones, and a placement's library
/// named by a bare file name not found beside the placement): `$KPLACE_LIB_DIR` (when set and
/// not empty: an explicit choice wins), the installed `lib/kplace` beside the executable's
/// `bin/` ([`super::locate`]), the running executable's directory, and its parent (test and
/// example binaries live one level below the libraries).
pub fn library_search_dirs() -> Vec<PathBuf> {
    search_dirs(
        std::env::var_os(LIB_DIR_ENV),
        std::env::current_exe().ok().as_deref(),
    )
}

/// [`library_search_dirs`] for a given `$KPLACE_LIB_DIR` and executable. An empty variable is
/// unset: as a directory it would be the current one, and a bare `libkplace_cpu.so` found
/// there is looked up by the loader on the system path, not here.
fn search_dirs(lib_dir: Option<std::ffi::OsString>, exe: Option<&Path>) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(dir) = lib_dir.filter(|d| !d.is_empty()) {
        dirs.push(PathBuf::from(dir));
    }
    if let Some(exe) = exe
        && let Some(dir) = exe.parent()
    {
        if let Some(installed) = super::locate::installed_lib_dir(exe) {
            dirs.push(installed);
        }
        dirs.push(dir.to_path_buf());
        if let Some(parent) = dir.parent() {
            dirs.push(parent.to_path_buf());
        }
    }
    dirs
}

/// A library path as a placement writes it, made a file to load: relative to `base` (the
/// placement's directory); a bare file name not found there is looked up in
/// [`library_search_dirs`], where cargo puts the project's libraries, so a placement can name
/// a library it builds (`libraries: {cpu: libkplace_spectrogram.so}`) without knowing where.
/// Tools that take a library on their command line resolve it so too, from the current
/// directory (`kplace tune --cpu-library`).
pub fn resolve_library(base: &Path, written: &str) -> PathBuf {
    let beside = base.join(written);
    if beside.is_file() || Path::new(written).components().count() != 1 {
        return beside;
    }
    library_search_dirs()
        .into_iter()
        .map(|d| d.join(written))
        .find(|p| p.is_file())
        .unwrap_or(beside)
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
    #[serde(default)]
    alternatives: Option<Spanned<Vec<String>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuntimeFile {
    #[serde(default = "default_slots")]
    slots: SlotsEntry,
    #[serde(default)]
    slot_buffer_ms: Option<f64>,
    #[serde(default = "default_workers")]
    workers: usize,
    #[serde(default)]
    pin_cores: Vec<usize>,
    #[serde(default)]
    spin_us: u64,
    #[serde(default = "default_gpu_graphs")]
    gpu_graphs: bool,
}

/// `runtime.slots`: a count, or `auto`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SlotsEntry {
    Count(usize),
    Auto,
}

impl<'de> Deserialize<'de> for SlotsEntry {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SlotsVisitor;
        impl Visitor<'_> for SlotsVisitor {
            type Value = SlotsEntry;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number of slots or auto")
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<SlotsEntry, E> {
                usize::try_from(v)
                    .map(SlotsEntry::Count)
                    .map_err(|_| E::custom(format!("{v} slots do not fit this machine")))
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<SlotsEntry, E> {
                u64::try_from(v)
                    .map_err(|_| E::custom(format!("slots must be at least 1, not {v}")))
                    .and_then(|v| self.visit_u64(v))
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<SlotsEntry, E> {
                match v {
                    "auto" => Ok(SlotsEntry::Auto),
                    _ => Err(E::custom(format!(
                        "slots must be a number or auto, not {v:?}"
                    ))),
                }
            }
        }
        deserializer.deserialize_any(SlotsVisitor)
    }
}

fn default_slots() -> SlotsEntry {
    SlotsEntry::Count(RuntimeSettings::default().slots)
}

fn default_workers() -> usize {
    RuntimeSettings::default().workers
}

fn default_gpu_graphs() -> bool {
    RuntimeSettings::default().gpu_graphs
}

impl Default for RuntimeFile {
    fn default() -> Self {
        Self {
            slots: default_slots(),
            slot_buffer_ms: None,
            workers: default_workers(),
            pin_cores: Vec::new(),
            spin_us: 0,
            gpu_graphs: default_gpu_graphs(),
        }
    }
}

mod alternatives;
mod entry;
#[cfg(test)]
mod tests;

//! Calibration: what a placement's cost is built from, measured on this machine, and kept.
//!
//! [`measure`] runs the graph twice in this process on one worker and one slot, judged by
//! its workload as every run is: once with every stage the CPU library offers on the CPU
//! (each stage's kernel time per frame), once with every stage the GPU library offers on the
//! GPU, its stages timed with CUDA events (each stage's kernel time, and its launches' host
//! time). Around those: the bus's pinned copy rate each way ([`BusProbe`]), the time to write
//! a frame (the replay's work), the time to judge one (the collector's), and the runtime's
//! own fixed costs per frame, which are what each run measured beyond the sum of its parts
//! ([`Overheads`]). The UDP receiver's cost per frame is measured by the caller, which can
//! start processes ([`Calibration::receiver_ms`]).
//!
//! A calibration is stored as JSON keyed by what it depends on ([`CalibrationKey`]: the
//! machine, the devices, each kernel library's build, the graph and the frame shape, the
//! co-tenant) and reused ([`Store`]) until it is older than asked, or `--recalibrate`.
//!
//! Guarantees: a calibration run whose frames fail their check is an error, never a number;
//! every run's plan, buffers and kernel states are released before the next begins.

use std::fs;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use kplace::cuda::GpuProvider;
use kplace::cuda::bus::{BusProbe, CopyDirection};
use kplace::executor::CompletedFrame;
use kplace::model::graph::{Graph, StageId};
use kplace::model::placement::Placement;
use kplace::plan::layout::Layout;
use kplace::plan::{Plan, PlanMode};
use kplace::report::run::RunReport;
use kplace::workload::run::{Outputs, PipelineRun, run_pipeline};
use kplace::workload::{Judge, JudgeError, Verdict, Workload};

pub use super::costs::{
    Bus, Calibration, CalibrationKey, CalibrationRun, GpuStageCosts, LibraryBuild, Overheads,
    StageCosts,
};
use super::model::{self, Feed};
use super::space::{Candidate, Offers, Where};

/// The calibration file's schema.
pub const SCHEMA: &str = "kplace-calibration/1";

/// The most bytes of a kernel library fingerprinted: far more than any is.
pub const MAX_LIBRARY_BYTES: u64 = 4 << 30;

/// The most bytes a stored calibration is read for: far more than one holds (a few KiB).
pub const MAX_CALIBRATION_BYTES: u64 = 16 << 20;

impl LibraryBuild {
    /// Fingerprints the library at `path`, read a piece at a time (never held whole), at
    /// most [`MAX_LIBRARY_BYTES`] of it.
    pub fn of(path: &Path) -> Result<LibraryBuild, CalibrateError> {
        let io = |error| CalibrateError::Io {
            action: "read",
            path: path.to_path_buf(),
            error,
        };
        let file = fs::File::open(path).map_err(io)?;
        let mut reader = std::io::BufReader::with_capacity(
            1 << 16,
            std::io::Read::take(file, MAX_LIBRARY_BYTES + 1),
        );
        let (mut hasher, mut len) = (Fnv::default(), 0u64);
        loop {
            let piece = std::io::BufRead::fill_buf(&mut reader).map_err(io)?;
            if piece.is_empty() {
                break;
            }
            let n = piece.len();
            hasher.write(piece);
            std::io::BufRead::consume(&mut reader, n);
            len += n as u64;
        }
        if len > MAX_LIBRARY_BYTES {
            let why = format!(
                "more than {} GiB, more than a kernel library can be",
                MAX_LIBRARY_BYTES >> 30
            );
            return Err(io(std::io::Error::new(
                std::io::ErrorKind::FileTooLarge,
                why,
            )));
        }
        Ok(LibraryBuild {
            path: path.to_path_buf(),
            fingerprint: format!("{len}-{:016x}", hasher.finish()),
        })
    }
}

/// A stable 64-bit FNV-1a hash (a fingerprint, not a defence): the same on every run and
/// build, unlike the standard library's hasher.
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0 = bytes.iter().fold(self.0, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        });
    }
}

/// The FNV-1a hash of `bytes`.
fn fingerprint(bytes: &[u8]) -> u64 {
    let mut hasher = Fnv::default();
    hasher.write(bytes);
    hasher.finish()
}

/// A graph's identity for a key: its name and a fingerprint of its parsed form.
pub fn graph_identity(graph: &Graph) -> String {
    let mut hasher = Fnv::default();
    for stage in &graph.stages {
        (
            &stage.name,
            &stage.kernel,
            &stage.params,
            stage.split.map(|s| (s.axis, s.tile)),
        )
            .hash(&mut hasher);
    }
    for tensor in &graph.tensors {
        (&tensor.name, &tensor.shape, tensor.bytes).hash(&mut hasher);
    }
    format!("{}@{:016x}", graph.name, hasher.finish())
}

/// Why a calibration failed.
#[derive(Debug, thiserror::Error)]
pub enum CalibrateError {
    /// A file could not be written where it was asked for (see [`kplace::os::write`]).
    #[error(transparent)]
    Place(#[from] kplace::os::write::WriteError),
    /// A file could not be read or written.
    #[error("cannot {action} {}: {error}", path.display())]
    Io {
        /// What was attempted.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// Why, in the message.
        error: std::io::Error,
    },
    /// A stored calibration could not be read, or is larger than [`MAX_CALIBRATION_BYTES`].
    #[error(transparent)]
    Read(#[from] kplace::os::files::ReadBoundedError),
    /// A stage's kernel is offered on no device.
    #[error("stage {0}: no library offers its kernel, so it cannot be calibrated")]
    Unplaceable(String),
    /// A calibration placement did not plan.
    #[error("calibration placement {placement}: {cause}")]
    Plan {
        /// The placement's name.
        placement: String,
        /// The planner's error.
        cause: String,
    },
    /// A calibration run failed.
    #[error("calibration run on {placement}: {cause}")]
    Run {
        /// The placement's name.
        placement: String,
        /// Why.
        cause: String,
    },
    /// A calibration run's frames failed their check: its times are not a cost.
    #[error("calibration run on {placement} failed its check: {reasons}")]
    Failed {
        /// The placement's name.
        placement: String,
        /// The verdict's reasons.
        reasons: String,
    },
    /// The GPU could not be measured.
    #[error("GPU {gpu}: {cause}")]
    Gpu {
        /// Its ordinal.
        gpu: u32,
        /// The error.
        cause: String,
    },
    /// A stored calibration could not be read.
    #[error("calibration {}: {cause}", path.display())]
    Stored {
        /// The file.
        path: PathBuf,
        /// Why.
        cause: String,
    },
}

/// What [`measure`] calibrates, and with what.
pub struct Setup<'a> {
    /// The graph, its dimensions bound to the frame shape.
    pub graph: &'a Graph,
    /// The kernels each device's library offers.
    pub offers: &'a Offers,
    /// The placements' `libraries:` line (with its newline), naming both libraries.
    pub libraries: &'a str,
    /// The frames and their judge.
    pub workload: &'a dyn Workload,
    /// Where GPUs come from (the driver, or a simulation).
    pub gpus: &'a dyn GpuProvider,
    /// The GPU to calibrate; `None`: the CPU only.
    pub gpu: Option<u32>,
    /// About how long each timed run lasts, seconds.
    pub seconds: f64,
    /// The key the calibration is stored under.
    pub key: CalibrationKey,
}

/// The candidate with every stage on `preferred` where its library offers it, else on the
/// other device; one worker, one slot.
fn max_on(graph: &Graph, offers: &Offers, preferred: Where) -> Result<Candidate, CalibrateError> {
    let devices = graph
        .stages
        .iter()
        .map(|stage| {
            let cpu = offers.cpu.contains(&stage.kernel);
            let gpu = offers.gpu.contains(&stage.kernel);
            match (preferred, cpu, gpu) {
                (Where::Cpu, true, _) | (Where::Gpu, true, false) => Ok(Where::Cpu),
                (_, _, true) => Ok(Where::Gpu),
                _ => Err(CalibrateError::Unplaceable(stage.name.clone())),
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Candidate {
        devices,
        workers: 1,
        slots: 1,
        gpu_tile: None,
    })
}

/// A judge that times its inner judge's work on each frame.
struct TimedJudge {
    inner: Box<dyn Judge>,
    spent_ns: Arc<AtomicU64>,
}

impl Judge for TimedJudge {
    fn frame(&mut self, frame: &CompletedFrame<'_>) -> Result<(), JudgeError> {
        let started = Instant::now();
        let result = self.inner.frame(frame);
        self.spent_ns
            .fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        result
    }

    fn partial(&mut self, frame_id: u64) {
        self.inner.partial(frame_id);
    }

    fn finish(self: Box<Self>) -> Result<Verdict, JudgeError> {
        self.inner.finish()
    }
}

/// A workload whose judges are timed.
struct Timed<'a> {
    inner: &'a dyn Workload,
    spent_ns: Arc<AtomicU64>,
}

impl Workload for Timed<'_> {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn shape(&self) -> kplace::model::shape::FrameShape {
        self.inner.shape()
    }
    fn frame_bytes(&self) -> u64 {
        self.inner.frame_bytes()
    }
    fn frames(&self) -> Option<&Arc<[Vec<u8>]>> {
        self.inner.frames()
    }
    fn judge(
        &self,
        frames_expected: u64,
        results: Option<Box<dyn std::io::Write + Send>>,
    ) -> Result<Box<dyn Judge>, JudgeError> {
        Ok(Box::new(TimedJudge {
            inner: self.inner.judge(frames_expected, results)?,
            spent_ns: Arc::clone(&self.spent_ns),
        }))
    }
}

/// One closed-loop run of `candidate` in this process, replaying the workload's frames
/// (`frames` measured, after a warm-up), judged by its workload: the run's report and the
/// collector's time per frame, ms. A run whose frames fail their check is an error.
pub fn replay(
    setup: &Setup<'_>,
    candidate: &Candidate,
    name: &str,
    frames: u64,
    profile_gpu: bool,
) -> Result<(RunReport, f64), CalibrateError> {
    let text = candidate.placement_yaml(setup.graph, name, setup.gpu.unwrap_or(0), setup.libraries);
    let plan_error = |cause: String| CalibrateError::Plan {
        placement: name.to_string(),
        cause,
    };
    let placement =
        Placement::parse(&text, Path::new(name)).map_err(|e| plan_error(e.to_string()))?;
    let plan = Plan::with_gpus(setup.graph.clone(), placement, setup.gpus, PlanMode::Run)
        .map_err(|e| plan_error(e.to_string()))?;
    let timed = Timed {
        inner: setup.workload,
        spent_ns: Arc::new(AtomicU64::new(0)),
    };
    let warmup = (frames / 5).clamp(3, 50);
    let run = PipelineRun {
        frames: frames + warmup,
        warmup_frames: warmup,
        profile_gpu,
        ..PipelineRun::default()
    };
    let no_mps = || crate::mps::check_run(false, std::process::id(), None);
    let outcome = run_pipeline(&plan, &timed, &run, None, None, Outputs::default(), &no_mps)
        .map_err(|e| CalibrateError::Run {
            placement: name.to_string(),
            cause: e.to_string(),
        })?;
    if !outcome.passed {
        return Err(CalibrateError::Failed {
            placement: name.to_string(),
            reasons: outcome.report.verification.reasons.join("; "),
        });
    }
    let collector_ms =
        timed.spent_ns.load(Ordering::Relaxed) as f64 / 1e6 / outcome.report.frames.max(1) as f64;
    Ok((outcome.report, collector_ms))
}

/// Runs `candidate` long enough to last about `setup.seconds`, after a short probe.
fn timed_run(
    setup: &Setup<'_>,
    candidate: &Candidate,
    name: &str,
    profile_gpu: bool,
) -> Result<(RunReport, f64), CalibrateError> {
    let (probe, _) = replay(setup, candidate, name, 10, profile_gpu)?;
    let frames = (probe.frames_per_s * setup.seconds).clamp(30.0, 20_000.0) as u64;
    replay(setup, candidate, name, frames, profile_gpu)
}

/// The time to write one frame of `bytes` into a slot, as a replay does, ms.
fn frame_write_ms(bytes: usize) -> f64 {
    let source = vec![1u8; bytes];
    let mut slot = vec![0u8; bytes];
    let count = (64 << 20) / bytes.max(1);
    let count = count.clamp(8, 4096);
    let started = Instant::now();
    for _ in 0..count {
        slot.copy_from_slice(std::hint::black_box(&source));
        std::hint::black_box(&mut slot);
    }
    started.elapsed().as_secs_f64() * 1e3 / count as f64
}

/// What one run measured, for the record.
fn record(report: &RunReport, candidate: &Candidate, setup: &Setup<'_>) -> CalibrationRun {
    CalibrationRun {
        placement: candidate.placement_yaml(setup.graph, "calibration", setup.gpu.unwrap_or(0), ""),
        frames: report.measured_frames,
        rate: report.frames_per_s,
        post_frame_p50_ms: report.latency.post_frame.p50_ms,
        cores_used: report.cores_used,
    }
}

/// The overheads of a run of `candidate`: what it measured beyond the model's sum of parts.
fn overheads(
    setup: &Setup<'_>,
    calibration: &Calibration,
    candidate: &Candidate,
    report: &RunReport,
) -> Result<Overheads, CalibrateError> {
    let layout = layout_of(setup, candidate)?;
    let bare = Calibration {
        cpu_overheads: Overheads::default(),
        gpu_overheads: None,
        ..calibration.clone()
    };
    let parts =
        model::predict(&layout, candidate, &bare, Feed::Replay, f64::INFINITY).map_err(|e| {
            CalibrateError::Plan {
                placement: "calibration".into(),
                cause: e.to_string(),
            }
        })?;
    // On one slot the simulated cycle is the bare one plus both overheads.
    let latency_ms = (report.latency.post_frame.p50_ms - parts.latency_ms).max(0.0);
    let rate = report.frames_per_s.max(f64::MIN_POSITIVE);
    let cpu_ms_per_frame = report.cores_used / rate * 1e3;
    Ok(Overheads {
        latency_ms,
        slot_ms: (1e3 / rate - 1e3 / parts.rate - latency_ms).max(0.0),
        host_ms: (cpu_ms_per_frame - parts.host_ms).max(0.0),
    })
}

/// `candidate` laid out on `setup`'s graph.
fn layout_of(setup: &Setup<'_>, candidate: &Candidate) -> Result<Layout, CalibrateError> {
    let text = candidate.placement_yaml(setup.graph, "calibration", setup.gpu.unwrap_or(0), "");
    let placement = Placement::parse(&text, Path::new("calibration.yaml")).map_err(|e| {
        CalibrateError::Plan {
            placement: "calibration".into(),
            cause: e.to_string(),
        }
    })?;
    Layout::new(setup.graph.clone(), placement).map_err(|e| CalibrateError::Plan {
        placement: "calibration".into(),
        cause: e.to_string(),
    })
}

/// Measures `setup`'s calibration on this machine.
pub fn measure(setup: &Setup<'_>) -> Result<Calibration, CalibrateError> {
    let graph = setup.graph;
    let mut calibration = Calibration {
        schema: SCHEMA.to_string(),
        key: setup.key.clone(),
        measured_at_unix_s: now_unix_s(),
        stages: graph
            .stages
            .iter()
            .map(|s| StageCosts {
                name: s.name.clone(),
                cpu_ms: None,
                gpu: None,
                serial: false,
            })
            .collect(),
        source_ms: frame_write_ms(graph.tensor(graph.source.tensor).bytes as usize),
        collector_ms: 0.0,
        receiver_ms: None,
        sender_ms: None,
        cpu_overheads: Overheads::default(),
        gpu_overheads: None,
        bus: None,
        runs: Vec::new(),
    };
    if let Some(ordinal) = setup.gpu {
        calibration.bus = Some(measure_bus(setup, ordinal)?);
    }
    let cpu = max_on(graph, setup.offers, Where::Cpu)?;
    let gpu = setup
        .gpu
        .map(|_| max_on(graph, setup.offers, Where::Gpu))
        .transpose()?
        .filter(|c| c.devices.contains(&Where::Gpu));
    let mut runs = vec![(cpu, "tune-calibration-cpu")];
    if let Some(gpu) = gpu {
        runs.push((gpu, "tune-calibration-gpu"));
    }
    let mut reports = Vec::new();
    for (candidate, name) in &runs {
        let profile = candidate.devices.contains(&Where::Gpu);
        let (report, collector_ms) = timed_run(setup, candidate, name, profile)?;
        calibration.collector_ms = calibration.collector_ms.max(collector_ms);
        let layout = layout_of(setup, candidate)?;
        for (i, (entry, place)) in report.stages.iter().zip(&candidate.devices).enumerate() {
            let costs = &mut calibration.stages[i];
            match place {
                Where::Cpu => {
                    costs.cpu_ms = Some(entry.per_frame_ms);
                    costs.serial = entry.carry.is_some();
                }
                Where::Gpu => {
                    let copies = copy_ms(&layout, StageId(i), calibration.bus);
                    let device_ms = entry.gpu_ms_per_frame.unwrap_or(0.0);
                    let launches = graph.launches(StageId(i)).max(1) as f64;
                    costs.gpu = Some(GpuStageCosts {
                        // Copies are timed with the launches; a bus slower here than in the
                        // probe must not make a kernel free.
                        kernel_ms: (device_ms - copies).max(device_ms * 0.05),
                        host_ms_per_launch: entry.per_frame_ms / launches,
                    });
                }
            }
        }
        calibration.runs.push(record(&report, candidate, setup));
        reports.push(report);
    }
    for (index, ((candidate, _), report)) in runs.iter().zip(&reports).enumerate() {
        let fitted = overheads(setup, &calibration, candidate, report)?;
        if index == 0 {
            calibration.cpu_overheads = fitted;
        } else {
            calibration.gpu_overheads = Some(fitted);
        }
    }
    Ok(calibration)
}

/// The time stage `stage`'s copies take at the bus's rates, ms per frame.
fn copy_ms(layout: &Layout, stage: StageId, bus: Option<Bus>) -> f64 {
    let Some(bus) = bus else { return 0.0 };
    layout
        .edges
        .iter()
        .filter_map(|e| e.mirror)
        .filter(|m| m.transfer.stage == stage)
        .map(|m| bus.copy_ms(m.transfer.direction, m.transfer.bytes, m.transfer.pieces))
        .sum()
}

/// The bus's pinned copy rates on GPU `ordinal`, with copies the size of a frame.
fn measure_bus(setup: &Setup<'_>, ordinal: u32) -> Result<Bus, CalibrateError> {
    let fail = |e: kplace::cuda::GpuError| CalibrateError::Gpu {
        gpu: ordinal,
        cause: e.to_string(),
    };
    let gpu = setup.gpus.open(ordinal).map_err(fail)?;
    let bytes = setup
        .graph
        .tensors
        .iter()
        .map(|t| t.bytes as usize)
        .max()
        .unwrap_or(1);
    let probe = BusProbe::new(&gpu, bytes).map_err(fail)?;
    let seconds = (setup.seconds / 8.0).clamp(0.01, 0.25);
    // Two sizes, whole and an eighth, so that each direction's fixed cost per copy is
    // separated from its rate: t(b) = latency + b / rate.
    let fit = |direction| -> Result<(f64, f64), CalibrateError> {
        let small = (bytes / 8).max(1);
        let (big_rate, _) = probe.rate(direction, bytes, seconds).map_err(fail)?;
        let (small_rate, _) = probe.rate(direction, small, seconds).map_err(fail)?;
        let (t_big, t_small) = (bytes as f64 / big_rate, small as f64 / small_rate);
        let per_byte = ((t_big - t_small) / (bytes - small).max(1) as f64).max(1e-15);
        let latency_ms = ((t_big - per_byte * bytes as f64) * 1e3).max(0.0);
        Ok((1.0 / per_byte, latency_ms))
    };
    let (upload_bytes_per_s, upload_latency_ms) = fit(CopyDirection::Upload)?;
    let (download_bytes_per_s, download_latency_ms) = fit(CopyDirection::Download)?;
    Ok(Bus {
        upload_bytes_per_s,
        download_bytes_per_s,
        upload_latency_ms,
        download_latency_ms,
    })
}

fn now_unix_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Stored calibrations: one JSON file per key, in a directory.
#[derive(Clone, Debug)]
pub struct Store {
    dir: PathBuf,
}

/// Whether a stored calibration was used, and why not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// Stored, for this key, young enough.
    Reused,
    /// None stored for this key.
    Missing,
    /// Stored, but older than allowed.
    Stale {
        /// Its age, seconds.
        age_s: u64,
    },
    /// Asked to measure again.
    Forced,
}

impl Store {
    /// The store in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Store {
        Store { dir: dir.into() }
    }

    /// `$KPLACE_CALIBRATIONS`, else `$XDG_CACHE_HOME/kplace/calibrations`, else
    /// `~/.cache/kplace/calibrations`.
    pub fn default_dir() -> PathBuf {
        if let Some(dir) = std::env::var_os("KPLACE_CALIBRATIONS") {
            return dir.into();
        }
        let cache = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))
            .unwrap_or_else(std::env::temp_dir);
        cache.join("kplace").join("calibrations")
    }

    /// The file a key is stored in.
    pub fn path(&self, key: &CalibrationKey) -> PathBuf {
        let text = serde_json::to_string(key).unwrap_or_default();
        let name: String = key
            .graph
            .split('@')
            .next()
            .unwrap_or("graph")
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        self.dir.join(format!(
            "{name}-{}-{:016x}.json",
            key.shape,
            fingerprint(text.as_bytes())
        ))
    }

    /// The calibration stored for `key`, if there is one no older than `max_age_s`.
    pub fn load(
        &self,
        key: &CalibrationKey,
        max_age_s: u64,
    ) -> Result<(Option<Calibration>, Lookup), CalibrateError> {
        let path = self.path(key);
        let text =
            match kplace::os::files::read_text_bounded(&path, MAX_CALIBRATION_BYTES, "calibration")
            {
                Ok(text) => text,
                Err(e) if e.is_not_found() => return Ok((None, Lookup::Missing)),
                Err(e) => return Err(e.into()),
            };
        let stored: Calibration =
            serde_json::from_str(&text).map_err(|e| CalibrateError::Stored {
                path: path.clone(),
                cause: e.to_string(),
            })?;
        if stored.schema != SCHEMA || &stored.key != key {
            return Ok((None, Lookup::Missing));
        }
        let age_s = now_unix_s().saturating_sub(stored.measured_at_unix_s);
        if age_s > max_age_s {
            return Ok((None, Lookup::Stale { age_s }));
        }
        Ok((Some(stored), Lookup::Reused))
    }

    /// Stores `calibration` under its key, replacing any before it.
    pub fn save(&self, calibration: &Calibration) -> Result<PathBuf, CalibrateError> {
        let path = self.path(&calibration.key);
        let io = |action, source| CalibrateError::Io {
            action,
            path: path.clone(),
            error: source,
        };
        kplace::os::write::create_dir_all(&self.dir)?;
        let text = serde_json::to_string_pretty(calibration)
            .map_err(|e| io("write", std::io::Error::other(e)))?;
        kplace::os::write::write_whole(
            &path,
            kplace::os::write::Kind::File,
            (text + "\n").as_bytes(),
        )?;
        Ok(path)
    }
}

#[cfg(test)]
mod tests;

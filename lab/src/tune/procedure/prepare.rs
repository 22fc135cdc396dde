//! What one frame shape's tuning works on: the graph bound at the shape, its workload prepared
//! (the graph's own kind, or the recording kind on a recording), every placement of it on the
//! devices weighed, and what a calibration of it depends on.
//!
//! Guarantees: the workload is prepared with a placement of the graph that lays out (its
//! memory check reads one), written beside the shape's results; a graph with no placement
//! that lays out is refused with every reason the enumeration gave.

use std::path::Path;

use kplace::cuda::driver::CudaProvider;
use kplace::model::files::GraphFiles;
use kplace::model::graph::{Graph, GraphSource, Overrides};
use kplace::model::placement::Placement;
use kplace::workload::kind::{self, RecordingKind, RecordingRequest, WorkloadKind};

use super::devices::Devices;
use super::{TuneError, Tuner};
use crate::bisect::{BisectConfig, SearchShape};
use crate::tune::calibrate::{self, CalibrationKey, LibraryBuild, Setup as CalibrationSetup};
use crate::tune::space::{self, Enumeration};

/// Frames the workload is prepared with, replayed from memory.
const FRAMES: u64 = 64;

/// The graph at one shape, its workload and every placement of it on the devices weighed.
pub(super) struct Prepared<'a> {
    /// The devices and libraries weighed.
    pub(super) devices: &'a Devices,
    /// The graph, bound as the workload was prepared.
    pub(super) graph: Graph,
    /// The workload: its frames and its judge.
    pub(super) workload: Box<dyn kind::Prepared>,
    /// Every placement of the graph on the devices, with those refused and why.
    pub(super) space: Enumeration,
}

impl<'a> Prepared<'a> {
    /// Loads the graph and its workload at `shape`, and enumerates the space on the tuner's
    /// devices; `dir` receives the placement the workload is prepared with.
    pub(super) fn new(
        tuner: &'a Tuner<'_>,
        shape: &SearchShape,
        dir: &Path,
    ) -> Result<Prepared<'a>, TuneError> {
        let (config, knobs) = (tuner.config, &tuner.options.knobs);
        let (offers, libraries) = (&tuner.devices.offers, &tuner.devices.libraries);
        // Any placement of the graph prepares the workload (its memory check reads one).
        let probe = Graph::load(
            &config.graph,
            &Overrides {
                dims: config
                    .dims(shape)
                    .map_err(|e| TuneError::Shape(e.to_string()))?,
                params: Vec::new(),
            },
        )?;
        let probe_space = space::enumerate(&probe, offers, knobs);
        let first = probe_space
            .candidates
            .first()
            .ok_or_else(|| no_placement(config, &probe_space))?;
        let seed = dir.join("workload-placement.yaml");
        kplace::os::write::write_whole(
            &seed,
            kplace::os::write::Kind::File,
            first
                .placement_yaml(&probe, "tune-workload", knobs.gpu, libraries)
                .as_bytes(),
        )?;
        let workload = prepare_workload(config, shape, &seed)?;
        let (graph, _) = workload.load()?;
        let space = space::enumerate(&graph, offers, knobs);
        if space.candidates.is_empty() {
            return Err(no_placement(config, &space));
        }
        Ok(Prepared {
            devices: &tuner.devices,
            graph,
            workload,
            space,
        })
    }

    /// What a calibration of this graph and workload on the tuner's devices is measured with,
    /// keyed by what it depends on (alone: no co-tenant).
    pub(super) fn calibration_setup(
        &self,
        tuner: &Tuner<'_>,
    ) -> Result<CalibrationSetup<'_>, TuneError> {
        Ok(CalibrationSetup {
            graph: &self.graph,
            offers: &self.devices.offers,
            libraries: &self.devices.libraries,
            workload: self.workload.workload(),
            gpus: CudaProvider::global(),
            gpu: self.devices.gpu.is_ok().then_some(tuner.options.knobs.gpu),
            seconds: tuner.options.calibrate_s,
            key: self.key(tuner.config)?,
        })
    }

    /// What a calibration of this graph on these devices depends on.
    fn key(&self, config: &BisectConfig) -> Result<CalibrationKey, TuneError> {
        let mut builds = vec![LibraryBuild::of(&self.devices.cpu)?];
        if let Some(gpu) = self.devices.weighed_gpu_library() {
            builds.push(LibraryBuild::of(gpu)?);
        }
        Ok(CalibrationKey {
            machine: machine(),
            cores: cores(config),
            gpu: self.devices.gpu.as_ref().ok().cloned(),
            libraries: builds,
            graph: calibrate::graph_identity(&self.graph),
            shape: self.workload.workload().shape().to_string(),
            workload: self.workload.workload().describe(),
            cotenant: None,
        })
    }
}

/// The refusal of a graph none of whose placements in `space` lays out, with every reason.
fn no_placement(config: &BisectConfig, space: &Enumeration) -> TuneError {
    let why = space
        .rejected
        .iter()
        .map(|r| r.why.clone())
        .collect::<Vec<_>>()
        .join("; ");
    TuneError::NoPlacement {
        graph: config.graph.clone(),
        why,
    }
}

/// The sweep's workload at `shape`, prepared with the placement at `placement`: the graph's
/// own kind, or the recording's frames judged against their reference.
fn prepare_workload(
    config: &BisectConfig,
    shape: &SearchShape,
    placement: &Path,
) -> Result<Box<dyn kind::Prepared>, TuneError> {
    let files = GraphFiles {
        dims: config
            .dims(shape)
            .map_err(|e| TuneError::Shape(e.to_string()))?,
        ..GraphFiles::new(
            GraphSource::read(&config.graph)?,
            Placement::load(placement).map_err(|e| TuneError::Placement(Box::new(e)))?,
        )
    };
    let recording = config
        .recording
        .as_ref()
        .map(|feed| -> Result<RecordingRequest, TuneError> {
            Ok(RecordingRequest {
                path: feed.path.clone(),
                check: feed.check.parse().map_err(TuneError::Check)?,
            })
        })
        .transpose()?;
    let options = config.kind_options();
    let request = kind::Request {
        files: &files,
        options: &options,
        recording: recording.as_ref(),
        seed: config.seed,
        frames: FRAMES,
        pipelines: 1,
        replay: true,
    };
    let kind: &dyn WorkloadKind = match (&request.recording, &config.workload) {
        (Some(_), _) => &RecordingKind,
        (None, Some(kind)) => kind.as_ref(),
        (None, None) => return Err(TuneError::NoWorkload(config.graph.clone())),
    };
    options.check(kind).map_err(TuneError::WorkloadKind)?;
    Ok(kind.prepare(&request)?)
}

/// The machine, for a calibration's key and a placement's comment.
fn machine() -> String {
    let host = crate::bisect::output::proc_file("/proc/sys/kernel/hostname")
        .map_or_else(|| "unknown host".into(), |h| h.trim().to_string());
    let cpu = crate::bisect::output::cpu_model().unwrap_or_else(|| "unknown CPU".into());
    format!("{host}, {cpu}")
}

/// The cores the system under test may use: its CPU set's, else the machine's.
fn cores(config: &BisectConfig) -> usize {
    config
        .sut_cpus
        .as_ref()
        .map(|c| c.cpus().len())
        .or_else(|| std::thread::available_parallelism().map(|n| n.get()).ok())
        .unwrap_or(1)
}

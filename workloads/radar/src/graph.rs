//! The radar receiver as a graph: whether a graph file can run this workload's scene, and the
//! overrides, false-alarm probability and memory that follow from the scene.
//!
//! A graph is a radar receiver for a CPI when its source tensor is the scene's int16 I/Q frame
//! (`ci16 [M, N]`, chirp-major) and its first sink is a detection list
//! ([`check_graph_fits`]). Its shapes are written with the symbols `N` and `M`, which
//! [`cpi_overrides`] binds to the CPI. The CFAR stage is found by its kernel, never by its
//! name, so a renamed stage still takes `--pfa` ([`pfa_override`]) and still sets the
//! verifier's bound ([`graph_pfa`]).
//!
//! Guarantees: every check runs before anything CPI-sized is allocated; [`check_memory`]
//! refuses a run whose pools and prepared frames would not fit this machine.

use std::num::NonZeroU64;
use std::path::PathBuf;
use std::time::Duration;

use kplace::abi::Dtype;
use kplace::model::files::{FilesError, GraphFiles};
use kplace::model::graph::{Graph, GraphError, GraphSource, Overrides};
use kplace::model::placement::Placement;
use kplace::plan::PlanError;
use kplace::plan::memory::{self, BufferSpace, Demand, MemoryAvailable};

use crate::{Cpi, Scene, SceneError};

/// The kernel whose parameters define the false-alarm rate.
pub const CFAR_KERNEL: &str = "radar.cfar";
/// The false-alarm probability when the graph gives none.
pub use kplace_kernels::cfar::DEFAULT_PFA;

/// Why a graph cannot run the radar workload as asked.
#[derive(Debug, thiserror::Error)]
pub enum FitError {
    /// The graph file is unreadable or invalid.
    #[error(transparent)]
    Graph(#[from] GraphError),
    /// The files cannot be loaded with the run's overrides.
    #[error(transparent)]
    Files(#[from] FilesError),
    /// More prepared scene frames were asked for than the budget holds.
    #[error(
        "--scene-frames {asked}: {asked} prepared frames of CPI {cpi} ({} each) take {bytes} bytes, \
         more than the {} budget for prepared scene frames; at most {fit} for this CPI",
        kplace::plan::human_bytes(*frame_bytes),
        kplace::plan::human_bytes(SCENE_BUDGET_BYTES)
    )]
    SceneFrames {
        /// The count asked for.
        asked: u64,
        /// The CPI.
        cpi: Cpi,
        /// Bytes of one prepared frame.
        frame_bytes: u64,
        /// Bytes of them all.
        bytes: u128,
        /// The most that fit.
        fit: u64,
    },
    /// The graph lacks a dimension the radar binds to its CPI, or its value is too large.
    #[error(
        "graph {}: the radar workload binds its CPI to dimensions N (samples) and M (chirps); {missing} is missing or does not fit a u32",
        graph.display()
    )]
    Dimensions {
        /// The graph file.
        graph: PathBuf,
        /// The dimension.
        missing: String,
    },
    /// The graph cannot be laid out on the placement.
    #[error(transparent)]
    Plan(Box<PlanError>),
    /// A false-alarm probability outside (0, [`MAX_PFA`]].
    #[error(
        "{option} must be in (0, {MAX_PFA}], got {pfa}: above {MAX_PFA} noise detections are no longer sparse, and the false-alarm bound (1 + 2 x pfa x cells per frame) would pass a detector that reports most cells"
    )]
    PfaOutOfRange {
        /// The option or field that gave it, e.g. `--pfa`.
        option: String,
        /// The value given.
        pfa: f64,
    },
    /// The CFAR stage's `pfa` parameter is not a number.
    #[error("graph {}: stage {stage} has pfa {value:?}, not a number", graph.display())]
    PfaNotANumber {
        /// The graph file.
        graph: PathBuf,
        /// The CFAR stage's name.
        stage: String,
        /// The parameter's text.
        value: String,
    },
    /// A false-alarm probability was given for a graph without a CFAR stage.
    #[error("--pfa: graph {} has no {CFAR_KERNEL} stage", graph.display())]
    NoCfarStage {
        /// The graph file.
        graph: PathBuf,
    },
    /// The graph's source tensor is not the scene's frame.
    #[error(
        "CPI {cpi} does not match graph {}: its source tensor {tensor} is {found}, the scene needs ci16{want:?} \
         (write shapes with the symbols N and M so that --cpi sets them)",
        graph.display()
    )]
    SourceMismatch {
        /// The CPI asked for.
        cpi: Cpi,
        /// The graph file.
        graph: PathBuf,
        /// The source tensor's name.
        tensor: String,
        /// Its type and shape, e.g. `ci16[128, 1024]`.
        found: String,
        /// The shape the scene needs, `[M, N]`.
        want: [u64; 2],
    },
    /// The graph's first sink is not a detection list.
    #[error(
        "graph {}: its first sink {tensor} is {dtype}, but the radar application reads a detections list",
        graph.display()
    )]
    SinkNotDetections {
        /// The graph file.
        graph: PathBuf,
        /// The sink tensor's name.
        tensor: String,
        /// Its type.
        dtype: String,
    },
    /// The run's memory would not fit this machine, or its size overflows.
    #[error("CPI {cpi} cannot run here")]
    Memory {
        /// The CPI asked for.
        cpi: Cpi,
        /// What does not fit.
        #[source]
        source: Box<PlanError>,
    },
    /// A scene frame could not be generated.
    #[error("scene frame {frame}")]
    Scene {
        /// The frame.
        frame: u64,
        /// Why.
        #[source]
        source: SceneError,
    },
}

/// The false-alarm probability the graph's CFAR stage uses: its `pfa`, or the default when it
/// gives a raw `scale` or nothing.
pub fn graph_pfa(graph: &Graph) -> Result<f64, FitError> {
    let Some(stage) = graph.stages.iter().find(|s| s.kernel == CFAR_KERNEL) else {
        return Ok(DEFAULT_PFA);
    };
    match stage.params.iter().find(|(n, _)| n == "pfa") {
        Some((_, v)) => v.trim().parse().map_err(|_| FitError::PfaNotANumber {
            graph: graph.path.clone(),
            stage: stage.name.clone(),
            value: v.clone(),
        }),
        None => Ok(DEFAULT_PFA),
    }
}

/// The largest false-alarm probability a run or a verification accepts: the verifier's bound
/// on false alarms assumes noise detections are sparse, and a bound of more than 2% of the
/// cells no longer tells a detector from one that reports every cell.
pub const MAX_PFA: f64 = 0.01;

/// Fails unless `pfa` is a probability in (0, [`MAX_PFA`]]; `option` (e.g. `--pfa`) names it
/// in the error.
pub fn check_pfa(pfa: f64, option: &str) -> Result<(), FitError> {
    if !(pfa > 0.0 && pfa <= MAX_PFA) {
        return Err(FitError::PfaOutOfRange {
            option: option.to_string(),
            pfa,
        });
    }
    Ok(())
}

/// The `--pfa` override as a parameter override `(stage, "pfa", value)` on the CFAR stage of
/// `graph`; none without a `pfa`.
pub fn pfa_override(
    graph: &GraphSource,
    pfa: Option<f64>,
) -> Result<Vec<(String, String, String)>, FitError> {
    let Some(pfa) = pfa else {
        return Ok(Vec::new());
    };
    check_pfa(pfa, "--pfa")?;
    let probe = graph.bind(&Overrides::default())?;
    let stage = probe
        .stages
        .iter()
        .find(|s| s.kernel == CFAR_KERNEL)
        .ok_or_else(|| FitError::NoCfarStage {
            graph: graph.path().to_path_buf(),
        })?;
    Ok(vec![(stage.name.clone(), "pfa".into(), pfa.to_string())])
}

/// Overrides binding the graph's `N` and `M` to `cpi`, with `params` (stage, name, value).
pub fn cpi_overrides(cpi: Cpi, params: Vec<(String, String, String)>) -> Overrides {
    Overrides {
        dims: vec![
            ("N".into(), cpi.samples as u64),
            ("M".into(), cpi.chirps as u64),
        ],
        params,
    }
}

/// Loads `files` with `cpi` bound to the graph's `N` and `M` and the parameter overrides (then
/// `extra_params`), and the placement with its slots sized for the stream (by default one CPI
/// per the CPI's real-time period) and the executor overrides applied.
pub fn load_files(
    files: &GraphFiles,
    cpi: Cpi,
    extra_params: &[(String, String, String)],
) -> Result<(Graph, Placement), FitError> {
    let overrides = cpi_overrides(cpi, extra_params.to_vec());
    Ok(files.load_with(overrides, Duration::from_secs_f64(cpi.period_s()))?)
}

/// The most memory the prepared scene frames of a run may take.
pub const SCENE_BUDGET_BYTES: u64 = 256 << 20;
/// The most distinct scene frames prepared by default.
pub const DEFAULT_SCENE_FRAMES: u64 = 64;

/// Distinct scene frames to prepare for a run of `frames` frames of `cpi`: `asked` when given,
/// else up to [`DEFAULT_SCENE_FRAMES`] within [`SCENE_BUDGET_BYTES`]. Every prepared frame is
/// held in memory, so a count whose frames exceed the budget is refused, naming the most this
/// CPI allows; one frame is always allowed, however large.
pub fn scene_frames(
    cpi: Cpi,
    asked: Option<NonZeroU64>,
    frames: u64,
) -> Result<NonZeroU64, FitError> {
    let frame_bytes = (cpi.cells() as u64).saturating_mul(4).max(1);
    let fit = (SCENE_BUDGET_BYTES / frame_bytes).max(1);
    if let Some(n) = asked {
        if n.get() > fit {
            return Err(FitError::SceneFrames {
                asked: n.get(),
                cpi,
                frame_bytes,
                bytes: u128::from(n.get()) * u128::from(frame_bytes),
                fit,
            });
        }
        return Ok(n);
    }
    Ok(NonZeroU64::new(frames.min(DEFAULT_SCENE_FRAMES).min(fit)).unwrap_or(NonZeroU64::MIN))
}

/// Fails unless the graph's source tensor is the scene's int16 I/Q frame, chirp-major, and
/// its first sink is a detection list.
pub fn check_graph_fits(graph: &Graph, cpi: Cpi) -> Result<(), FitError> {
    let source = graph.tensor(graph.source.tensor);
    let want = [cpi.chirps as u64, cpi.samples as u64];
    if source.dtype != Dtype::CI16 || source.shape != want {
        return Err(FitError::SourceMismatch {
            cpi,
            graph: graph.path.clone(),
            tensor: source.name.clone(),
            found: format!("{}{:?}", source.dtype.name().unwrap_or("?"), source.shape),
            want,
        });
    }
    let sink = graph.tensor(graph.sinks[0]);
    if sink.dtype != Dtype::RECORDS {
        return Err(FitError::SinkNotDetections {
            graph: graph.path.clone(),
            tensor: sink.name.clone(),
            dtype: sink.dtype.name().unwrap_or("?").to_string(),
        });
    }
    Ok(())
}

/// Refuses a run whose memory would not fit this machine, before anything CPI-sized is
/// allocated: `copies` times the pools of `graph`'s tensors on `placement` (one set per
/// pipeline) and `prepared` scene frames of `cpi`, against the host's available memory (and a
/// GPU's, where known). The kernels' workspaces are checked when each pipeline is planned.
pub fn check_memory(
    graph: &Graph,
    placement: &Placement,
    cpi: Cpi,
    copies: u64,
    prepared: u64,
) -> Result<(), FitError> {
    let pools = kplace::plan::tensor_pools_for(graph, placement)
        .map_err(|e| FitError::Plan(Box::new(e)))?;
    let mut demands: Vec<Demand> = pools
        .iter()
        .map(|p| {
            let mut d = Demand::of_pool(p);
            d.blocks = d.blocks.saturating_mul(copies);
            d
        })
        .collect();
    if prepared > 0 {
        demands.push(scene_frames_demand(cpi, prepared));
    }
    check_demands(&demands, cpi)
}

/// Refuses `count` prepared scene frames of `cpi` that would not fit in the host's available
/// memory: what `kplace send` holds.
pub fn check_prepared_frames(cpi: Cpi, count: u64) -> Result<(), FitError> {
    check_demands(&[scene_frames_demand(cpi, count)], cpi)
}

/// What `count` prepared scene frames of `cpi` take.
fn scene_frames_demand(cpi: Cpi, count: u64) -> Demand {
    Demand {
        name: "the prepared scene frames".into(),
        space: BufferSpace::Host,
        block_bytes: (cpi.cells() as u64).saturating_mul(4),
        blocks: count,
    }
}

fn check_demands(demands: &[Demand], cpi: Cpi) -> Result<(), FitError> {
    memory::check_fits(demands, &MemoryAvailable::probe())
        .map(drop)
        .map_err(|source| FitError::Memory {
            cpi,
            source: Box::new(source),
        })
}

/// Generates `count` scene frames as the source tensor's bytes (little-endian I, Q pairs).
/// Callers check first that they fit ([`check_memory`], [`check_prepared_frames`]).
pub fn prepare_frames(scene: &Scene, count: u64) -> Result<Vec<Vec<u8>>, FitError> {
    (0..count)
        .map(|frame| {
            scene
                .frame_bytes(frame)
                .map_err(|source| FitError::Scene { frame, source })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SceneConfig;

    fn radar_yaml() -> PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("graph.yaml")
    }

    fn cpi(samples: usize, chirps: usize) -> Cpi {
        Cpi { samples, chirps }
    }

    /// The radar graph with its CFAR stage renamed and `pfa_line` in its parameters.
    fn graph_with(pfa_param: Option<&str>) -> Graph {
        let text = std::fs::read_to_string(radar_yaml()).unwrap();
        let graph =
            Graph::parse(&text, &radar_yaml(), &cpi_overrides(cpi(1024, 128), vec![])).unwrap();
        let mut graph = graph;
        let stage = graph
            .stages
            .iter_mut()
            .find(|s| s.kernel == CFAR_KERNEL)
            .unwrap();
        stage.name = "detector".into();
        stage.params.retain(|(n, _)| n != "pfa");
        if let Some(v) = pfa_param {
            stage.params.push(("pfa".into(), v.into()));
        }
        graph
    }

    #[test]
    fn the_cfar_stage_is_found_by_kernel_and_its_pfa_read_strictly() {
        assert_eq!(graph_pfa(&graph_with(None)).unwrap(), DEFAULT_PFA);
        assert_eq!(graph_pfa(&graph_with(Some(" 1e-4 "))).unwrap(), 1e-4);
        let err = graph_pfa(&graph_with(Some("often")))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("stage detector has pfa \"often\", not a number"),
            "{err}"
        );
        assert!(err.contains("radar/graph.yaml"), "{err}");
    }

    #[test]
    fn a_pfa_override_lands_on_the_cfar_stage_and_only_in_range() {
        let radar = GraphSource::read(&radar_yaml()).unwrap();
        assert!(pfa_override(&radar, None).unwrap().is_empty());
        let set = pfa_override(&radar, Some(1e-3)).unwrap();
        let graph =
            Graph::load(&radar_yaml(), &cpi_overrides(cpi(1024, 128), set.clone())).unwrap();
        assert_eq!(graph_pfa(&graph).unwrap(), 1e-3);
        assert_eq!(set.len(), 1);
        for bad in [0.0, 1.0, 0.0101, -0.5, f64::NAN] {
            let err = pfa_override(&radar, Some(bad)).unwrap_err().to_string();
            assert!(err.starts_with("--pfa must be in (0, 0.01], got"), "{err}");
        }
        let dir = tempfile::tempdir().unwrap();
        let no_cfar = dir.path().join("g.yaml");
        std::fs::write(
            &no_cfar,
            "name: g\ndims: {N: 8, M: 4}\nsource: {tensor: iq, packet_axis: 0}\n\
             tensors:\n  - {name: iq, dtype: ci16, shape: [M, N]}\n  - {name: x, dtype: cf32, shape: [N, M]}\n\
             stages:\n  - {name: r, kernel: radar.range_fft, inputs: [iq], outputs: [x]}\nsinks: [x]\n",
        )
        .unwrap();
        let no_cfar = GraphSource::read(&no_cfar).unwrap();
        let err = pfa_override(&no_cfar, Some(1e-3)).unwrap_err().to_string();
        assert!(err.contains("has no radar.cfar stage"), "{err}");
        assert!(err.contains("g.yaml"), "{err}");
    }

    #[test]
    fn a_graph_fits_only_the_cpi_its_shapes_were_bound_to() {
        let graph = Graph::load(&radar_yaml(), &cpi_overrides(cpi(1024, 128), vec![])).unwrap();
        check_graph_fits(&graph, cpi(1024, 128)).unwrap();
        let err = check_graph_fits(&graph, cpi(2048, 256))
            .unwrap_err()
            .to_string();
        assert!(err.contains("CPI 2048x256 does not match graph"), "{err}");
        assert!(err.contains("ci16[128, 1024]"), "{err}");
        assert!(err.contains("ci16[256, 2048]"), "{err}");
    }

    #[test]
    fn prepared_frames_are_the_scenes_frames() {
        let scene = Scene::new(SceneConfig::new(cpi(256, 16))).unwrap();
        let frames = prepare_frames(&scene, 3).unwrap();
        assert_eq!(frames.len(), 3);
        for (i, f) in frames.iter().enumerate() {
            assert_eq!(f, &scene.frame_bytes(i as u64).unwrap());
            assert_eq!(f.len(), 256 * 16 * 4);
        }
        assert_ne!(frames[0], frames[1]);
        check_prepared_frames(cpi(256, 16), 3).unwrap();
        let err = check_prepared_frames(cpi(1 << 15, 1 << 15), u64::MAX / 2).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("CPI 32768x32768 cannot run here"),
            "{err}"
        );
    }
    #[test]
    fn scene_frames_stay_within_the_budget() {
        let small = cpi(1024, 128);
        assert_eq!(scene_frames(small, None, 10).unwrap().get(), 10);
        assert_eq!(
            scene_frames(small, None, 1000).unwrap().get(),
            DEFAULT_SCENE_FRAMES
        );
        assert_eq!(scene_frames(small, None, 0).unwrap().get(), 1);
        // 8192 x 2048 frames are 64 MiB: four fit in the budget.
        let big = cpi(8192, 2048);
        assert_eq!(scene_frames(big, None, 100).unwrap().get(), 4);
        let asked = NonZeroU64::new(5);
        let e = scene_frames(big, asked, 100).unwrap_err().to_string();
        assert!(
            e.starts_with("--scene-frames 5: ") && e.ends_with("at most 4 for this CPI"),
            "{e}"
        );
        assert_eq!(scene_frames(big, NonZeroU64::new(4), 100).unwrap().get(), 4);
    }

    #[test]
    fn the_files_overrides_reach_the_placement() {
        let files = GraphFiles {
            slots: Some(3),
            workers: Some(2),
            ..GraphFiles::read(
                &radar_yaml(),
                &radar_yaml().with_file_name("placements/all-cpu.yaml"),
            )
            .unwrap()
        };
        let (graph, placement) = load_files(&files, cpi(256, 32), &[]).unwrap();
        assert!(!graph.stages.is_empty());
        assert_eq!((placement.runtime.slots, placement.runtime.workers), (3, 2));
        assert_eq!(placement.runtime.auto_slots, None);
        for (files, option) in [
            (
                GraphFiles {
                    slots: Some(0),
                    ..files.clone()
                },
                "--slots",
            ),
            (
                GraphFiles {
                    workers: Some(0),
                    ..files.clone()
                },
                "--workers",
            ),
            (
                GraphFiles {
                    stream_rate: Some(-1.0),
                    ..files.clone()
                },
                "--stream-rate",
            ),
        ] {
            let e = load_files(&files, cpi(256, 32), &[])
                .unwrap_err()
                .to_string();
            assert!(e.starts_with(option), "{e}");
        }
    }
}

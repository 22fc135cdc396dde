//! The radar workload's frames and judge, prepared once for every pipeline of a run.
//!
//! [`Setup`] is what every pipeline of a run shares: the graph checked against the CPI, the
//! false-alarm probability, the scene and, for a replay, its frames. It is the radar's
//! [`Workload`]: what feeds the source and what judges the frames (a [`RadarJudge`] per
//! pipeline); [`crate::kind`] prepares it from a run's request, and the runtime's
//! [`kplace::workload::run::run_pipeline`] runs each pipeline on it.
//!
//! Guarantees: every check (the graph fits the scene, the pools and prepared frames fit this
//! machine) runs before anything CPI-sized is allocated.

use std::io::Write;
use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::Instant;

use kplace::model::files::GraphFiles;
use kplace::workload::{Judge, JudgeError, Workload};

use crate::graph::{self, FitError};
use crate::{
    Cpi, DetectionWriter, RadarJudge, Scene, SceneConfig, SceneError, Verifier, VerifyConfig,
};

/// What the radar workload is prepared for.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// The graph and placement, and their overrides.
    pub files: GraphFiles,
    /// The scene whose frames are sent and whose truth judges them; its CPI binds the graph.
    pub scene: SceneConfig,
    /// Distinct scene frames: frame `i` shows scene frame `i mod` this ([`graph::scene_frames`]).
    pub scene_frames: NonZeroU64,
    /// The CFAR false-alarm probability, instead of the graph's (it also sets the verifier's
    /// bound).
    pub pfa: Option<f64>,
    /// Independent pipelines, each with its own pools (the memory check counts them all); 0
    /// for a run that plans none (a sender), which needs no placement.
    pub pipelines: u64,
    /// Whether the frames are replayed from memory (prepared now) rather than received.
    pub replay: bool,
}

impl RunConfig {
    /// A replay of `scene` on `files` for a caller that runs the plans itself (`kplace tune`,
    /// benchmarks): up to 64 distinct scene frames prepared, one pipeline, nothing else asked.
    pub fn replay_of(files: GraphFiles, scene: SceneConfig) -> Result<RunConfig, FitError> {
        Ok(RunConfig {
            files,
            scene_frames: graph::scene_frames(scene.cpi, None, 64)?,
            scene,
            pfa: None,
            pipelines: 1,
            replay: true,
        })
    }
}

/// Why a radar run could not run.
#[derive(Debug, thiserror::Error)]
pub enum RadarRunError {
    /// The graph, placement or scene cannot run as asked.
    #[error(transparent)]
    Fit(#[from] FitError),
    /// The scene is invalid.
    #[error("invalid scene: {0}")]
    Scene(#[from] SceneError),
}

/// What every pipeline of a run shares: the CPI, the false-alarm probability, the scene and
/// its prepared frames (for a replay).
pub struct Setup {
    cpi: Cpi,
    pfa_set: Vec<(String, String, String)>,
    pfa: f64,
    scene: Scene,
    scene_frames: NonZeroU64,
    prepared: Option<Arc<[Vec<u8>]>>,
}

impl Setup {
    /// Checks the graph against the CPI, the run's memory against this machine, and prepares
    /// the scene (and, for a replay, its frames).
    pub fn new(config: &RunConfig) -> Result<Setup, RadarRunError> {
        let cpi = config.scene.cpi;
        let pfa_set = graph::pfa_override(&config.files.graph, config.pfa)?;
        let period = config.scene_frames.get();
        let prepared_frames = if config.replay { period } else { 0 };
        let graph = if config.pipelines == 0 {
            // Nothing is planned (a sender): the placement is not needed, only the frames.
            let mut overrides = graph::cpi_overrides(cpi, config.files.sets.clone());
            overrides
                .dims
                .splice(0..0, config.files.dims.iter().cloned());
            overrides.params.extend(pfa_set.iter().cloned());
            let graph = config
                .files
                .graph
                .bind(&overrides)
                .map_err(FitError::from)?;
            graph::check_graph_fits(&graph, cpi)?;
            graph::check_prepared_frames(cpi, prepared_frames)?;
            graph
        } else {
            let (graph, placement) = graph::load_files(&config.files, cpi, &pfa_set)?;
            graph::check_graph_fits(&graph, cpi)?;
            graph::check_memory(&graph, &placement, cpi, config.pipelines, prepared_frames)?;
            graph
        };
        let pfa = graph::graph_pfa(&graph)?;
        let scene = Scene::new(config.scene.clone())?;
        let prepared = if config.replay {
            let prepared_at = Instant::now();
            let frames = graph::prepare_frames(&scene, period)?;
            tracing::info!(
                "radar: {period} distinct scene frames prepared in {:.2} s",
                prepared_at.elapsed().as_secs_f64()
            );
            Some(Arc::from(frames))
        } else {
            None
        };
        Ok(Setup {
            cpi,
            pfa_set,
            pfa,
            scene,
            scene_frames: config.scene_frames,
            prepared,
        })
    }

    /// The CPI every pipeline runs.
    pub fn cpi(&self) -> Cpi {
        self.cpi
    }

    /// The parameter overrides that set the run's false-alarm probability on the CFAR stage.
    pub fn pfa_set(&self) -> &[(String, String, String)] {
        &self.pfa_set
    }
}

impl Workload for Setup {
    fn describe(&self) -> String {
        format!("the scene in memory, seed {}", self.scene.config().seed)
    }

    fn shape(&self) -> kplace::model::shape::FrameShape {
        self.cpi.frame_shape()
    }

    fn frame_bytes(&self) -> u64 {
        (self.cpi.cells() as u64).saturating_mul(4)
    }

    fn frames(&self) -> Option<&Arc<[Vec<u8>]>> {
        self.prepared.as_ref()
    }

    fn real_time_period(&self) -> Option<std::time::Duration> {
        Some(std::time::Duration::from_secs_f64(self.cpi.period_s()))
    }

    fn judge(
        &self,
        frames_expected: u64,
        results: Option<Box<dyn Write + Send>>,
    ) -> Result<Box<dyn Judge>, JudgeError> {
        let writer =
            match results {
                Some(out) => Some(DetectionWriter::new(out, self.cpi).map_err(|error| {
                    JudgeError::Write {
                        frame: None,
                        what: "the detections file",
                        error,
                    }
                })?),
                None => None,
            };
        let verifier = Verifier::new(
            self.scene.clone(),
            VerifyConfig::for_cpi(self.cpi, self.pfa),
            frames_expected,
        )
        .with_template_period(self.scene_frames);
        Ok(Box::new(RadarJudge::new(verifier, frames_expected, writer)))
    }
}

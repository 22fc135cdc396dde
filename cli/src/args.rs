//! Options shared by several subcommands: the graph and placement, and the scene.

use std::num::NonZeroU64;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use kplace::model::files::GraphFiles;
use kplace::model::graph::Graph;
use kplace::model::placement::Placement;
use kplace_radar::scene::{default_targets, high_snr_targets};
use kplace_radar::{Cpi, Scene, SceneConfig, Target};

/// Which graph, on which placement, with which overrides.
#[derive(Debug, Args)]
pub struct GraphArgs {
    /// The graph file.
    #[arg(long, default_value = "graphs/radar.yaml")]
    pub graph: PathBuf,
    /// The placement file.
    #[arg(long, default_value = "placements/all-cpu.yaml")]
    pub placement: PathBuf,
    /// Override a stage parameter: STAGE.PARAM=VALUE (repeatable).
    #[arg(long = "set", value_name = "STAGE.PARAM=VALUE", value_parser = parse_set)]
    pub sets: Vec<(String, String, String)>,
    /// Frame slots in flight (overrides the placement's runtime.slots).
    #[arg(long)]
    pub slots: Option<usize>,
    /// The stream's rate in CPI/s, which sizes a placement's `slots: auto` (enough slots for
    /// its buffer of stream) [default: the real-time rate, one CPI per physical CPI duration].
    #[arg(long, value_name = "CPI_PER_S")]
    pub stream_rate: Option<f64>,
    /// CPU worker threads (overrides the placement's runtime.workers).
    #[arg(long)]
    pub workers: Option<usize>,
}

fn parse_set(text: &str) -> Result<(String, String, String), String> {
    let (key, value) = text.split_once('=').ok_or("expected STAGE.PARAM=VALUE")?;
    let (stage, param) = key.split_once('.').ok_or("expected STAGE.PARAM=VALUE")?;
    if stage.is_empty() || param.is_empty() {
        return Err("expected STAGE.PARAM=VALUE".into());
    }
    Ok((stage.to_string(), param.to_string(), value.to_string()))
}

impl GraphArgs {
    /// The files and overrides these options name.
    pub fn files(&self) -> GraphFiles {
        GraphFiles {
            graph: self.graph.clone(),
            placement: self.placement.clone(),
            sets: self.sets.clone(),
            slots: self.slots,
            stream_rate: self.stream_rate,
            workers: self.workers,
        }
    }

    /// Loads the graph with `cpi` bound to its `N` and `M` and the parameter overrides, and the
    /// placement with the executor overrides.
    pub fn load(&self, cpi: Cpi) -> anyhow::Result<(Graph, Placement)> {
        Ok(kplace_radar::graph::load_files(&self.files(), cpi, &[])?)
    }
}

/// The scene: CPI, targets, seed, and how many distinct frames to prepare.
#[derive(Debug, Args)]
pub struct SceneArgs {
    /// CPI size: SAMPLESxCHIRPS (N x M).
    #[arg(long, default_value = "1024x128")]
    pub cpi: Cpi,
    /// Noise seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// A target: RANGE_M,VELOCITY_MPS,SNR_DB (repeatable; default: docs/workload.md's three at 6 dB).
    #[arg(
        long = "target",
        value_name = "RANGE,VELOCITY,SNR",
        allow_hyphen_values = true
    )]
    pub targets: Vec<Target>,
    /// Use the high-SNR target set: the default targets at 25 dB.
    #[arg(long, conflicts_with = "targets")]
    pub high_snr: bool,
    /// Distinct scene frames; frame i shows scene frame i mod this (default: up to 64, within
    /// 256 MiB; more than fit in 256 MiB is refused).
    #[arg(long)]
    pub scene_frames: Option<NonZeroU64>,
}

impl SceneArgs {
    /// The scene these options describe.
    pub fn config(&self) -> SceneConfig {
        let mut config = SceneConfig::new(self.cpi);
        config.seed = self.seed;
        config.targets = if self.high_snr {
            high_snr_targets()
        } else if self.targets.is_empty() {
            default_targets()
        } else {
            self.targets.clone()
        };
        config
    }

    /// The scene these options describe, generated.
    pub fn scene(&self) -> anyhow::Result<Scene> {
        Scene::new(self.config()).context("invalid scene")
    }

    /// Distinct scene frames for a run of `frames` frames ([`kplace_radar::graph::scene_frames`]).
    pub fn scene_frames(&self, frames: u64) -> anyhow::Result<NonZeroU64> {
        Ok(kplace_radar::graph::scene_frames(
            self.cpi,
            self.scene_frames,
            frames,
        )?)
    }
}

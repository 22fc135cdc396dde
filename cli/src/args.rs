//! Options shared by several subcommands: the graph and placement, and the scene.

use std::num::NonZeroU64;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use kplace::model::graph::Graph;
use kplace::model::placement::Placement;
use kplace_radar::scene::{default_targets, high_snr_targets};
use kplace_radar::{Cpi, Scene, SceneConfig, Target};

/// The most memory the prepared scene frames of a run may take.
const SCENE_BUDGET_BYTES: u64 = 256 << 20;
/// The most distinct scene frames prepared by default.
const DEFAULT_SCENE_FRAMES: u64 = 64;

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
    /// Loads the graph with `cpi` bound to its `N` and `M` and the parameter overrides, and the
    /// placement with the executor overrides.
    pub fn load(
        &self,
        cpi: Cpi,
        extra_params: &[(String, String, String)],
    ) -> anyhow::Result<(Graph, Placement)> {
        let overrides = kplace_radar::graph::cpi_overrides(
            cpi,
            self.sets.iter().chain(extra_params).cloned().collect(),
        );
        let graph = Graph::load(&self.graph, &overrides)?;
        let mut placement = Placement::load(&self.placement)?;
        let period = match self.stream_rate {
            Some(rate) if rate.is_finite() && rate > 0.0 => 1.0 / rate,
            Some(rate) => bail!("--stream-rate must be a positive number of CPI/s, not {rate}"),
            None => cpi.period_s(),
        };
        placement
            .runtime
            .size_slots(Duration::from_secs_f64(period));
        if let Some(slots) = self.slots {
            if slots == 0 {
                bail!("--slots must be at least 1");
            }
            placement.runtime.slots = slots;
            placement.runtime.auto_slots = None;
        }
        if let Some(workers) = self.workers {
            if workers == 0 {
                bail!("--workers must be at least 1");
            }
            placement.runtime.workers = workers;
            placement
                .runtime
                .pin_cores
                .truncate(if placement.runtime.pin_cores.len() >= workers {
                    placement.runtime.pin_cores.len()
                } else {
                    0
                });
        }
        Ok((graph, placement))
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
    pub fn scene(&self) -> anyhow::Result<Scene> {
        let mut config = SceneConfig::new(self.cpi);
        config.seed = self.seed;
        config.targets = if self.high_snr {
            high_snr_targets()
        } else if self.targets.is_empty() {
            default_targets()
        } else {
            self.targets.clone()
        };
        Scene::new(config).context("invalid scene")
    }

    /// Distinct scene frames for a run of `frames` frames: `--scene-frames` when given, else up
    /// to [`DEFAULT_SCENE_FRAMES`] within the budget. Every prepared frame is held in memory, so
    /// an explicit count whose frames exceed the budget is refused (naming the most this CPI
    /// allows); one frame is always allowed, however large.
    pub fn scene_frames(&self, frames: u64) -> anyhow::Result<NonZeroU64> {
        let frame_bytes = (self.cpi.cells() as u64).saturating_mul(4).max(1);
        let fit = (SCENE_BUDGET_BYTES / frame_bytes).max(1);
        if let Some(n) = self.scene_frames {
            if n.get() > fit {
                let bytes = u128::from(n.get()) * u128::from(frame_bytes);
                bail!(
                    "--scene-frames {n}: {n} prepared frames of CPI {} ({} each) take {bytes} bytes, \
                     more than the {} budget for prepared scene frames; at most {fit} for this CPI",
                    self.cpi,
                    kplace::plan::human_bytes(frame_bytes),
                    kplace::plan::human_bytes(SCENE_BUDGET_BYTES),
                );
            }
            return Ok(n);
        }
        Ok(
            NonZeroU64::new(frames.min(DEFAULT_SCENE_FRAMES).min(fit).max(1))
                .unwrap_or(NonZeroU64::MIN),
        )
    }
}

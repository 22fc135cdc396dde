//! Which workload `kplace run` runs: the radar scene, for a graph that names
//! `workload: fmcw-radar`, or a recording checked against a reference, for any graph
//! (`--recording`). Both run through the runtime's workload seam
//! ([`kplace::workload::run::run_pipeline`]); this module only turns options into one or the
//! other.

use std::path::Path;

use anyhow::{Context, bail};
use kplace::model::graph::{Graph, Overrides};
use kplace::net::udp::UdpSource;
use kplace::net::wire::WireShape;
use kplace::plan::Plan;
use kplace::workload::generic::RecordingSetup;
use kplace::workload::run::{Outputs, PipelineOutcome, PipelineRun, run_pipeline};
use kplace::workload::sinks::SinkFiles;
use kplace_radar::run::{RunConfig, Setup};

use super::{RunArgs, check_mps};

/// The workload name that selects the radar scene and its verifier.
pub(crate) const RADAR: &str = "fmcw-radar";

/// A run's workload, prepared once for all its pipelines.
pub(crate) enum Prepared {
    /// The radar scene, judged by its truth.
    Radar {
        /// The run as the radar workload takes it.
        config: Box<RunConfig>,
        /// The scene and its prepared frames.
        setup: Box<Setup>,
    },
    /// A recording, judged against its reference.
    Recording {
        /// The graph, recording and reference.
        setup: Box<RecordingSetup>,
        /// How each pipeline runs.
        run: PipelineRun,
    },
}

/// Which workload the options name, from one read of the graph.
enum Kind {
    /// The radar scene (`workload: fmcw-radar`, no `--recording`).
    Radar,
    /// A recording, with the graph's `N` and `M` bound to `--cpi` when it declares both.
    Recording(Overrides),
}

/// The workload these options run: a recording with `--recording`; otherwise the radar, for a
/// graph that names it (a graph naming none is refused, saying how to run it).
fn kind(args: &RunArgs) -> anyhow::Result<Kind> {
    let path = &args.graph.graph;
    let probe = Graph::load(path, &Overrides::default())?;
    if args.recording.is_some() {
        let cpi = args.scene.cpi;
        let dims = if probe.dims.contains_key("N") && probe.dims.contains_key("M") {
            vec![
                ("N".into(), cpi.samples as u64),
                ("M".into(), cpi.chirps as u64),
            ]
        } else {
            Vec::new()
        };
        return Ok(Kind::Recording(Overrides {
            dims,
            params: Vec::new(),
        }));
    }
    match probe.workload.as_deref() {
        Some(RADAR) => Ok(Kind::Radar),
        Some(other) => bail!(
            "graph {}: unknown workload {other:?}; kplace knows {RADAR:?}, or runs any graph on a recording (--recording FILE)",
            path.display()
        ),
        None => bail!(
            "graph {} names no workload: run it on a recording of its source with --recording FILE (`kplace record` makes one) and --check reference:PLACEMENT, or add `workload: {RADAR}` to run a radar receiver on the generated scene",
            path.display()
        ),
    }
}

/// The wire of the stream these options receive: the graph's source, one packet per index
/// of its first axis.
pub(crate) fn wire(args: &RunArgs) -> anyhow::Result<WireShape> {
    match kind(args)? {
        Kind::Radar => {
            let cpi = args.scene.cpi;
            Ok(WireShape::ci16(
                u32::try_from(cpi.samples).context("--cpi: samples do not fit a u32")?,
                u32::try_from(cpi.chirps).context("--cpi: chirps do not fit a u32")?,
            ))
        }
        Kind::Recording(overrides) => {
            let graph = Graph::load(&args.graph.graph, &overrides)?;
            WireShape::for_source(&graph).map_err(anyhow::Error::msg)
        }
    }
}

impl Prepared {
    /// Checks and prepares the workload these options name.
    pub(crate) fn new(args: &RunArgs) -> anyhow::Result<Prepared> {
        let overrides = match kind(args)? {
            Kind::Recording(overrides) => overrides,
            Kind::Radar => {
                let config = args.config()?;
                let setup = Setup::new(&config)?;
                return Ok(Prepared::Radar {
                    config: Box::new(config),
                    setup: Box::new(setup),
                });
            }
        };
        let Some(recording) = &args.recording else {
            bail!("a recording run needs --recording FILE");
        };
        if args.pfa.is_some() {
            bail!(
                "--pfa sets the radar workload's CFAR; on a recording set a stage's parameter with --set STAGE.PARAM=VALUE"
            );
        }
        if !args.scene.targets.is_empty()
            || args.scene.high_snr
            || args.scene.scene_frames.is_some()
        {
            bail!(
                "--target, --high-snr and --scene-frames describe the radar's scene; a recording run takes its frames from the recording"
            );
        }
        if args.detections.is_some() {
            bail!(
                "--detections writes the radar's clusters; on a recording write every sink tensor with --write-sinks DIR"
            );
        }
        let setup = RecordingSetup::new(args.graph.files(), overrides, recording, &args.check)?;
        Ok(Prepared::Recording {
            setup: Box::new(setup),
            run: PipelineRun {
                frames: args.frames,
                warmup_frames: args.warmup_frames,
                profile_gpu: args.profile_gpu,
                progress_every: args.report_every,
                trace: args.trace.is_some(),
            },
        })
    }

    /// The sink files of pipeline `index` in `dir` (`dir/p<i>` with several pipelines).
    pub(crate) fn sink_files(
        &self,
        dir: &Path,
        index: Option<usize>,
        format: kplace::workload::sinks::SinkFormat,
    ) -> anyhow::Result<SinkFiles> {
        let graph = match self {
            Prepared::Radar { config, setup } => {
                kplace_radar::graph::load_files(&config.files, setup.cpi(), &[])?.0
            }
            Prepared::Recording { setup, .. } => setup.load()?.0,
        };
        let dir = match index {
            Some(i) => dir.join(format!("p{i}")),
            None => dir.to_path_buf(),
        };
        SinkFiles::create(&dir, &graph, format)
            .with_context(|| format!("--write-sinks {}", dir.display()))
    }

    /// Plans and runs pipeline `index` (or the only one) on `udp`, or on a replay.
    pub(crate) fn run(
        &self,
        udp: Option<UdpSource>,
        index: Option<usize>,
        outputs: Outputs,
    ) -> anyhow::Result<PipelineOutcome> {
        match self {
            Prepared::Radar { config, setup } => Ok(kplace_radar::run::run_pipeline(
                config, setup, udp, index, outputs, &check_mps,
            )?),
            Prepared::Recording { setup, run } => {
                let (graph, placement) = setup.load()?;
                let plan = Plan::new(graph, placement)?;
                Ok(run_pipeline(
                    &plan,
                    &setup.workload,
                    run,
                    udp,
                    index,
                    outputs,
                    &check_mps,
                )?)
            }
        }
    }
}
